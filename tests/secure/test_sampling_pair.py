"""Sampling Privacy's round pair in secure mode: honest pairs verify and unshard to the exact
(Y1, Y2) counts; every pair that would let a device count for more than an honest one (or
count negatively) fails its proof and changes no count."""

from __future__ import annotations

import random
from collections.abc import Sequence
from math import isqrt

import pytest

from ldpcollect.mechanisms.sampling_privacy import SamplingPrivacy
from ldpcollect.secure.sampling_pair import (
    PAIR_ROUND,
    PRIO3_SAMPLING_PAIR,
    SamplingPair,
    pair_vdaf,
    split_counts,
)
from ldpcollect.secure.sealing import generate_key_pair
from ldpcollect.secure.upload import (
    BitsVdaf,
    Refusal,
    SecureReport,
    aggregate,
    answer_vdaf,
    shard_report,
    unshard,
    verify_batch,
)
from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field128
from ldpcollect.vdaf.flp import Flp
from ldpcollect.vdaf.prio3 import Prio3

T = 12
VERIFY_KEY = bytes(range(32, 64))
KEYS = (generate_key_pair(1), generate_key_pair(2))


class UncheckedPair(SamplingPair):
    """The pair circuit with a lying encoder: the device picks r1 || r2 || w freely (w is
    the last entry it passes) and proves it with the circuit's own prover."""

    def encode(self, measurement: Sequence[int]) -> list[int]:
        return [x % self.field.modulus for x in measurement]


def lying_vdaf() -> BitsVdaf:
    chunk = isqrt(3 * T + 1)  # as pair_vdaf chunks
    return Prio3(PRIO3_SAMPLING_PAIR, Flp(UncheckedPair(Field128, T, chunk)), 2)


def sealed(vdaf: BitsVdaf, rng: random.Random, measurement: Sequence[int]) -> SecureReport:
    leader, helper = KEYS
    return shard_report(
        vdaf,
        leader.config,
        helper.config,
        "q-sp",
        PAIR_ROUND,
        rng.randbytes(16),
        measurement,
        rng.randbytes(vdaf.rand_size),
    )


def run(reports: Sequence[SecureReport]) -> tuple[list[int], list[int], list[Refusal | None]]:
    vdaf = pair_vdaf(T)
    leader, helper = KEYS
    result = verify_batch(vdaf, leader, helper, VERIFY_KEY, reports)
    counts = unshard(vdaf, aggregate(vdaf, result.leader_out), aggregate(vdaf, result.helper_out))
    y1, y2 = split_counts(counts, T)
    return y1, y2, result.refusals()


def honest_pair(rng: random.Random) -> list[int]:
    """What an SP device with s = 1/2 at a random cell (or none of the targets) answers."""
    r1 = [rng.randrange(2) for _ in range(T)]
    r2 = list(r1)
    cell = rng.randrange(T + 3)
    if cell < T and rng.randrange(2):
        r1[cell], r2[cell] = 0, 1
    return r1 + r2


def test_honest_pairs_verify_and_unshard_to_both_rounds_counts() -> None:
    rng = random.Random(2026)
    pairs = [honest_pair(rng) for _ in range(200)]
    y1, y2, refusals = run([sealed(pair_vdaf(T), rng, p) for p in pairs])
    assert refusals == [None] * 200
    assert y1 == [sum(p[i] for p in pairs) for i in range(T)]
    assert y2 == [sum(p[T + i] for p in pairs) for i in range(T)]


def test_the_mechanisms_own_draws_verify() -> None:
    rng = random.Random(5)
    sp = SamplingPrivacy(1)  # s = 1: every device at a target is selected there
    targets = list(range(100, 100 + T))
    pairs = []
    for location in [100, 105, 111, 7]:
        draw = sp.draw(location, targets)
        pairs.append([int(b) for b in [*draw.answer_bits(1), *draw.answer_bits(2)]])
    y1, y2, refusals = run([sealed(pair_vdaf(T), rng, p) for p in pairs])
    assert refusals == [None] * 4
    assert [b - a for a, b in zip(y1, y2, strict=True)] == [1] + [0] * 4 + [1] + [0] * 5 + [1]


def with_weight(r1: list[int], r2: list[int], w: int) -> list[int]:
    return [*r1, *r2, w]


ZEROS, ONES = [0] * T, [1] * T
ONE_AT_0 = [1] + [0] * (T - 1)
TWO_SELECTED = [1, 1] + [0] * (T - 2)
MALICIOUS = {
    "round 1 all 0, round 2 all 1, weight 1": with_weight(ZEROS, ONES, 1),
    "round 1 all 0, round 2 all 1, weight T": with_weight(ZEROS, ONES, T),
    "two cells selected, weight 1": with_weight(ZEROS, TWO_SELECTED, 1),
    "two cells selected, weight 2": with_weight(ZEROS, TWO_SELECTED, 2),
    "a 1 turned to 0 (difference -1)": with_weight(ONE_AT_0, ZEROS, -1),
    "a 1 turned to 0, weight 0": with_weight(ONE_AT_0, ZEROS, 0),
    "an entry 2 in both rounds": with_weight([2, *ZEROS[1:]], [2, *ZEROS[1:]], 0),
    "an entry 2 in round 2 only": with_weight(ZEROS, [2, *ZEROS[1:]], 2),
    "honest pair, weight lied to 1": with_weight(ONE_AT_0, ONE_AT_0, 1),
}


@pytest.mark.parametrize("measurement", MALICIOUS.values(), ids=MALICIOUS.keys())
def test_a_malicious_pair_fails_its_proof_and_counts_nothing(measurement: list[int]) -> None:
    rng = random.Random(13)
    lying = lying_vdaf()
    honest = honest_pair(rng)
    weight = sum(honest[T:]) - sum(honest[:T])
    y1, y2, refusals = run([sealed(lying, rng, measurement), sealed(lying, rng, [*honest, weight])])
    assert refusals == [Refusal.BAD_PROOF, None]
    assert (y1, y2) == (honest[:T], honest[T:])


def test_an_honest_pair_through_the_lying_encoder_is_accepted() -> None:
    """The malicious tests share the honest sharing code: only the measurement differs."""
    rng = random.Random(17)
    pairs = [with_weight(ZEROS, ONE_AT_0, 1), with_weight(ONES, ONES, 0)]
    y1, y2, refusals = run([sealed(lying_vdaf(), rng, p) for p in pairs])
    assert refusals == [None, None]
    assert (y1, y2) == (ONES, [2] + [1] * (T - 1))


@pytest.mark.parametrize(
    ("r1", "r2", "message"),
    [
        (ZEROS, ONES, "at most one 0 turned to 1"),
        (ONE_AT_0, ZEROS, "at most one 0 turned to 1"),
        ([2, *ZEROS[1:]], ZEROS, "round answers are 0 or 1"),
        (ZEROS, ZEROS[1:], "a round pair has 2 x 12 entries, got 23"),
    ],
)
def test_the_honest_encoder_refuses_a_pair_no_sp_device_makes(
    r1: list[int], r2: list[int], message: str
) -> None:
    with pytest.raises(VdafError, match=message):
        pair_vdaf(T).shard(b"ctx", [*r1, *r2], bytes(16), bytes(128))


def test_a_pair_report_is_refused_where_a_single_round_is_expected() -> None:
    rng = random.Random(19)
    report = sealed(pair_vdaf(T), rng, honest_pair(rng))
    result = verify_batch(answer_vdaf(T), *KEYS, VERIFY_KEY, [report])
    assert result.refusals() == [Refusal.WRONG_LENGTH]


def is_honest(measurement: Sequence[int]) -> bool:
    r1, r2, w = measurement[:T], measurement[T : 2 * T], measurement[2 * T]
    diff = [b - a for a, b in zip(r1, r2, strict=True)]
    return all(x in (0, 1) for x in [*r1, *r2, *diff, w]) and sum(diff) == w


def test_random_pairs_are_accepted_exactly_when_an_honest_device_could_send_them() -> None:
    rng = random.Random(23)
    lying = lying_vdaf()
    measurements = []
    for _ in range(60):
        # mostly near-honest pairs: a few entries disturbed, so both outcomes occur
        honest = honest_pair(rng)
        weight = sum(honest[T:]) - sum(honest[:T])
        m = [*honest, weight]
        for _ in range(rng.randrange(3)):
            m[rng.randrange(2 * T + 1)] = rng.choice([-1, 0, 1, 2])
        measurements.append(m)
    expected = [None if is_honest(m) else Refusal.BAD_PROOF for m in measurements]
    assert None in expected and Refusal.BAD_PROOF in expected
    _, _, refusals = run([sealed(lying, rng, m) for m in measurements])
    assert refusals == expected
