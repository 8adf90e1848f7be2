"""The exact discrete Gaussian sampler against its exact distribution and variance."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from ldpcollect.accounting.discrete_gaussian import (
    ShiftedGaussianProfile,
    bernoulli_exp,
    discrete_gaussian_variance,
    sample_discrete_gaussian,
)
from ldpcollect.errors import ParameterError
from tests.accounting.gaussian_fit import chi_square_p, variance_error_in_se

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
    assert chi_square_p(draws, sigma_sq) > SIGNIFICANCE
    # Variance within 4 standard errors of the exact figure.
    assert variance_error_in_se(draws, sigma_sq) < 4


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
