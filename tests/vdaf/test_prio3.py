"""Prio3 end to end through its byte encodings: honest reports aggregate to the true totals
(2 to 4 aggregators, one to three proofs); a report with any byte flipped, a mismatched
context, or a malformed message is refused with a VdafError."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.flp import Flp
from ldpcollect.vdaf.prio3 import HelperShare, LeaderShare, Prio3
from ldpcollect.vdaf.variants import (
    prio3_count,
    prio3_histogram,
    prio3_multihot_count_vec,
    prio3_sum,
    prio3_sum_vec,
)

CTX = b"ldpcollect test"
VERIFY_KEY = bytes(range(32))
AnyPrio3 = Prio3[Any, Any]


def variants(shares: int) -> dict[str, tuple[AnyPrio3, list[Any], Any]]:
    """Each variant with a few measurements and their true aggregate."""
    return {
        "Count": (prio3_count(shares), [1, 0, 1], 2),
        "Sum": (prio3_sum(shares, 1337), [1337, 0, 42], 1379),
        "SumVec": (prio3_sum_vec(shares, 3, 7, 2), [[7, 0, 1], [1, 2, 3]], [8, 2, 4]),
        "Histogram": (prio3_histogram(shares, 10, 3), [4, 9, 4], [0] * 4 + [2] + [0] * 4 + [1]),
        "MultihotCountVec": (
            prio3_multihot_count_vec(shares, 5, 2, 2),
            [[True, False, False, False, True], [False] * 5, [True, True, False, False, False]],
            [2, 1, 0, 0, 1],
        ),
    }


def shard_encoded(
    vdaf: AnyPrio3, measurement: Any, rng: random.Random
) -> tuple[bytes, bytes, list[bytes]]:
    """(nonce, public share, input shares) as a client would send them."""
    nonce = rng.randbytes(vdaf.nonce_size)
    public_share, input_shares = vdaf.shard(CTX, measurement, nonce, rng.randbytes(vdaf.rand_size))
    return (
        nonce,
        vdaf.encode_public_share(public_share),
        [vdaf.encode_input_share(s) for s in input_shares],
    )


def verify(
    vdaf: AnyPrio3,
    nonce: bytes,
    public_share: bytes,
    input_shares: list[bytes],
    ctx: bytes = CTX,
    tamper_verifier_share: tuple[int, int] | None = None,
) -> list[list[int]]:
    """Every aggregator's verification from the encoded messages; the output shares."""
    states, verifier_shares = [], []
    for agg_id, encoded in enumerate(input_shares):
        state, share = vdaf.verify_init(
            VERIFY_KEY,
            ctx,
            agg_id,
            nonce,
            vdaf.decode_public_share(public_share),
            vdaf.decode_input_share(agg_id, encoded),
        )
        states.append(state)
        verifier_shares.append(vdaf.encode_verifier_share(share))
    if tamper_verifier_share is not None:
        agg_id, position = tamper_verifier_share
        verifier_shares[agg_id] = flip(verifier_shares[agg_id], position)
    message = vdaf.encode_verifier_message(
        vdaf.verifier_shares_to_message(
            ctx, [vdaf.decode_verifier_share(s) for s in verifier_shares]
        )
    )
    return [vdaf.verify_next(state, vdaf.decode_verifier_message(message)) for state in states]


def flip(data: bytes, position: int) -> bytes:
    """`data` with its lowest bit at `position` flipped: the smallest change there is."""
    changed = bytearray(data)
    changed[position] ^= 0x01
    return bytes(changed)


@pytest.mark.parametrize("shares", [2, 3, 4])
@pytest.mark.parametrize("name", ["Count", "Sum", "SumVec", "Histogram", "MultihotCountVec"])
def test_honest_reports_aggregate_to_the_true_total(shares: int, name: str) -> None:
    vdaf, measurements, expected = variants(shares)[name]
    rng = random.Random(f"{name} {shares}")
    agg_shares = [vdaf.agg_init() for _ in range(shares)]
    for measurement in measurements:
        out_shares = verify(vdaf, *shard_encoded(vdaf, measurement, rng))
        agg_shares = [vdaf.agg_update(a, o) for a, o in zip(agg_shares, out_shares, strict=True)]
    encoded = [vdaf.encode_agg_share(a) for a in agg_shares]
    decoded = [vdaf.decode_agg_share(e) for e in encoded]
    assert vdaf.unshard(decoded, len(measurements)) == expected


@pytest.mark.parametrize("proofs", [2, 3])
def test_multiple_proofs_are_all_checked(proofs: int) -> None:
    base = prio3_histogram(2, 10, 3)
    vdaf: AnyPrio3 = Prio3(base.vdaf_id, base.flp, 2, proofs=proofs)
    rng = random.Random(proofs)
    nonce, public_share, input_shares = shard_encoded(vdaf, 7, rng)
    assert vdaf.unshard(verify(vdaf, nonce, public_share, input_shares), 1)[7] == 1

    # The last proof's last element (just before the blind) is wrong: rejected.
    leader = input_shares[0]
    input_shares[0] = flip(leader, len(leader) - 32 - 1)
    with pytest.raises(VdafError):
        verify(vdaf, nonce, public_share, input_shares)


def test_message_sizes_for_two_aggregators() -> None:
    rng = random.Random(0)
    count = prio3_count(2)
    _, public_share, (leader, helper) = shard_encoded(count, 1, rng)
    assert (len(public_share), len(leader), len(helper)) == (0, 48, 32)
    histogram = prio3_histogram(2, 100, 10)
    _, public_share, (leader, helper) = shard_encoded(histogram, 42, rng)
    assert (len(public_share), len(leader), len(helper)) == (64, 2448, 64)


def tamper_positions(length: int, rng: random.Random, count: int = 24) -> list[int]:
    """The first and last byte and a seeded sample between."""
    if length <= count:
        return list(range(length))
    return sorted({0, length - 1, *rng.sample(range(length), count - 2)})


@pytest.mark.parametrize("name", ["Count", "Sum", "SumVec", "Histogram", "MultihotCountVec"])
def test_any_flipped_byte_in_a_share_is_refused(name: str) -> None:
    vdaf, measurements, _ = variants(2)[name]
    rng = random.Random(f"tamper {name}")
    nonce, public_share, input_shares = shard_encoded(vdaf, measurements[0], rng)
    verify(vdaf, nonce, public_share, input_shares)  # untouched: accepted

    for agg_id, share in enumerate(input_shares):
        for position in tamper_positions(len(share), rng):
            tampered = list(input_shares)
            tampered[agg_id] = flip(share, position)
            with pytest.raises(VdafError):
                verify(vdaf, nonce, public_share, tampered)
    for position in tamper_positions(len(public_share), rng):
        with pytest.raises(VdafError):
            verify(vdaf, nonce, flip(public_share, position), input_shares)


@pytest.mark.parametrize("name", ["Count", "Histogram"])
def test_a_flipped_byte_in_a_verifier_share_is_refused(name: str) -> None:
    vdaf, measurements, _ = variants(2)[name]
    rng = random.Random(f"verifier {name}")
    report = shard_encoded(vdaf, measurements[0], rng)
    size = vdaf.flp.verifier_len * vdaf.field.encoded_size + (32 if vdaf.uses_joint_rand else 0)
    for agg_id in (0, 1):
        for position in tamper_positions(size, rng, count=12):
            with pytest.raises(VdafError):
                verify(vdaf, *report, tamper_verifier_share=(agg_id, position))


@pytest.mark.parametrize("name", ["Count", "Histogram"])
def test_aggregators_with_another_context_refuse_the_report(name: str) -> None:
    vdaf, measurements, _ = variants(2)[name]
    report = shard_encoded(vdaf, measurements[0], random.Random(3))
    with pytest.raises(VdafError):
        verify(vdaf, *report, ctx=b"another application")


def test_a_dishonest_client_cannot_choose_the_joint_randomness() -> None:
    """A client proving an invalid histogram (two ones) must derive the joint randomness
    from the shares it sends; here it proves with the honest randomness of a valid
    measurement and swaps the measurement share: the aggregators' parts differ."""
    vdaf = prio3_histogram(2, 10, 3)
    rng = random.Random(9)
    nonce, public_share, input_shares = shard_encoded(vdaf, 2, rng)
    leader = vdaf.decode_input_share(0, input_shares[0])
    assert isinstance(leader, LeaderShare)
    p = vdaf.field.modulus
    moved = list(leader.meas_share)
    moved[5] = (moved[5] + 1) % p  # now buckets 2 and 5 are both 1
    forged = LeaderShare(moved, leader.proofs_share, leader.blind)
    with pytest.raises(VdafError):
        verify(vdaf, nonce, public_share, [vdaf.encode_input_share(forged), input_shares[1]])


def test_malformed_messages_are_refused_with_their_expected_size() -> None:
    vdaf = prio3_histogram(2, 10, 3)
    with pytest.raises(VdafError, match="the leader's input share must be 528 bytes, got 527"):
        vdaf.decode_input_share(0, bytes(527))
    with pytest.raises(VdafError, match="helper 1's input share must be 64 bytes, got 32"):
        vdaf.decode_input_share(1, bytes(32))
    with pytest.raises(VdafError, match="public share must be 64 bytes, got 0"):
        vdaf.decode_public_share(b"")
    with pytest.raises(VdafError, match="verifier share must be"):
        vdaf.decode_verifier_share(bytes(10))
    with pytest.raises(VdafError, match="verifier message must be 32 bytes, got 0"):
        vdaf.decode_verifier_message(b"")
    with pytest.raises(VdafError, match="aggregate share must be 160 bytes"):
        vdaf.decode_agg_share(bytes(16))
    with pytest.raises(VdafError, match=r"aggregator id must be in \[0, 2\), got 2"):
        vdaf.decode_input_share(2, bytes(64))
    count = prio3_count(2)
    with pytest.raises(VdafError, match="public share must be 0 bytes"):
        count.decode_public_share(bytes(32))


def test_bad_arguments_to_shard_and_verify_init_are_refused() -> None:
    vdaf = prio3_count(2)
    with pytest.raises(VdafError, match="nonce must be 16 bytes, got 15"):
        vdaf.shard(CTX, 1, bytes(15), bytes(vdaf.rand_size))
    with pytest.raises(VdafError, match="sharding randomness must be 64 bytes, got 63"):
        vdaf.shard(CTX, 1, bytes(16), bytes(63))
    with pytest.raises(VdafError, match="a Count measurement is 0 or 1"):
        vdaf.shard(CTX, 5, bytes(16), bytes(vdaf.rand_size))
    _, input_shares = vdaf.shard(CTX, 1, bytes(16), bytes(vdaf.rand_size))
    with pytest.raises(VdafError, match="verify key must be 32 bytes, got 16"):
        vdaf.verify_init(bytes(16), CTX, 0, bytes(16), None, input_shares[0])
    with pytest.raises(VdafError, match="aggregator 1 needs a helper's input share"):
        vdaf.verify_init(VERIFY_KEY, CTX, 1, bytes(16), None, input_shares[0])
    with pytest.raises(VdafError, match="aggregator 0 needs the leader's input share"):
        vdaf.verify_init(VERIFY_KEY, CTX, 0, bytes(16), None, HelperShare(bytes(32), None))
    with pytest.raises(VdafError, match="need 2 verifier shares, got 0"):
        vdaf.verifier_shares_to_message(CTX, [])
    with pytest.raises(VdafError, match="shares must be in"):
        Prio3(1, Flp(vdaf.flp.valid), 1)


def test_batch_verification_reports_each_rejection_in_place() -> None:
    vdaf = prio3_histogram(2, 10, 3)
    rng = random.Random(11)
    good = shard_encoded(vdaf, 1, rng)
    reports = []
    for nonce, public_share, input_shares in (good, good):
        reports.append(
            (
                nonce,
                vdaf.decode_public_share(public_share),
                vdaf.decode_input_share(0, input_shares[0]),
            )
        )
    reports[1] = (bytes(3), reports[1][1], reports[1][2])

    results = vdaf.verify_init_batch(VERIFY_KEY, CTX, 0, reports)

    assert not isinstance(results[0], VdafError)
    assert isinstance(results[1], VdafError)
    assert "nonce must be 16 bytes" in str(results[1])


@given(
    bucket=st.integers(min_value=0, max_value=9),
    nonce=st.binary(min_size=16, max_size=16),
    rand=st.binary(min_size=128, max_size=128),
)
def test_any_sharding_randomness_verifies_and_unshards_to_the_measurement(
    bucket: int, nonce: bytes, rand: bytes
) -> None:
    vdaf = prio3_histogram(2, 10, 3)
    public_share, input_shares = vdaf.shard(CTX, bucket, nonce, rand)
    encoded = [vdaf.encode_input_share(s) for s in input_shares]
    out_shares = verify(vdaf, nonce, vdaf.encode_public_share(public_share), encoded)
    expected = [0] * 10
    expected[bucket] = 1
    assert vdaf.unshard(out_shares, 1) == expected


def test_aggregating_many_output_shares_at_once_equals_one_at_a_time() -> None:
    vdaf = prio3_sum_vec(2, 4, 1, 2)
    p = vdaf.field.modulus
    rng = random.Random(3)
    outs = [[rng.randrange(p) for _ in range(4)] for _ in range(25)] + [[p - 1] * 4]
    folded = vdaf.agg_init()
    for out in outs:
        folded = vdaf.agg_update(folded, out)
    assert vdaf.agg_many(outs) == folded
    assert vdaf.agg_many([]) == vdaf.agg_init()
    with pytest.raises(VdafError, match="4 entries"):
        vdaf.agg_many([[1, 2, 3]])
