"""The device conformance vectors (docs/device-protocol.md, vectors/device/): every case's
inputs (location, the query's wire bytes, each random byte the device draws, keys) and what
the Python SDK computes from them (cell, draw, answers per round, report bytes).

`build_vectors()` makes the cases from fixed inputs: every random byte is derived from a
label with SHAKE-256, so the output is the same on every run. `compute(inputs)` runs the SDK
on a case's inputs; `ldpcollect vectors device --out DIR` writes the files, and
tests/client/test_device_vectors.py checks that the checked-in files are exactly what this
build computes. The keys here (issuer RSA key, HPKE keys) are test keys, published on
purpose: never use them for anything else.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from client.device import Device
from client.device_vector_keys import ISSUER_TEST_KEY_PEM
from client.query_info import QueryInfo
from client.secure_device import SecureDevice, report_challenge
from client.tokens import IssuerKey
from client.tokens import report_challenge as trusted_challenge
from ldpcollect import bits
from ldpcollect.admission.directory import DirectoryKey, IssuerDirectory
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import (
    TokenChallenge,
    finalize_token,
    request_token,
    sign_token_request,
)
from ldpcollect.errors import ParameterError
from ldpcollect.geo import h3cells, scheme_from_text
from ldpcollect.mechanisms import SamplingPrivacy
from ldpcollect.randomness import ScriptedRandom
from ldpcollect.secure.query_vdaf import measurement, query_vdaf
from ldpcollect.secure.sealing import (
    ROLE_HELPER,
    ROLE_LEADER,
    HpkeConfig,
    HpkeKeyPair,
    input_share_info,
)
from ldpcollect.secure.upload import SecureReport, vdaf_context
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb

FORMAT = "ldpcollect.device-vector/1"
REFUSALS_FORMAT = "ldpcollect.device-refusals/1"
ISSUER_NAME = "issuer.example:8443"
LEADER_ORIGIN, HELPER_ORIGIN = "leader.example:9443", "helper.example:9444"
OUTSIDE = 2**64 - 1


def derived(label: str, n: int) -> bytes:
    """`n` fixed 'random' bytes for a vector: SHAKE-256 of a label."""
    return hashlib.shake_256(b"ldpcollect device vectors/" + label.encode()).digest(n)


def hpke_key(role: str, config_id: int) -> HpkeKeyPair:
    return HpkeKeyPair.from_private_bytes(config_id, derived(f"hpke {role}", 32))


LEADER_KEY, HELPER_KEY, COLLECTOR_KEY = (
    hpke_key("leader", 0x2A),
    hpke_key("helper", 0x2B),
    hpke_key("collector", 0x2C),
)


def issuer_key() -> TokenSigningKey:
    return TokenSigningKey.from_pem(ISSUER_TEST_KEY_PEM.encode())


# -- the SDK run on one case's inputs -----------------------------------------------------


def _hexes(values: Sequence[bytes]) -> list[str]:
    return [v.hex() for v in values]


def _bit_text(data: bytes, n: int) -> str:
    return "".join("1" if b else "0" for b in bits.unpack(data, n))


def _cell_json(info_scheme: str, cell: int) -> dict[str, object]:
    out: dict[str, object] = {"cell": str(cell), "outside": cell == OUTSIDE}
    if info_scheme.startswith("h3") and cell != OUTSIDE:
        out["cell_hex"] = h3cells.to_text(cell)
    return out


def _blind_r(label: str, n: int) -> int:
    r = int.from_bytes(derived(label, 256), "big") % n
    while math.gcd(r, n) != 1 or r < 2:
        r += 1
    return r


def token_inputs(label: str, rounds: int) -> list[dict[str, str]]:
    """What the device draws for each round's token (nonce, PSS salt, blinding factor r), and
    the issuer's blind signature over the resulting request (the issuer's answer)."""
    signing = issuer_key()
    n = signing.public.key.public_numbers().n
    return [
        {
            "nonce": derived(f"{label} token {r} nonce", 32).hex(),
            "salt": derived(f"{label} token {r} salt", 48).hex(),
            "blind_r": format(_blind_r(f"{label} token {r} r", n), "x"),
        }
        for r in range(1, rounds + 1)
    ]


def _token(key: IssuerKey, challenge: TokenChallenge, given: Mapping[str, str]) -> dict[str, str]:
    """Blind, have the test issuer sign, finalize: every byte of one token's life."""
    request, pending = request_token(
        key.key,
        challenge,
        nonce=bytes.fromhex(given["nonce"]),
        salt=bytes.fromhex(given["salt"]),
        r=int(given["blind_r"], 16),
    )
    response = sign_token_request(issuer_key(), request)
    token = finalize_token(pending, response)
    return {
        "challenge": challenge.encode().hex(),
        "challenge_digest": challenge.digest().hex(),
        "token_key_id": key.key.token_key_id.hex(),
        "token_input": pending.token_input().hex(),
        "token_request": request.encode().hex(),
        "token_response": response.encode().hex(),
        "token": token.encode().hex(),
    }


def issuer_inputs() -> dict[str, str]:
    """What a device learns from the issuer's GetDirectory: its name and directory."""
    directory = IssuerDirectory(
        f"https://{ISSUER_NAME}/token", (DirectoryKey(issuer_key().public),)
    )
    return {"issuer_name": ISSUER_NAME, "directory_json": directory.to_json()}


def _issuer(inputs: Mapping[str, Any]) -> IssuerKey:
    """The issuer key a device takes from the directory (never from an issuance response)."""
    given = inputs["issuer"]
    key = IssuerDirectory.from_json(given["directory_json"]).key_at(0)
    return IssuerKey(given["issuer_name"], key)


def compute_trusted(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What a trusted-mode device computes from the case's inputs, through `client.device`."""
    query = pb.Query.FromString(bytes.fromhex(inputs["query"]))
    info = QueryInfo.from_proto(query)
    random = inputs["random"]
    stream = (
        bytes.fromhex(random["draw"])
        + bytes.fromhex(random["pseudonym"])
        + b"".join(bytes.fromhex(r) for r in random["report_ids"])
    )
    source = ScriptedRandom(stream)
    location = info.locate(inputs["location"]["lat"], inputs["location"]["lon"])
    with tempfile.TemporaryDirectory() as tmp:
        device = Device(
            Path(tmp) / "state.json",
            inputs["location"]["lat"],
            inputs["location"]["lon"],
            random_source=source,
        )
        record = device._decide(info)  # the SDK's own decision, on the given bytes
    if source.left:
        raise ParameterError("random bytes", source.left, "every given byte drawn", "unused")
    assert record.draw is not None
    draw_used = len(bytes.fromhex(random["draw"]))
    tokens: list[dict[str, str]] = []
    for round_, given in enumerate(inputs.get("tokens") or [], start=1):
        issuer = _issuer(inputs)
        minted = _token(issuer, trusted_challenge(issuer, query, round_), given)
        record.set_token(round_, bytes.fromhex(minted["token"]))
        tokens.append(minted)
    rounds = range(1, record.draw.rounds + 1)
    out: dict[str, Any] = {
        "scheme": info.scheme_text,
        "mechanism": {"name": info.mechanism.name, **info.mechanism.params()},
        **_cell_json(info.scheme_text, location),
        "target_index": info.targets.index(location) if location in info.targets else -1,
        "draw_bytes_used": draw_used,
        "answers": [record.draw.answers(r).hex() for r in rounds],
        "answer_bits": [_bit_text(record.draw.answers(r), len(info.targets)) for r in rounds],
        "reports": [
            pb.SubmitReportRequest(report=Device.report(record, r)).SerializeToString().hex()
            for r in rounds
        ],
    }
    if isinstance(info.mechanism, SamplingPrivacy):
        out["selected"] = record.draw.answers(1) != record.draw.answers(2)
    if tokens:
        out["tokens"] = tokens
    return out


def compute_secure(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What a secure-mode device computes, through `client.secure_device`."""
    query = spb.SecureQuery.FromString(bytes.fromhex(inputs["query"]))
    # The helper's key comes from the helper (or its published copy), never only from the
    # leader: the SDK refuses a query whose copy differs.
    device = SecureDevice(query, HpkeConfig.decode(bytes.fromhex(inputs["helper_hpke_config"])))
    random = inputs["random"]
    scheme = scheme_from_text(inputs["scheme"])
    lat, lon = inputs["location"]["lat"], inputs["location"]["lon"]
    try:
        location = scheme.locate(lat, lon)
    except ParameterError:
        location = OUTSIDE
    source = ScriptedRandom(bytes.fromhex(random["draw"]))
    draw = device.draw(location, source)
    if source.left:
        raise ParameterError("random bytes", source.left, "every given byte drawn", "unused")
    report_id = bytes.fromhex(random["report_id"])
    rand = bytes.fromhex(random["vdaf_rand"])
    ikm = (
        bytes.fromhex(random["hpke_ikm_e"]["leader"]),
        bytes.fromhex(random["hpke_ikm_e"]["helper"]),
    )
    sealed = device.seal(draw, report_id, rand=rand, ikm_e=ikm)
    rounds = [[int(b) for b in draw.answer_bits(r)] for r in range(1, draw.rounds + 1)]
    meas = measurement(device.kind, rounds)
    vdaf = query_vdaf(device.kind, len(query.targets))
    ctx = vdaf_context(query.query_id)
    public_share, shares = vdaf.shard(ctx, meas, report_id, rand)
    public = vdaf.encode_public_share(public_share)
    report = SecureReport.decode(sealed)
    meta = (query.query_id, query.upload_round, report_id, public)
    token: dict[str, str] | None = None
    tokens: list[bytes] = []
    if inputs.get("token"):
        issuer = _issuer(inputs)
        token = _token(issuer, report_challenge(issuer, query), inputs["token"])
        tokens = [bytes.fromhex(token["token"])]
    upload = spb.UploadSecureReportsRequest(reports=[sealed], tokens=tokens)
    n_targets = len(query.targets)
    out: dict[str, Any] = {
        "scheme": inputs["scheme"],
        "mechanism": {"name": device.mechanism.name, **device.mechanism.params()},
        **_cell_json(inputs["scheme"], location),
        "target_index": list(query.targets).index(location) if location in query.targets else -1,
        "draw_bytes_used": source.used,
        "answers": list(_hexes(draw.packed)),
        "answer_bits": [_bit_text(a, n_targets) for a in draw.packed],
        "vdaf": {
            "kind": device.kind,
            "id": vdaf.vdaf_id,
            "chunk_length": vdaf.flp.valid.chunk_length,  # type: ignore[attr-defined]
            "meas_len": vdaf.flp.meas_len,
            "proof_len": vdaf.flp.proof_len,
            "rand_size": vdaf.rand_size,
        },
        "measurement": "".join(str(x) for x in vdaf.flp.encode(meas)),
        "context": ctx.hex(),
        "public_share": public.hex(),
        "leader_input_share": vdaf.encode_input_share(shares[0]).hex(),
        "helper_input_share": vdaf.encode_input_share(shares[1]).hex(),
        "leader_info": input_share_info(ROLE_LEADER, *meta).hex(),
        "helper_info": input_share_info(ROLE_HELPER, *meta).hex(),
        "leader_ciphertext": report.leader_ciphertext.hex(),
        "helper_ciphertext": report.helper_ciphertext.hex(),
        "report": sealed.hex(),
        "upload_request": upload.SerializeToString().hex(),
    }
    if isinstance(device.mechanism, SamplingPrivacy):
        out["selected"] = draw.packed[0] != draw.packed[1]
    if token is not None:
        out["tokens"] = [token]
    return out


def compute(case: Mapping[str, Any]) -> dict[str, Any]:
    """The expected outputs of a case (a vector's "mode" and "inputs")."""
    if case["mode"] == "secure":
        return compute_secure(case["inputs"])
    return compute_trusted(case["inputs"])
