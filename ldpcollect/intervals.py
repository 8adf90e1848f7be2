"""Exact 95% intervals for released counts (docs/privacy.md, "Intervals that hold").

The plug-in interval (estimate +- 1.96 standard errors) covers as little as 81% for a cell
with 5 devices (Sampling Privacy, s = 1/2), because the estimate is discrete and skewed there.
These intervals invert the estimator's exact distribution instead (an equal-tailed
Clopper-Pearson construction): the true count N is in the interval unless the released
statistic falls in a tail of probability at most alpha/2 on either side, so the interval holds
at least 95% for EVERY true count, whatever N and n are.

The statistic and its law given the true count N at the target (n devices in the release):
- Sampling Privacy: D = Y2 - Y1 = S + W, S ~ Bin(N, s) the selected devices (every other
  device repeats its bit in both rounds), W = Z2 - Z1 the difference of the two rounds'
  discrete Gaussian release noises (0 without noise);
- randomized response: C = X1 + X0 + Z, X1 ~ Bin(N, a1) the devices at the target,
  X0 ~ Bin(n - N, a0) the others, Z the count's release noise.
Both are stochastically increasing in N (a1 > a0), so P(stat <= x | N) falls as N grows and
each end of the interval is found by bisection. Every probability used to keep a candidate N
is an UPPER bound (mass outside the summed windows and a float allowance are added), which
only widens the interval: coverage stays >= 95%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy.stats import binom

from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

LEVEL = 0.95
_SLACK = 1e-9  # allowance for floating-point error in the summed probabilities
_WINDOW_SD = 10.0  # binomial terms summed within mean +- this many sd (the rest is bounded)
_NOISE_TAIL = 1e-12  # noise mass left out of the window (added back as an upper bound)


@dataclass(frozen=True)
class NoiseLaw:
    """pmf of the integer noise on a window [-k, k] and a bound on the mass outside it."""

    offsets: Ints
    pmf: Floats
    tail: float

    @staticmethod
    def none() -> NoiseLaw:
        return NoiseLaw(np.zeros(1, dtype=np.int64), np.ones(1), 0.0)

    @staticmethod
    def discrete_gaussian(sigma: Fraction, copies: int) -> NoiseLaw:
        """The sum (or difference: the law is symmetric) of `copies` independent discrete
        Gaussians of this sigma."""
        return NoiseLaw.discrete_gaussians([sigma] * copies)

    @staticmethod
    def discrete_gaussians(sigmas: Sequence[Fraction]) -> NoiseLaw:
        """The sum (or any signed sum: each law is symmetric) of independent discrete
        Gaussians, one of each sigma (none: no noise)."""
        if not sigmas:
            return NoiseLaw.none()
        law = np.ones(1)
        for sigma in sigmas:
            s = float(sigma)
            wide = math.ceil(40 * s) + 5  # beyond 40 sigma: mass below e^-800
            z = np.arange(-wide, wide + 1)
            one = np.exp(-(z.astype(np.float64) ** 2) / (2 * s * s))
            law = np.convolve(law, one / one.sum())
        span = (law.size - 1) // 2
        offsets = np.arange(-span, span + 1)
        above = np.concatenate([np.cumsum(law[::-1])[::-1], [0.0]])  # P(index >= i)
        # The narrowest symmetric window [-k, k] leaving at most _NOISE_TAIL outside it.
        outside = 2 * above[span + 1 : 2 * span + 2]  # P(|z| > k), k = 0..span
        k = int(np.argmax(outside <= _NOISE_TAIL))
        keep = slice(span - k, span + k + 1)
        tail = float(outside[k]) + 1e-15
        return NoiseLaw(offsets[keep].astype(np.int64), law[keep], tail)


@dataclass(frozen=True)
class CountLaw:
    """The released statistic given the true count N: Bin(N, p1) + Bin(n - N, p0) + noise."""

    p1: float
    p0: float  # 0 for Sampling Privacy (no other term)
    n: int
    noise: NoiseLaw

    def cdf_upper(self, x: Ints, count: Ints) -> Floats:
        """Upper bound on P(stat <= x | N = count), per cell."""
        inside = self._window_cdf(x, count)
        return np.minimum(1.0, inside + self._outside(count) + _SLACK)

    def sf_upper(self, x: Ints, count: Ints) -> Floats:
        """Upper bound on P(stat >= x | N = count) = 1 - P(stat <= x - 1)."""
        inside = self._window_cdf(x - 1, count)  # a lower bound on the cdf
        return np.minimum(1.0, 1.0 - inside + _SLACK)

    def _outside(self, count: Ints) -> Floats:
        """Mass of the terms the window leaves out (of X1, then of the noise)."""
        if self.p0 == 0:  # X1 is summed whole (its cdf), only the noise is windowed
            return np.full(count.shape, self.noise.tail)
        start, size = self._window(count)
        below = binom.cdf(start - 1, count, self.p1)
        above = binom.sf(start + size - 1, count, self.p1)
        return np.asarray(below + above, dtype=np.float64) + self.noise.tail

    def _window(self, count: Ints) -> tuple[Ints, int]:
        mean = count * self.p1
        sd = np.sqrt(count * self.p1 * (1 - self.p1))
        start = np.floor(mean - _WINDOW_SD * sd).astype(np.int64)
        size = int(np.ceil(2 * _WINDOW_SD * float(np.max(sd, initial=0.0)))) + 2
        return start, size

    def _window_cdf(self, x: Ints, count: Ints) -> Floats:
        """sum over the windows of P(X1 = j) P(Z = z) P(X0 <= x - j - z): no term is
        counted twice, every term is a true probability (a lower bound on the cdf)."""
        noise = zip(self.noise.offsets.tolist(), self.noise.pmf.tolist(), strict=True)
        if self.p0 == 0:  # Sampling Privacy: P(S + W <= x) = sum_z P(W = z) P(S <= x - z)
            cdf = np.zeros(x.shape, dtype=np.float64)
            for z, p_z in noise:
                cdf += p_z * binom.cdf(x - z, count, self.p1)
            return cdf
        start, size = self._window(count)
        j = start[:, None] + np.arange(size)[None, :]  # cells x window
        p_j = binom.pmf(j, count[:, None], self.p1)
        total = np.zeros(x.shape, dtype=np.float64)
        others = (self.n - count)[:, None]
        for z, p_z in noise:
            rest = x[:, None] - j - z
            c0 = binom.cdf(rest, others, self.p0) if self.p0 > 0 else (rest >= 0) * 1.0
            total += p_z * np.sum(p_j * c0, axis=1)
        return total


def exact_intervals(law: CountLaw, stat: Ints, level: float = LEVEL) -> tuple[Ints, Ints]:
    """[low, high] for the true count of each cell from its statistic: every N in [0, n]
    with neither tail of probability <= (1 - level) / 2 at the observed statistic."""
    if not 0.5 < level < 1:
        raise ParameterError("level", level, "(0.5, 1)")
    half = (1.0 - level) / 2
    x = np.asarray(stat, dtype=np.int64)
    n = law.n
    # high: the largest N with P(stat <= x | N) > half (the cdf falls as N grows).
    lo, hi = np.zeros_like(x), np.full_like(x, n)
    keep_zero = law.cdf_upper(x, lo) > half
    while np.any(lo < hi):
        mid = (lo + hi + 1) // 2
        ok = law.cdf_upper(x, mid) > half
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid - 1)
    high = np.where(keep_zero, lo, 0)
    # low: the smallest N with P(stat >= x | N) > half (the survival grows with N).
    lo, hi = np.zeros_like(x), np.full_like(x, n)
    keep_top = law.sf_upper(x, hi) > half
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        ok = law.sf_upper(x, mid) > half
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1)
    low = np.where(keep_top, lo, n)
    return np.minimum(low, high), high


CountNoise = Fraction | Sequence[Fraction] | None
"""The noise on every released round count: one discrete Gaussian's sigma (the trusted
aggregator's), one per aggregator that adds its own (secure mode), or None."""


def count_sigmas(noise: CountNoise) -> list[Fraction]:
    """The sigmas of the independent discrete Gaussians added to each round count."""
    if noise is None:
        return []
    if isinstance(noise, Fraction):
        return [noise] if noise else []
    return [sigma for sigma in noise if sigma]


def sp_law(sampling_rate: Fraction, n: int, noise_sigma: CountNoise) -> CountLaw:
    """D = Y2 - Y1: each of the two rounds' counts carries its noise."""
    noise = NoiseLaw.discrete_gaussians(count_sigmas(noise_sigma) * 2)
    return CountLaw(float(sampling_rate), 0.0, n, noise)


def rr_law(flip1: Fraction, flip2: Fraction, n: int, noise_sigma: CountNoise) -> CountLaw:
    a1 = float(flip1 + (1 - flip1) * flip2)
    a0 = float((1 - flip1) * flip2)
    noise = NoiseLaw.discrete_gaussians(count_sigmas(noise_sigma))
    return CountLaw(a1, a0, n, noise)


_CHUNK = 2048  # cells per vectorized block (bounds memory on releases of many targets)


def release_intervals(
    mechanism: Mechanism,
    round_counts: Ints,
    n_devices: int,
    noise_sigma: CountNoise,
    level: float = LEVEL,
) -> tuple[Floats, Floats]:
    """Exact intervals for every target of a release from its (noised) round counts, shaped
    (rounds, targets); n_devices completed every round. In secure mode each aggregator adds
    its own noise to every count: pass both sigmas."""
    counts = np.asarray(round_counts, dtype=np.int64)
    if isinstance(mechanism, SamplingPrivacy):
        law = sp_law(mechanism.sampling_rate, n_devices, noise_sigma)
        stat = counts[1] - counts[0]
    elif isinstance(mechanism, RandomizedResponse):
        law = rr_law(mechanism.flip1, mechanism.flip2, n_devices, noise_sigma)
        stat = counts[0]
    else:
        raise ParameterError("mechanism", mechanism, "RandomizedResponse or SamplingPrivacy")
    # Cells with the same statistic share their interval: compute each value once.
    values, where = np.unique(stat, return_inverse=True)
    low = np.empty(values.size, dtype=np.int64)
    high = np.empty(values.size, dtype=np.int64)
    for start in range(0, values.size, _CHUNK):
        part = slice(start, start + _CHUNK)
        low[part], high[part] = exact_intervals(law, values[part], level)
    return low[where].astype(np.float64), high[where].astype(np.float64)
