"""Aggregator half: unbiased estimates, variance formulas, intervals; SP error flat in N."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.mechanisms import Z95, Mechanism, RandomizedResponse, SamplingPrivacy

Z = 4.5  # z-tolerance for means, variances and coverage (two-sided p ~ 7e-6 per check)
MECHS = [RandomizedResponse("17/20", "3/10"), SamplingPrivacy("1/4")]
IDS = ["rr", "sp"]


def trial_estimates(
    mech: Mechanism, truth: np.ndarray, n: int, trials: int, seed: int, noise_sd: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimates, standard errors and interval hits over many aggregate-sampled trials."""
    rng = np.random.default_rng(seed)
    est, se, hit = [], [], []
    for _ in range(trials):
        counts = mech.sample_aggregate(truth, n, rng).astype(np.float64)
        if noise_sd:
            counts = counts + rng.normal(0.0, noise_sd, size=counts.shape)
        e = mech.estimate(counts, n, count_noise_variance=noise_sd**2)
        est.append(e.estimate)
        se.append(e.std_error)
        hit.append((e.ci_low <= truth) & (truth <= e.ci_high))
    return np.array(est), np.array(se), np.array(hit)


def predicted(mech: Mechanism, truth: np.ndarray, n: int, noise_var: float = 0.0) -> np.ndarray:
    return np.array([mech.predicted_sd(float(t), n, noise_var) for t in truth])


@pytest.mark.parametrize("mech", MECHS, ids=IDS)
@pytest.mark.parametrize("noise_sd", [0.0, 30.0], ids=["exact", "noisy"])
def test_unbiased_and_variance_matches_formula(mech: Mechanism, noise_sd: float) -> None:
    n, trials = 100_000, 6_000
    truth = np.array([0, 500, 10_000, 60_000])
    est, se, hit = trial_estimates(mech, truth, n, trials, seed=17, noise_sd=noise_sd)
    sd = predicted(mech, truth, n, noise_sd**2)
    # unbiased: the mean of `trials` estimates is within Z standard errors of the truth
    assert np.all(np.abs(est.mean(axis=0) - truth) <= Z * sd / math.sqrt(trials))
    # variance: sample variance within Z relative se, sqrt(2/(k-1)), of the formula's value
    # (skip SP's truth 0 without noise: the estimate is then exactly 0, sd 0)
    check = sd > 0
    ratio = est.var(axis=0, ddof=1)[check] / sd[check] ** 2
    assert np.all(np.abs(ratio - 1) < Z * math.sqrt(2 / (trials - 1))), ratio
    # the reported standard error is the plug-in formula: on average close to the true sd
    big = truth >= 500
    np.testing.assert_allclose(se.mean(axis=0)[big], sd[big], rtol=0.02)
    # 95% intervals cover the truth at their nominal rate where the normal approximation holds
    coverage = hit.mean(axis=0)[big]
    assert np.all(np.abs(coverage - 0.95) < Z * math.sqrt(0.95 * 0.05 / trials)), coverage


@pytest.mark.parametrize("mech", MECHS, ids=IDS)
def test_unbiased_over_fleet_simulation(mech: Mechanism) -> None:
    rng = np.random.default_rng(99)
    targets = np.array([11, 12, 13], dtype=np.uint64)
    locs = np.repeat(np.array([11, 12, 13, 55], dtype=np.uint64), [0, 300, 3000, 16_700])
    truth, n, trials = np.array([0, 300, 3000]), locs.size, 300
    est = np.array(
        [mech.estimate(mech.fleet_counts(locs, targets, rng), n).estimate for _ in range(trials)]
    )
    sd = predicted(mech, truth, n)
    assert np.all(np.abs(est.mean(axis=0) - truth) <= Z * sd / math.sqrt(trials))


def test_sp_error_does_not_grow_with_no_devices_rr_does() -> None:
    sp, rr = SamplingPrivacy("1/2"), RandomizedResponse("17/20", "3/10")
    truth, trials = np.array([1000]), 3_000
    sds = {}
    for n in (10**4, 10**8):
        sp_est, _, _ = trial_estimates(sp, truth, n, trials, seed=n % 1000 + 1)
        rr_est, _, _ = trial_estimates(rr, truth, n, trials, seed=n % 1000 + 2)
        sds[n] = (sp_est.std(ddof=1), rr_est.std(ddof=1))
        assert sp.predicted_sd(1000, n) == pytest.approx(math.sqrt(1000))
    rel = Z * math.sqrt(1 / (2 * (trials - 1)))  # relative se of a sample sd
    assert abs(sds[10**8][0] / sds[10**4][0] - 1) < 2 * rel
    assert sds[10**8][1] / sds[10**4][1] > 50  # RR: sqrt(N) growth (predicted ~ 99)
    assert rr.predicted_sd(1000, 10**8) / rr.predicted_sd(1000, 10**4) == pytest.approx(
        math.sqrt((1000 * 0.895 * 0.105 + (10**8 - 1000) * 0.045 * 0.955) / 480.75)
    )


def test_reference_sd_vectors() -> None:
    rr = RandomizedResponse("0.85", "0.3")
    for n, sd in [(10**4, 25.8), (10**5, 81.6), (10**6, 258.0)]:
        assert rr.predicted_sd(n / 10, n) == pytest.approx(sd, abs=0.05)


def test_interval_is_estimate_plus_minus_z_se() -> None:
    e = SamplingPrivacy("1/2").estimate(np.array([[40, 10], [60, 10]]), 100)
    np.testing.assert_allclose(e.estimate, [40.0, 0.0])
    np.testing.assert_allclose(e.std_error, [math.sqrt(40.0), 0.0])
    np.testing.assert_allclose(e.ci_high - e.estimate, Z95 * e.std_error)
    np.testing.assert_allclose(e.estimate - e.ci_low, Z95 * e.std_error)
    assert e.n_devices == 100


probabilities = st.fractions(min_value=Fraction(1, 1000), max_value=1, max_denominator=1000)


@given(
    probabilities,
    st.fractions(min_value=0, max_value=1, max_denominator=1000),
    st.integers(1, 10**9),
    st.data(),
)
def test_rr_estimate_of_expected_counts_is_the_truth(
    p: Fraction, q: Fraction, n: int, data: st.DataObject
) -> None:
    rr = RandomizedResponse(p, q)
    truth = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=5))
    expected = [t * rr.yes_given_yes + (n - t) * rr.yes_given_no for t in truth]
    est = rr.estimate(np.array([[float(c) for c in expected]]), n)
    np.testing.assert_allclose(est.estimate, truth, rtol=1e-9, atol=1e-6 * n / float(p))


@given(probabilities, st.integers(1, 10**9), st.data())
def test_sp_estimate_of_expected_counts_is_the_truth(
    s: Fraction, n: int, data: st.DataObject
) -> None:
    sp = SamplingPrivacy(s)
    truth = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=5))
    y1 = [(n - t * s) / 2 for t in truth]
    y2 = [(n + t * s) / 2 for t in truth]
    est = sp.estimate(np.array([[float(c) for c in y1], [float(c) for c in y2]]), n)
    np.testing.assert_allclose(est.estimate, truth, rtol=1e-9, atol=1e-6 * n / float(s))
