"""The exact discrete Gaussian sampler against its exact distribution and variance."""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chi2

from ldpcollect.accounting.discrete_gaussian import (
    ShiftedGaussianProfile,
    bernoulli_exp,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    sample_discrete_gaussian,
)
from ldpcollect.errors import ParameterError

SIGNIFICANCE = 0.001  # goodness-of-fit tests reject at the 0.1% level (fixed seeds)


class IntegerOnlyRandom(random.Random):
    """A seeded source that fails if the sampler asks for a floating-point draw."""

    def random(self) -> float:
        raise AssertionError("the sampler must not draw floats")

    def getrandbits(self, k: int, /) -> int:  # integer draws (randrange) stay available
        return super().getrandbits(k)


def test_reference_variances() -> None:
    assert discrete_gaussian_variance(Fraction(1, 4)) == pytest.approx(0.215012675088, abs=1e-12)
    assert discrete_gaussian_variance(Fraction(1)) == pytest.approx(0.999999788768, abs=1e-12)
    assert discrete_gaussian_variance(Fraction(100)) == pytest.approx(100.0, rel=1e-9)


@pytest.mark.parametrize("sigma_sq", [Fraction(1, 4), Fraction(2), Fraction(49, 4)])
def test_goodness_of_fit(sigma_sq: Fraction) -> None:
    n = 12_000
    draws = sample_discrete_gaussian(sigma_sq, n, rng=IntegerOnlyRandom(20240611))
    pmf, bound = discrete_gaussian_pmf(sigma_sq)
    expected = {x: float(pmf[x + bound]) * n for x in range(-bound, bound + 1)}
    core = [x for x, e in expected.items() if e >= 5]
    low, high = min(core), max(core)
    counts = Counter(draws)
    observed = [sum(c for x, c in counts.items() if x <= low)]
    wanted = [sum(e for x, e in expected.items() if x <= low)]
    for x in range(low + 1, high):
        observed.append(counts.get(x, 0))
        wanted.append(expected[x])
    observed.append(sum(c for x, c in counts.items() if x >= high))
    wanted.append(sum(e for x, e in expected.items() if x >= high))
    statistic = sum((o - w) ** 2 / w for o, w in zip(observed, wanted, strict=True))
    p_value = chi2.sf(statistic, len(observed) - 1)
    assert p_value > SIGNIFICANCE, (statistic, p_value)
    # Variance within 4 standard errors of the exact figure.
    var = discrete_gaussian_variance(sigma_sq)
    xs = np.arange(-bound, bound + 1, dtype=float)
    fourth = float(np.sum(pmf * xs**4))
    se = math.sqrt((fourth - var * var) / n)
    sample_var = float(np.mean(np.square(draws)))
    assert abs(sample_var - var) < 4 * se


def test_bernoulli_exp_frequency() -> None:
    rng = random.Random(7)
    n = 40_000
    for num, den in [(1, 3), (5, 2), (0, 1)]:
        hits = sum(bernoulli_exp(num, den, rng) for _ in range(n))
        p = math.exp(-num / den)
        assert abs(hits / n - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_default_source_is_os_csprng() -> None:
    draws = sample_discrete_gaussian("9/4", 200)
    assert len(draws) == 200 and all(isinstance(x, int) for x in draws)
    assert len(set(draws)) > 3


def test_bad_sigma() -> None:
    with pytest.raises(ParameterError, match="sigma_sq"):
        sample_discrete_gaussian(Fraction(0), 3)
    with pytest.raises(ParameterError, match="sigma_sq"):
        sample_discrete_gaussian("abc", 3)
    with pytest.raises(ParameterError, match="size"):
        sample_discrete_gaussian(Fraction(1), -1)


def test_profile_reference_delta() -> None:
    profile = ShiftedGaussianProfile(16.0, 1)
    assert profile.delta(1.0) == pytest.approx(3.055455e-6, rel=1e-6)
    eps = profile.epsilon(3.055455e-6)
    assert profile.delta(eps) <= 3.055455e-6
    assert eps == pytest.approx(1.0, abs=1e-5)
