"""The vectorized exact discrete Gaussian sampler against the exact distribution, like the
one-at-a-time sampler's tests (fixed seeds; goodness of fit at the 0.1% level, moments within
4 standard errors)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pytest
from scipy.stats import chi2

from ldpcollect.accounting.discrete_gaussian import (
    discrete_gaussian_variance,
    sample_discrete_gaussian,
)
from ldpcollect.accounting.discrete_gaussian_batch import (
    WordSource,
    _Coins,
    fits,
    sample_batch,
)
from tests.accounting.gaussian_fit import chi_square_p, variance_error_in_se

SIGNIFICANCE = 0.001


def seeded_words(seed: int) -> WordSource:
    rng = np.random.default_rng(seed)

    def words(n: int) -> npt.NDArray[np.uint64]:
        return rng.integers(0, 2**64, size=n, dtype=np.uint64)

    return words


@pytest.mark.parametrize(
    "sigma_sq", [Fraction(1, 4), Fraction(2), Fraction(4), Fraction(49, 4), Fraction(7, 3)]
)
def test_batch_draws_fit_the_exact_distribution(sigma_sq: Fraction) -> None:
    n = 60_000
    draws = sample_batch(sigma_sq, n, seeded_words(20240611))
    assert len(draws) == n and all(type(x) is int for x in draws[:100])
    assert chi_square_p(draws, sigma_sq) > SIGNIFICANCE
    assert variance_error_in_se(draws, sigma_sq) < 4
    var = discrete_gaussian_variance(sigma_sq)
    assert abs(float(np.mean(draws))) < 4 * math.sqrt(var / n)


def test_batch_bernoulli_exp_coins_have_their_exact_frequency() -> None:
    coins = _Coins(seeded_words(7))
    n = 40_000
    for num, den in [(1, 3), (5, 2), (0, 1), (3, 3), (7, 1)]:
        hits = coins.exp(np.full(n, num, dtype=np.int64), np.full(n, den, dtype=np.int64))
        p = math.exp(-num / den)
        assert abs(float(hits.mean()) - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_batch_uniform_integers_are_uniform() -> None:
    coins = _Coins(seeded_words(3))
    n = 60_000
    for m in (1, 2, 3, 7, 2**40 + 3):
        values = coins.below(np.full(n, m, dtype=np.int64))
        assert values.min() >= 0 and values.max() < m
        if m <= 7:
            counts = np.bincount(values, minlength=m)
            statistic = float(np.sum((counts - n / m) ** 2 / (n / m)))
            assert chi2.sf(statistic, max(m - 1, 1)) > SIGNIFICANCE or m == 1


def test_the_os_sourced_sampler_takes_the_batch_path_where_it_fits() -> None:
    assert fits(Fraction(4)) and fits(Fraction(10**6, 7))
    assert not fits(Fraction(10**12))
    draws = sample_discrete_gaussian(Fraction(10**12), 70)  # one at a time: too large
    assert len(draws) == 70 and all(type(x) is int for x in draws)
    assert len(set(sample_discrete_gaussian("9/4", 1000))) > 5


def test_a_far_tail_acceptance_keeps_its_exact_frequency() -> None:
    """Acceptance tests whose numerator may pass int64 count their exp(-1) coins with Python
    integers: gamma = 3 still comes up exp(-3) of the time, and a numerator far beyond int64
    is handled (and, at gamma 2**24, fails)."""
    from ldpcollect.accounting.discrete_gaussian_batch import _big_exp

    coins = _Coins(seeded_words(11))
    n = 20_000
    den = 2**40 + 7
    hits = sum(_big_exp(3 * den, den, coins) for _ in range(n))
    p = math.exp(-3)
    assert abs(hits / n - p) < 4 * math.sqrt(p * (1 - p) / n)
    assert not _big_exp(2**64 * den, den, coins)
