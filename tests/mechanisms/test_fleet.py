"""Fleet half: consistent with itself, with the device half, and with the aggregate sampler."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldpcollect import bits
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

Z = 4.5  # z-tolerance for means and variances (two-sided p ~ 7e-6 per check)
MECHS = [RandomizedResponse("17/20", "3/10"), SamplingPrivacy("1/4")]
IDS = ["rr", "sp"]


def population(rng: np.random.Generator, n: int, targets: np.ndarray) -> np.ndarray:
    """Devices spread over the targets with unequal shares, a third of them elsewhere."""
    shares = np.arange(1, targets.size + 1, dtype=np.float64)
    at_target = rng.choice(targets, size=n, p=shares / shares.sum())
    elsewhere = rng.integers(10**9, 2 * 10**9, size=n, dtype=np.uint64)
    return np.where(rng.random(n) < 1 / 3, elsewhere, at_target).astype(np.uint64)


def unpacked(answers: np.ndarray, n_targets: int) -> np.ndarray:
    return np.unpackbits(answers, axis=-1, count=n_targets).astype(np.bool_)


@pytest.mark.parametrize("mech", MECHS, ids=IDS)
def test_counts_equal_the_sum_of_the_answers_for_the_same_seed(mech: Mechanism) -> None:
    targets = np.arange(1000, 1000 + 1001, dtype=np.uint64)  # several chunks, 1 padding bit
    locs = population(np.random.default_rng(1), 9_000, targets)
    answers = mech.fleet_answers(locs, targets, np.random.default_rng(5))
    counts = mech.fleet_counts(locs, targets, np.random.default_rng(5))
    assert answers.shape == (mech.rounds, 9_000, bits.packed_length(1001))
    assert answers.dtype == np.uint8 and counts.dtype == np.int64
    assert counts.shape == (mech.rounds, 1001)
    np.testing.assert_array_equal(unpacked(answers, 1001).sum(axis=1), counts)
    assert not np.any(answers[:, :, -1] & 0x7F)  # padding bits are zero


@pytest.mark.parametrize("mech", MECHS, ids=IDS)
def test_moving_some_devices_changes_no_other_devices_answers(mech: Mechanism) -> None:
    """A file fleet redraws a corrected file from the same generator: devices that did not
    move must draw the same answers again, or the aggregator refuses them as reused ids."""
    targets = np.arange(1000, 1000 + 1001, dtype=np.uint64)  # several chunks
    locs = population(np.random.default_rng(1), 9_000, targets)
    moved = locs.copy()
    movers = np.random.default_rng(2).choice(9_000, size=300, replace=False)
    # Into a target, out of every target, and from one target to another.
    moved[movers[:100]] = targets[7]
    moved[movers[100:200]] = 5 * 10**9
    moved[movers[200:]] = targets[(np.searchsorted(targets, locs[movers[200:]]) + 1) % 1001]
    before = mech.fleet_answers(locs, targets, np.random.default_rng(5))
    after = mech.fleet_answers(moved, targets, np.random.default_rng(5))
    stayed = np.setdiff1d(np.arange(9_000), movers)
    np.testing.assert_array_equal(before[:, stayed], after[:, stayed])
    changed = (before[:, movers] != after[:, movers]).any(axis=(0, 2))
    assert changed.any()  # the movers did draw for their new places


def test_sp_fleet_rounds_differ_only_at_a_selected_own_target() -> None:
    sp = SamplingPrivacy("1/2")
    targets = np.array([5, 3, 9, 11, 2], dtype=np.uint64)
    locs = np.array([5, 3, 9, 11, 2, 7, 100] * 4000, dtype=np.uint64)
    answers = unpacked(sp.fleet_answers(locs, targets, np.random.default_rng(2)), 5)
    changed = answers[0] != answers[1]
    rows, cols = np.nonzero(changed)
    assert np.all(targets[cols] == locs[rows])  # only at the device's own target
    assert np.all(~answers[0][rows, cols] & answers[1][rows, cols])  # 0 then 1
    elsewhere = ~np.isin(locs, targets)
    assert not changed[elsewhere].any()
    selected = changed.sum()
    at_target = int((~elsewhere).sum())
    assert abs(selected - at_target / 2) < Z * math.sqrt(at_target / 4)


def test_degenerate_parameters_reveal_the_truth() -> None:
    targets = np.array([10, 20, 30], dtype=np.uint64)
    locs = np.array([10, 20, 20, 30, 30, 30, 40], dtype=np.uint64)
    rng = np.random.default_rng(3)
    truth = np.array([1, 2, 3])
    exact_rr = RandomizedResponse(1, "1/2")
    np.testing.assert_array_equal(exact_rr.fleet_counts(locs, targets, rng)[0], truth)
    np.testing.assert_array_equal(exact_rr.sample_aggregate(truth, 7, rng)[0], truth)
    full_sp = SamplingPrivacy(1)
    fleet = full_sp.fleet_counts(locs, targets, rng)
    np.testing.assert_array_equal(fleet[1] - fleet[0], truth)
    aggregate = full_sp.sample_aggregate(truth, 7, rng)
    np.testing.assert_array_equal(aggregate[1] - aggregate[0], truth)


def count_moments(mech: Mechanism, truth: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and variance of each round's Yes count (rounds, T)."""
    if isinstance(mech, RandomizedResponse):
        a1, a0 = float(mech.yes_given_yes), float(mech.yes_given_no)
        mean = truth * a1 + (n - truth) * a0
        var = truth * a1 * (1 - a1) + (n - truth) * a0 * (1 - a0)
        return mean[None, :], var[None, :]
    s = float(mech.sampling_rate)
    # S ~ Bin(n_t, s), Y1 | S ~ Bin(N - S, 1/2), Y2 = Y1 + S: Var(Y2) = Var(Y1).
    var1 = (n - truth * s) / 4 + truth * s * (1 - s) / 4
    return np.stack([(n - truth * s) / 2, (n + truth * s) / 2]), np.stack([var1, var1])


def assert_moments(samples: np.ndarray, mean: np.ndarray, var: np.ndarray) -> None:
    """samples: (trials, rounds, T); means within Z se, variances within Z relative se."""
    k = samples.shape[0]
    emp_mean, emp_var = samples.mean(axis=0), samples.var(axis=0, ddof=1)
    assert np.all(np.abs(emp_mean - mean) < Z * np.sqrt(var / k)), (emp_mean, mean)
    rel = Z * math.sqrt(2 / (k - 1))  # sd of a sample variance, near-normal counts
    assert np.all(np.abs(emp_var / var - 1) < rel), (emp_var, var)


@pytest.mark.parametrize("mech", MECHS, ids=IDS)
def test_fleet_and_aggregate_sampler_agree_in_distribution(mech: Mechanism) -> None:
    targets = np.array([7, 8, 9, 10], dtype=np.uint64)
    locs = np.repeat(np.array([7, 8, 9, 99], dtype=np.uint64), [60, 400, 1500, 2040])
    truth = np.array([60, 400, 1500, 0])
    n = locs.size
    rng = np.random.default_rng(2024)
    fleet = np.stack([mech.fleet_counts(locs, targets, rng) for _ in range(400)])
    aggregate = np.stack([mech.sample_aggregate(truth, n, rng) for _ in range(20_000)])
    mean, var = count_moments(mech, truth.astype(np.float64), n)
    assert_moments(fleet, mean, var)
    assert_moments(aggregate, mean, var)
    # the whole distribution too: two-sample Kolmogorov-Smirnov per (round, target) at 1e-4
    for r in range(mech.rounds):
        for t in range(3):
            assert stats.ks_2samp(fleet[:, r, t], aggregate[:, r, t]).pvalue > 1e-4


def test_rr_device_and_fleet_agree() -> None:
    rr = RandomizedResponse("17/20", "3/10")
    targets = [40, 41, 42, 43]
    n_device, n_fleet = 8_000, 200_000
    device = np.array([rr.draw(41, targets).answer_bits(1) for _ in range(n_device)])
    fleet = unpacked(
        rr.fleet_answers(
            np.full(n_fleet, 41, dtype=np.uint64), np.array(targets), np.random.default_rng(9)
        )[0],
        4,
    )
    for t in range(4):
        table = [
            [device[:, t].sum(), n_device - device[:, t].sum()],
            [fleet[:, t].sum(), n_fleet - fleet[:, t].sum()],
        ]
        assert stats.chi2_contingency(table).pvalue > 1e-4


def test_sp_device_and_fleet_agree() -> None:
    """Joint law of (round 1, round 2) at the device's own target: 00, 10->never, 01, 11."""
    sp = SamplingPrivacy("1/4")
    targets = [5, 6, 7]
    n_device, n_fleet = 8_000, 200_000

    def categories(r1: np.ndarray, r2: np.ndarray) -> list[int]:
        assert not np.any(r1 & ~r2)
        return [int(np.sum(~r1 & ~r2)), int(np.sum(~r1 & r2)), int(np.sum(r1 & r2))]

    draws = [sp.draw(6, targets) for _ in range(n_device)]
    d1 = np.array([d.answer_bits(1)[1] for d in draws])
    d2 = np.array([d.answer_bits(2)[1] for d in draws])
    fleet = unpacked(
        sp.fleet_answers(
            np.full(n_fleet, 6, dtype=np.uint64), np.array(targets), np.random.default_rng(4)
        ),
        3,
    )
    table = [categories(d1, d2), categories(fleet[0][:, 1], fleet[1][:, 1])]
    assert stats.chi2_contingency(table).pvalue > 1e-4


@pytest.mark.parametrize("mech", MECHS, ids=IDS)
def test_empty_fleet(mech: Mechanism) -> None:
    rng = np.random.default_rng(0)
    targets = np.array([1, 2, 3], dtype=np.uint64)
    empty = np.array([], dtype=np.uint64)
    assert mech.fleet_answers(empty, targets, rng).shape == (mech.rounds, 0, 1)
    np.testing.assert_array_equal(
        mech.fleet_counts(empty, targets, rng), np.zeros((mech.rounds, 3))
    )
