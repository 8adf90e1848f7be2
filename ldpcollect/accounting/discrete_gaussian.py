"""The exact discrete Gaussian N_Z(0, sigma^2) and its privacy profile.

Sampling follows Canonne, Kamath and Steinke (2020), Algorithms 1-3: Bernoulli(exp(-gamma))
for rational gamma, a discrete Laplace proposal, and rejection. Every probability is an exact
ratio of integers and every coin comes from the OS CSPRNG (`random.SystemRandom`, the source
behind `secrets`); no floating point touches the sampling path.

The privacy profile (exact delta at an epsilon) of adding N_Z(0, sigma^2) to each coordinate
of an integer vector whose neighbours differ by at most 1 in at most m coordinates is computed
by summation, with the truncated tail mass added so the figure stays an upper bound.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq

from ldpcollect.accounting import discrete_gaussian_batch
from ldpcollect.errors import ParameterError

_SYSTEM_RANDOM = random.SystemRandom()
# From this many draws on, the OS-sourced sampler runs vectorized (`discrete_gaussian_batch`).
_BATCH_FROM = 64


def _bernoulli_exp_at_most_one(num: int, den: int, rng: random.Random) -> bool:
    """Bernoulli(exp(-num/den)) for 0 <= num/den <= 1 (CKS Algorithm 1, first case)."""
    k = 1
    while rng.randrange(den * k) < num:  # A ~ Bernoulli(gamma / k)
        k += 1
    return k % 2 == 1


def bernoulli_exp(num: int, den: int, rng: random.Random) -> bool:
    """Bernoulli(exp(-gamma)) for rational gamma = num/den >= 0 (CKS Algorithm 1)."""
    if num < 0 or den <= 0:
        raise ParameterError("gamma", Fraction(num, max(den, 1)), "[0, inf)")
    while num > den:
        if not _bernoulli_exp_at_most_one(1, 1, rng):
            return False
        num -= den
    return _bernoulli_exp_at_most_one(num, den, rng)


def sample_discrete_laplace(scale: int, rng: random.Random) -> int:
    """One draw with P(x) proportional to exp(-|x|/scale), integer scale >= 1 (CKS Alg. 2)."""
    while True:
        u = rng.randrange(scale)
        if not bernoulli_exp(u, scale, rng):
            continue
        v = 0
        while bernoulli_exp(1, 1, rng):
            v += 1
        magnitude = u + scale * v
        negative = rng.randrange(2) == 1
        if negative and magnitude == 0:
            continue
        return -magnitude if negative else magnitude


def _as_fraction(sigma_sq: Fraction | int | str) -> Fraction:
    try:
        value = Fraction(sigma_sq)
    except (ValueError, ZeroDivisionError, TypeError) as exc:
        raise ParameterError("sigma_sq", sigma_sq, "(0, inf) as an exact rational") from exc
    if value <= 0:
        raise ParameterError("sigma_sq", sigma_sq, "(0, inf) as an exact rational")
    return value


def sample_discrete_gaussian(
    sigma_sq: Fraction | int | str, size: int, rng: random.Random | None = None
) -> list[int]:
    """`size` independent draws of N_Z(0, sigma_sq) (CKS Algorithm 3).

    `rng` defaults to the OS CSPRNG; tests may pass a seeded `random.Random` for repeatability.
    Many draws from the OS CSPRNG run the same algorithm on numpy arrays
    (`discrete_gaussian_batch`): the same distribution, far fewer Python steps.
    """
    var = _as_fraction(sigma_sq)
    if size < 0:
        raise ParameterError("size", size, "[0, inf)")
    if rng is None and size >= _BATCH_FROM and discrete_gaussian_batch.fits(var):
        return discrete_gaussian_batch.sample_batch(var, size)  # the same algorithm, vectorized
    source = rng if rng is not None else _SYSTEM_RANDOM
    n, d = var.numerator, var.denominator
    t = math.isqrt(n // d) + 1  # floor(sigma) + 1
    gamma_den = 2 * t * t * n * d
    out: list[int] = []
    while len(out) < size:
        y = sample_discrete_laplace(t, source)
        # gamma = (|y| - sigma^2/t)^2 / (2 sigma^2) = (|y| t d - n)^2 / (2 t^2 n d)
        gamma_num = (abs(y) * t * d - n) ** 2
        if bernoulli_exp(gamma_num, gamma_den, source):
            out.append(y)
    return out


def _support_bound(sigma_sq: float, log_tail: float = -745.0) -> int:
    """x beyond which exp(-x^2 / (2 sigma^2)) < exp(log_tail)."""
    return math.ceil(math.sqrt(-2.0 * sigma_sq * log_tail)) + 1


def discrete_gaussian_pmf(sigma_sq: Fraction | float) -> tuple[np.ndarray, int]:
    """(pmf, bound): probabilities of -bound..bound; the mass beyond is below 1e-300."""
    var = float(sigma_sq)
    if not var > 0:
        raise ParameterError("sigma_sq", sigma_sq, "(0, inf)")
    bound = _support_bound(var)
    xs = np.arange(-bound, bound + 1, dtype=np.float64)
    weights = np.exp(-(xs * xs) / (2.0 * var))
    return weights / math.fsum(weights.tolist()), bound


def discrete_gaussian_variance(sigma_sq: Fraction | float | str) -> float:
    """Variance of N_Z(0, sigma_sq) by summation over the whole effective support."""
    var = float(Fraction(sigma_sq)) if isinstance(sigma_sq, str) else float(sigma_sq)
    pmf, bound = discrete_gaussian_pmf(var)
    xs = np.arange(-bound, bound + 1, dtype=np.float64)
    return math.fsum((pmf * xs * xs).tolist())


# Mass below which tails of convolved pmfs are dropped (and added back to delta bounds).
_TAIL = 1e-40
_MAX_SUPPORT = 400_000


class ShiftedGaussianProfile:
    """Exact privacy profile of N_Z(0, sigma^2)^m against the same shifted by 1 in m coordinates.

    The privacy loss is (m - 2 S) / (2 sigma^2) with S the sum of the m draws, so the profile
    needs the pmf of S: built by repeated convolution, dropping tails below 1e-40 and keeping
    their total in `dropped` (added to every delta, which stays an upper bound).
    """

    def __init__(self, sigma_sq: float, shifts: int) -> None:
        if not sigma_sq > 0:
            raise ParameterError("sigma_sq", sigma_sq, "(0, inf)")
        if shifts < 1:
            raise ParameterError("shifts", shifts, "[1, inf)")
        base, bound = discrete_gaussian_pmf(sigma_sq)
        self.sigma_sq = sigma_sq
        self.shifts = shifts
        base, base_low, dropped = _trim(base, -bound)
        pmf, low = np.array([1.0]), 0
        power, power_low, k = base, base_low, shifts
        while k:
            if k & 1:
                pmf, low, d = _trim(np.convolve(pmf, power), low + power_low)
                dropped += d
            k >>= 1
            if k:
                power, power_low, d = _trim(np.convolve(power, power), 2 * power_low)
                dropped += d * shifts  # conservative: a dropped tail may be reused many times
            if pmf.size > _MAX_SUPPORT or power.size > _MAX_SUPPORT:
                raise ParameterError("shifts", shifts, "small enough for exact summation")
        self.dropped = dropped * shifts + 1e-300 * shifts
        sums = np.arange(low, low + pmf.size, dtype=np.float64)
        self._pmf = pmf
        self._loss = (shifts - 2.0 * sums) / (2.0 * sigma_sq)

    def delta(self, epsilon: float) -> float:
        """Upper bound on the hockey-stick divergence at epsilon (both directions: symmetric)."""
        gap = np.clip(epsilon - self._loss, None, 0.0)
        return math.fsum((self._pmf * -np.expm1(gap)).tolist()) + self.dropped

    def epsilon(self, delta: float) -> float:
        """Smallest epsilon (rounded up) at which `delta(epsilon) <= delta`."""
        if not 0 < delta < 1:
            raise ParameterError("delta", delta, "(0, 1)")
        target = delta * (1 - 1e-9)
        if self.delta(0.0) <= target:
            return 0.0
        high = 1.0
        while self.delta(high) > target:
            high *= 2.0
        root = float(brentq(lambda e: self.delta(e) - target, 0.0, high, xtol=1e-14))
        while self.delta(root) > target:
            root += 1e-12 * max(1.0, root)
        return root


def _trim(pmf: np.ndarray, low: int) -> tuple[np.ndarray, int, float]:
    """Drop leading/trailing entries below the tail threshold; return the dropped mass."""
    keep = np.nonzero(pmf > _TAIL)[0]
    first, last = int(keep[0]), int(keep[-1])
    dropped = math.fsum(pmf[:first].tolist()) + math.fsum(pmf[last + 1 :].tolist())
    return pmf[first : last + 1], low + first, dropped


def tail_bound(sigma_sq: float, radius: int) -> float:
    """Upper bound on P(|Z| > radius) for Z ~ N_Z(0, sigma_sq), radius >= 0.

    sum_{x > r} e^(-x^2/(2 s^2)) <= e^(-(r+1)^2/(2 s^2)) / (1 - e^(-(r+1)/s^2)) (a geometric
    series bounds the ratio of consecutive terms), and the normaliser is at least 1 (x = 0).
    """
    if not sigma_sq > 0:
        raise ParameterError("sigma_sq", sigma_sq, "(0, inf)")
    if radius < 0:
        raise ParameterError("radius", radius, "[0, inf)")
    r1 = radius + 1.0
    return 2.0 * math.exp(-r1 * r1 / (2.0 * sigma_sq)) / -math.expm1(-r1 / sigma_sq)


def radius_for_tail(sigma_sq: float, tail: float) -> int:
    """Smallest radius whose `tail_bound` is at most `tail`."""
    if not 0 < tail < 1:
        raise ParameterError("tail", tail, "(0, 1)")
    radius = max(0, math.floor(math.sqrt(2.0 * sigma_sq * math.log(1.0 / tail))) - 2)
    while tail_bound(sigma_sq, radius) > tail:
        radius += 1
    return radius


def discrete_gaussian_log_pmf(sigma_sq: float, radius: int) -> npt.NDArray[np.float64]:
    """log P(Z = x) for x = -radius..radius (normalised over the whole support)."""
    if not sigma_sq > 0:
        raise ParameterError("sigma_sq", sigma_sq, "(0, inf)")
    bound = max(radius, _support_bound(sigma_sq))
    xs = np.arange(-bound, bound + 1, dtype=np.float64)
    log_norm = math.log(math.fsum(np.exp(-(xs * xs) / (2.0 * sigma_sq)).tolist()))
    inner = np.arange(-radius, radius + 1, dtype=np.float64)
    result: npt.NDArray[np.float64] = -(inner * inner) / (2.0 * sigma_sq) - log_norm
    return result
