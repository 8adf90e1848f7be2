"""Queries a device must refuse (vectors/device/refusals.json): malformed parameters, an
unknown mechanism, a helper key that does not come from the helper."""

from __future__ import annotations

from typing import Any

from client.device_vector_cases import GRID, PARIS, Case, h3_scheme, rr_spec, secure_query, sp_spec
from client.device_vectors import (
    HELPER_KEY,
    REFUSALS_FORMAT,
    hpke_key,
)
from client.query_info import QueryInfo
from client.secure_device import SecureDevice
from client.secure_keys import UntrustedAggregator
from ldpcollect.errors import ParameterError
from ldpcollect.secure.sealing import HpkeConfig, SealingError
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb

# -- queries a device must refuse ---------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _refusal_query(name: str, **changes: Any) -> pb.Query:
    fields: dict[str, Any] = {
        "query_id": f"bad-{name}",
        "mechanism": rr_spec("0.85", "0.3"),
        "location_scheme": GRID,
        "targets": [1, 2, 3],
        "rounds": 1,
        "current_round": 1,
        "state": pb.QUERY_STATE_OPEN,
    }
    fields.update(changes)
    return pb.Query(**{k: v for k, v in fields.items() if v is not None})


def _unknown_mechanism() -> bytes:
    """A Query whose MechanismSpec holds only a field this version does not know (3)."""
    base = _refusal_query("unknown-mechanism", mechanism=None).SerializeToString()
    spec = b"\x1a\x02\x0a\x00"  # MechanismSpec field 3: an (empty) message of a future mechanism
    return base + b"\x1a" + _varint(len(spec)) + spec


def trusted_refusals() -> list[tuple[str, str, bytes]]:
    """(name, what is wrong, Query bytes) a device must refuse to answer."""
    made: list[tuple[str, str, dict[str, Any]]] = [
        ("flip1-above-one", "flip1 1.5 is not a probability", {"mechanism": rr_spec("1.5", "0.3")}),
        ("flip1-zero", "flip1 must be in (0, 1]", {"mechanism": rr_spec("0", "0.3")}),
        (
            "flip2-not-a-number",
            "flip2 is not decimal or fraction text",
            {"mechanism": rr_spec("0.85", "abc")},
        ),
        ("flip2-huge-exponent", "exponent beyond +-30", {"mechanism": rr_spec("0.85", "1e-400")}),
        (
            "flip2-too-long",
            "longer than 64 characters",
            {"mechanism": rr_spec("0.85", "0." + "3" * 70)},
        ),
        ("flip2-zero-denominator", "division by zero", {"mechanism": rr_spec("0.85", "1/0")}),
        (
            "sampling-rate-zero",
            "sampling_rate must be in (0, 1]",
            {"mechanism": sp_spec("0"), "rounds": 2},
        ),
        ("no-mechanism", "no mechanism set", {"mechanism": None}),
        ("no-location-scheme", "no location scheme set", {"location_scheme": None}),
        ("h3-resolution-16", "H3 resolutions run 0..15", {"location_scheme": h3_scheme(16)}),
        ("no-targets", "a query has 1 to 65,536 targets", {"targets": []}),
        ("duplicate-target", "a target twice", {"targets": [1, 2, 1]}),
    ]
    out = [
        (name, why, _refusal_query(name, **changes).SerializeToString())
        for name, why, changes in made
    ]
    out.append(("unknown-mechanism", "a mechanism this device does not know", _unknown_mechanism()))
    return out


def secure_refusals() -> list[tuple[str, str, bytes, bytes]]:
    """(name, what is wrong, SecureQuery bytes, the helper's own config) to refuse."""
    good = Case("refusal", "", rr_spec("0.85", "0.3"), GRID, *PARIS, [1, 2, 3], secure=True)
    pinned = HELPER_KEY.config.encode()
    other = hpke_key("impostor", 0x2B).config.encode()

    def q(**changes: Any) -> bytes:
        query = secure_query(good)
        for key, value in changes.items():
            setattr(query, key, b"" if value is None else value)
        return query.SerializeToString()

    mechanism_less = spb.SecureQuery.FromString(q())
    mechanism_less.ClearField("mechanism")
    return [
        (
            "helper-config-missing",
            "the query has no helper HPKE config",
            q(helper_hpke_config=None),
            pinned,
        ),
        (
            "leader-config-missing",
            "the query has no leader HPKE config",
            q(leader_hpke_config=None),
            pinned,
        ),
        (
            "helper-config-malformed",
            "the leader's copy of the helper's config is not 33 bytes",
            q(helper_hpke_config=pinned[:32]),
            pinned,
        ),
        ("same-key-twice", "leader and helper share one key", q(leader_hpke_config=pinned), pinned),
        (
            "helper-config-not-the-helpers",
            "the leader's copy differs from the helper's own key",
            q(helper_hpke_config=other),
            pinned,
        ),
        ("no-mechanism", "no mechanism set", mechanism_less.SerializeToString(), pinned),
        (
            "flip1-above-one",
            "flip1 1.5 is not a probability",
            _secure_with(q(), rr_spec("1.5", "0.3")),
            pinned,
        ),
    ]


def _secure_with(encoded: bytes, mechanism: pb.MechanismSpec) -> bytes:
    query = spb.SecureQuery.FromString(encoded)
    query.mechanism.CopyFrom(mechanism)
    return query.SerializeToString()


def refused(mode: str, query: bytes, helper_config: bytes | None = None) -> str | None:
    """The SDK's refusal of a query (its message), or None when it would answer."""
    try:
        if mode == "secure":
            secure = spb.SecureQuery.FromString(query)
            assert helper_config is not None
            SecureDevice(secure, HpkeConfig.decode(helper_config))
        else:
            QueryInfo.from_proto(pb.Query.FromString(query))
    except (ParameterError, UntrustedAggregator, SealingError) as error:
        return str(error)
    return None


def refusal_vectors() -> dict[str, Any]:
    cases: list[dict[str, Any]] = []
    for name, why, query in trusted_refusals():
        cases.append(
            {"name": f"trusted-{name}", "mode": "trusted", "why": why, "query": query.hex()}
        )
    for name, why, query, helper in secure_refusals():
        cases.append(
            {
                "name": f"secure-{name}",
                "mode": "secure",
                "why": why,
                "query": query.hex(),
                "helper_hpke_config": helper.hex(),
            }
        )
    return {"format": REFUSALS_FORMAT, "cases": cases}
