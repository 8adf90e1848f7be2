"""Goodness of fit of discrete Gaussian draws against the exact pmf, for the samplers' tests."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
from scipy.stats import chi2

from ldpcollect.accounting.discrete_gaussian import (
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
)


def chi_square_p(draws: list[int], sigma_sq: Fraction) -> float:
    """The chi-square test's p-value of `draws` against N_Z(0, sigma_sq) (tails pooled into
    the first and last bins expecting at least 5)."""
    n = len(draws)
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
    return float(chi2.sf(statistic, len(observed) - 1))


def variance_error_in_se(draws: list[int], sigma_sq: Fraction) -> float:
    """How many standard errors the draws' mean square is from the exact variance."""
    pmf, bound = discrete_gaussian_pmf(sigma_sq)
    var = discrete_gaussian_variance(sigma_sq)
    xs = np.arange(-bound, bound + 1, dtype=float)
    fourth = float(np.sum(pmf * xs**4))
    se = math.sqrt((fourth - var * var) / len(draws))
    return abs(float(np.mean(np.square(draws))) - var) / se
