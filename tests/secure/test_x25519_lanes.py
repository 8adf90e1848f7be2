"""The eight-lane X25519 (`ldpcollect/secure/x25519_lanes.c`, AVX-512 IFMA) that the batch
HPKE opens use where the CPU has it, against two independent implementations: OpenSSL (the
same call with `lanes=False`) and `cryptography`'s X25519. RFC 7748's vectors, random
scalars and points (short groups too: a group of fewer than eight repeats its first point),
and the points where implementations go wrong: the top bit set, u at or above p, and the
low-order points, whose all-zero result RFC 9180 refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.secure import _native_hpke
from ldpcollect.secure.sealing import ROLE_HELPER, ROLE_LEADER, open_bound_shares
from tests.secure.test_native_hpke import KEY, Case, case_lists, reference, sealed

P = 2**255 - 19


def le(n: int) -> bytes:
    return (n % 2**256).to_bytes(32, "little")


def independent(scalar: bytes, point: bytes) -> bytes | None:
    """`cryptography`'s X25519; None where it refuses the all-zero result."""
    try:
        key = X25519PrivateKey.from_private_bytes(scalar)
        return key.exchange(X25519PublicKey.from_public_bytes(point))
    except ValueError:
        return None


def both(scalars: bytes | list[bytes], points: list[bytes]) -> list[bytes | None]:
    """The lanes' results (one scalar for every point, or one each), after checking that
    OpenSSL's are the same."""
    each = [scalars] * len(points) if isinstance(scalars, bytes) else scalars
    lanes = _native_hpke.x25519(each, points, True)
    assert lanes == _native_hpke.x25519(each, points, False)
    return lanes


# Points of small order (the curve's and its twist's, Bernstein's list), each also as u + p.
LOW_ORDER = [
    0,
    1,
    325606250916557431795983626356110631294008115727848805560023387167927233504,
    39382357235489614581723060781553021112529911719440698176882885853963445705823,
    P - 1,
    P,
    P + 1,
]
EDGES = [
    *LOW_ORDER,
    *(u + P for u in LOW_ORDER[2:4]),
    P - 2,
    2**255 - 1,  # the largest u below the top bit: above p
    2**256 - 1,  # the top bit set: ignored
    9 + 2**255,  # the base point with the top bit set
    9,
]


def test_the_lanes_run_where_the_cpu_has_ifma() -> None:
    """The dispatch follows the CPU: on a machine with AVX-512 IFMA the lanes are what the
    batches use, so the comparisons below test them and not OpenSSL against itself."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    has = " avx512ifma" in flags and " avx512f" in flags
    assert _native_hpke.lanes_available() == has


def test_rfc_7748_vectors() -> None:
    scalar = bytes.fromhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4")
    u = bytes.fromhex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")
    out = "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"
    assert [r.hex() if r else r for r in both(scalar, [u] * 8)] == [out] * 8
    alice = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    bob_public = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
    base = le(9)
    alice_public = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    results = both(alice, [bob_public, base, bob_public, base, bob_public])
    assert [r.hex() if r else r for r in results] == [shared, alice_public] * 2 + [shared]


def test_rfc_7748_iterated_to_a_thousand() -> None:
    """RFC 7748 5.2: k = u = 9, then k, u = X25519(k, u), k, a thousand times."""
    k = u = le(9)
    for i in range(1000):
        out = both(k, [u] * 3)[0]
        assert out is not None
        k, u = out, k
        if i == 0:
            assert k.hex() == "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"
    assert k.hex() == "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51"


@pytest.mark.parametrize("seed", range(4))
def test_the_edge_points_give_what_cryptography_gives(seed: int) -> None:
    scalar = bytes((seed * 37 + i * 11) % 256 for i in range(32))
    points = [le(u) for u in EDGES]
    assert both(scalar, points) == [independent(scalar, p) for p in points]
    for u in LOW_ORDER:  # every low-order point gives the all-zero secret: refused
        assert both(scalar, [le(u)] * 8) == [None] * 8


@settings(max_examples=60)
@given(
    scalar=st.binary(min_size=32, max_size=32),
    points=st.lists(
        st.one_of(
            st.binary(min_size=32, max_size=32),
            st.sampled_from(EDGES).map(le),
        ),
        max_size=21,
    ),
)
def test_random_scalars_and_points_give_what_cryptography_gives(
    scalar: bytes, points: list[bytes]
) -> None:
    assert both(scalar, points) == [independent(scalar, p) for p in points]


@settings(max_examples=40)
@given(
    pairs=st.lists(
        st.tuples(st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32)),
        max_size=21,
    )
)
def test_a_scalar_per_lane_gives_what_cryptography_gives(pairs: list[tuple[bytes, bytes]]) -> None:
    """Each lane its own scalar (a fleet's ephemeral keys): with the base point, each key's
    public key; with another point, each shared secret."""
    scalars = [s for s, _ in pairs]
    base = [le(9)] * len(pairs)
    publics = [
        X25519PrivateKey.from_private_bytes(s).public_key().public_bytes_raw() for s in scalars
    ]
    assert both(scalars, base) == publics
    assert both(scalars, [p for _, p in pairs]) == [independent(s, p) for s, p in pairs]


def test_malformed_points_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="each point must be 32 bytes"):
        _native_hpke.x25519([bytes(32)], [bytes(31)], True)
    with pytest.raises(ValueError, match="each scalar must be 32 bytes"):
        _native_hpke.x25519([bytes(31)], [bytes(32)], True)
    with pytest.raises(ValueError, match="as many scalars as points"):
        _native_hpke.x25519([bytes(32)], [], True)


@settings(max_examples=30)
@given(batch=case_lists(40, 200, 30), role=st.sampled_from([ROLE_LEADER, ROLE_HELPER]))
def test_the_batch_opens_give_the_same_with_and_without_the_lanes(
    batch: list[Case], role: int
) -> None:
    """Batches up to 30 (groups of eight, short groups, and OpenSSL for the last one or two),
    honest and spoiled shares mixed: the same plaintexts and refusals either way, and the
    reference's."""
    items = [sealed(KEY, role, case) for case in batch]
    before = _native_hpke.set_lanes(True)
    try:
        with_lanes = open_bound_shares(KEY, role, "q", 1, items)
        _native_hpke.set_lanes(False)
        without = open_bound_shares(KEY, role, "q", 1, items)
    finally:
        _native_hpke.set_lanes(before)
    assert with_lanes == without
    for item, result in zip(items, with_lanes, strict=True):
        expected = reference(KEY, role, item)
        assert result == (expected if isinstance(expected, bytes) else None)
