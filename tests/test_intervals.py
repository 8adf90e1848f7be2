"""Exact intervals hold at least 95% for every true count from 1 to 200: coverage is computed
exactly from the statistic's law (sums over every outcome, no simulation)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom

from ldpcollect.intervals import CountLaw, NoiseLaw, exact_intervals, rr_law, sp_law
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy

COUNTS = range(1, 201)


def noise_pmf(sigma: Fraction | None, copies: int) -> tuple[int, np.ndarray]:
    """(offset, pmf) of the noise on +-40 sigma (beyond: mass below e^-800)."""
    if sigma is None:
        return 0, np.ones(1)
    wide = int(40 * float(sigma)) + 5
    z = np.arange(-wide, wide + 1)
    one = np.exp(-(z**2) / (2 * float(sigma) ** 2))
    one /= one.sum()
    law = one
    for _ in range(copies - 1):
        law = np.convolve(law, one)
    return -(law.size - 1) // 2, law


def coverage(law: CountLaw, pmf_of: object, low_x: int, high_x: int) -> np.ndarray:
    """Exact coverage for each true count: the sum of P(x | N) over the x whose interval
    holds N (outcomes outside [low_x, high_x] count as misses: a lower bound)."""
    xs = np.arange(low_x, high_x + 1)
    low, high = exact_intervals(law, xs)
    result = []
    for count in COUNTS:
        offset, pmf = pmf_of(count)  # type: ignore[operator]
        x = offset + np.arange(pmf.size)
        inside = (x >= low_x) & (x <= high_x)
        index = x[inside] - low_x
        held = (low[index] <= count) & (count <= high[index])
        result.append(float(np.sum(pmf[inside][held])))
    return np.array(result)


@pytest.mark.parametrize("sigma", [None, Fraction(2)])
@pytest.mark.parametrize("rate", [Fraction(1, 2), Fraction(1, 10)])
def test_sampling_privacy_intervals_cover_every_count(
    rate: Fraction, sigma: Fraction | None
) -> None:
    offset, noise = noise_pmf(sigma, 2)

    def pmf_of(count: int) -> tuple[int, np.ndarray]:
        return offset, np.convolve(binom.pmf(np.arange(count + 1), count, float(rate)), noise)

    spread = -offset
    held = coverage(sp_law(rate, 10_000, sigma), pmf_of, -spread, 200 + spread)
    assert held.min() >= 0.95, (int(np.argmin(held)) + 1, held.min())


@pytest.mark.parametrize("sigma", [None, Fraction(2)])
def test_randomized_response_intervals_cover_every_count(sigma: Fraction | None) -> None:
    n, p, q = 400, Fraction("0.85"), Fraction("0.3")
    a1, a0 = float(p + (1 - p) * q), float((1 - p) * q)
    offset, noise = noise_pmf(sigma, 1)

    def pmf_of(count: int) -> tuple[int, np.ndarray]:
        yes = np.convolve(
            binom.pmf(np.arange(count + 1), count, a1),
            binom.pmf(np.arange(n - count + 1), n - count, a0),
        )
        return offset, np.convolve(yes, noise)

    held = coverage(rr_law(p, q, n, sigma), pmf_of, offset, n - offset)
    assert held.min() >= 0.95, (int(np.argmin(held)) + 1, held.min())


def test_the_plug_in_interval_fails_the_same_computation() -> None:
    """The computation above catches the old interval: estimate +- 1.96 plug-in standard
    errors covers 81.25% at 5 devices (s = 1/2, no noise), the audit's figure."""
    count, s = 5, 0.5
    x = np.arange(count + 1)
    estimate = x / s
    se = np.sqrt(np.maximum(estimate, 0) * (1 - s) / s)
    held = (estimate - 1.96 * se <= count) & (count <= estimate + 1.96 * se)
    assert float(np.sum(binom.pmf(x, count, s)[held])) == pytest.approx(0.8125)


def test_release_intervals_hold_the_estimate_and_are_narrow_where_data_is() -> None:
    from ldpcollect.intervals import release_intervals

    counts = np.array([[40, 40, 0], [90, 40, 0]])  # SP: selected 50, 0, 0
    low, high = release_intervals(SamplingPrivacy("1/2"), counts, 1000, None)
    assert low[0] <= 100 <= high[0] and high[0] - low[0] < 60
    assert (low[1], low[2]) == (0, 0) and high[1] == high[2] < 10
    rr = release_intervals(RandomizedResponse("0.85", "0.3"), np.array([[45, 200]]), 1000, None)
    (low_none, low_some), (high_none, high_some) = rr
    assert low_none == 0 and high_none < 20  # 45 Yes of 1000: what nobody at the target gives
    assert low_some < (200 - 45) / 0.85 < high_some


def test_noise_window_leaves_out_at_most_its_stated_tail() -> None:
    law = NoiseLaw.discrete_gaussian(Fraction(2), 2)
    assert law.tail <= 1e-12 + 1e-15 and abs(law.pmf.sum() + law.tail - 1) < 1e-12


@pytest.mark.parametrize("sigmas", [(Fraction(2), Fraction(2)), (Fraction(2), Fraction(3))])
def test_intervals_through_two_aggregators_noise_cover_every_count(
    sigmas: tuple[Fraction, Fraction],
) -> None:
    """Secure mode: each aggregator adds its own discrete Gaussian to every count (the
    helper's floor may exceed the leader's sigma); SP's statistic carries four of them."""
    noise = np.ones(1)
    for sigma in sigmas:
        noise = np.convolve(noise, noise_pmf(sigma, 1)[1])
    noise = np.convolve(noise, noise)  # both rounds
    offset = -(noise.size - 1) // 2

    def pmf_of(count: int) -> tuple[int, np.ndarray]:
        return offset, np.convolve(binom.pmf(np.arange(count + 1), count, 0.5), noise)

    held = coverage(sp_law(Fraction(1, 2), 10_000, sigmas), pmf_of, offset, 200 - offset)
    assert held.min() >= 0.95, (int(np.argmin(held)) + 1, held.min())
    law = NoiseLaw.discrete_gaussians(sigmas)
    assert law.tail <= 1e-12 + 1e-15 and abs(law.pmf.sum() + law.tail - 1) < 1e-12
    # One sigma given alone, or as a one-item list, is the same law.
    alone, listed = (
        sp_law(Fraction(1, 2), 100, Fraction(2)),
        sp_law(Fraction(1, 2), 100, [Fraction(2)]),
    )
    assert np.array_equal(alone.noise.pmf, listed.noise.pmf)
