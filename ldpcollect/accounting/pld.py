"""Privacy-loss distributions (PLDs) with pessimistic discretization, and their composition.

The PLD of a pair (P, Q) is the law of the loss L = ln(P(w)/Q(w)) for w ~ P. Its hockey-stick
divergence is delta(eps) = E[(1 - e^(eps - L))_+], plus the P-mass where Q = 0 (loss +inf).
Composing independent pairs adds their losses, so the PLD of a product is the convolution of
the factors' PLDs.

Discretization is pessimistic, as in dp-accounting (Koskela et al.; Doroshenko et al. 2022):
every loss is rounded UP to a multiple of `interval`. Raising a loss only raises delta(eps) at
every eps (the rounded pair is a valid pair that dominates the original: Q's lost mass goes to
an outcome with loss -inf), and domination is preserved by composition, so every figure here is
an upper bound. What numerical work drops is added back as mass at +inf:
- probability outside a truncated support (the caller's `tail`, a proved bound);
- tails trimmed after a convolution (the low tail is moved up to the lowest kept loss instead);
- the floating-point error of FFT convolution, bounded per convolution by
  sqrt(N) * 64 * u * log2(N) * max(||a||_2, ||b||_2) (the normwise FFT error bound, Higham
  2002 Thm 24.2, with a generous constant: each factor's transform error is at most
  u log2(N) sqrt(N) ||a||_2 and is multiplied by the other's transform, whose entries are at
  most its 1-norm, 1; the sqrt(N) turns the 2-norm of the error into its total), N the output
  length.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq
from scipy.signal import fftconvolve

from ldpcollect.errors import ParameterError

Floats = npt.NDArray[np.float64]

DEFAULT_INTERVAL = 1e-4  # dp-accounting's default value_discretization_interval
_TRIM = 1e-30  # entries below this at either end are trimmed after a convolution
_UNIT_ROUNDOFF = 2.0**-53
_DIRECT_LIMIT = 50_000_000  # below this many multiply-adds convolve directly (no FFT error)
# Inside `precise()`, up to this many (seconds each): the FFT's error bound is added to delta,
# and at small deltas (10^-12) it would decide the epsilon.
_DIRECT_LIMIT_PRECISE = 1_000_000_000
_MODE = threading.local()


@contextmanager
def precise() -> Iterator[None]:
    """Convolve directly (exact sums of nonnegative products) up to `_DIRECT_LIMIT_PRECISE`
    multiply-adds in this thread: for deltas the FFT's error bound would swamp."""
    before = getattr(_MODE, "precise", False)
    _MODE.precise = True
    try:
        yield
    finally:
        _MODE.precise = before


def epsilon_with_precision(build: Callable[[], list[PldPair] | None], delta: float) -> float:
    """The worst epsilon at `delta` of the pairs `build()` makes; built again in `precise()`
    when their mass at +inf (FFT error bounds among it) is not far below delta."""
    pairs = build()
    if pairs is None:
        return math.inf
    if max(max(p.forward.infinity_mass, p.backward.infinity_mass) for p in pairs) > delta / 1000:
        with precise():
            pairs = build()
        if pairs is None:
            return math.inf
    return worst_epsilon(pairs, delta)


@dataclass(frozen=True)
class LossDistribution:
    """P-mass `probs[i]` at loss (offset + i) * interval, plus `infinity_mass` at +inf."""

    interval: float
    offset: int
    probs: Floats
    infinity_mass: float

    @staticmethod
    def from_log_pmfs(
        log_p: Floats, log_q: Floats, interval: float = DEFAULT_INTERVAL, tail: float = 0.0
    ) -> LossDistribution:
        """The PLD of P against Q given on the same outcomes as log-probabilities.

        `tail` bounds the P-mass of outcomes not listed; it is counted at loss +inf. Outcomes
        with P below e^-700 are counted there too (each at most e^-700).
        """
        _check_interval(interval)
        lp = np.asarray(log_p, dtype=np.float64).ravel()
        lq = np.asarray(log_q, dtype=np.float64).ravel()
        if lp.shape != lq.shape:
            raise ParameterError("log_q", lq.shape, f"the shape of log_p {lp.shape}")
        if not (tail >= 0 and math.isfinite(tail)):
            raise ParameterError("tail", tail, "[0, inf)")
        small = lp < -700.0
        infinite = ~small & (lq == -np.inf)
        keep = ~small & ~infinite
        extra = math.exp(-700.0) * int(np.count_nonzero(small))
        extra += math.fsum(np.exp(lp[infinite]).tolist())
        losses = lp[keep] - lq[keep]
        # Round up: the +1e-9 absorbs the division's rounding so no loss is ever rounded down.
        index = np.ceil(losses / interval + 1e-9).astype(np.int64)
        if index.size == 0:
            return LossDistribution(interval, 0, np.zeros(1), min(1.0, tail + extra))
        low = int(index.min())
        probs = np.bincount(index - low, weights=np.exp(lp[keep])).astype(np.float64)
        return LossDistribution(interval, low, probs, min(1.0, tail + extra))._trimmed()

    def _trimmed(self) -> LossDistribution:
        """Trim tiny tails: the low one moves up to the first kept loss, the high one to +inf."""
        keep = np.nonzero(self.probs > _TRIM)[0]
        if keep.size == 0:
            return LossDistribution(
                self.interval, self.offset, np.zeros(1), min(1.0, self.infinity_mass + self.total)
            )
        first, last = int(keep[0]), int(keep[-1])
        probs = self.probs[first : last + 1].copy()
        probs[0] += math.fsum(self.probs[:first].tolist())
        high = math.fsum(self.probs[last + 1 :].tolist())
        return LossDistribution(
            self.interval, self.offset + first, probs, min(1.0, self.infinity_mass + high)
        )

    @property
    def total(self) -> float:
        return math.fsum(self.probs.tolist())

    def compose(self, other: LossDistribution) -> LossDistribution:
        """The PLD of the product of the two pairs (independent composition)."""
        if other.interval != self.interval:
            raise ParameterError("interval", other.interval, f"{self.interval} (the same grid)")
        a, b = self.probs, other.probs
        size = a.size + b.size - 1
        # ||Fb||_inf <= ||b||_1 <= 1 (and the same for a), so the FFT's normwise error scales
        # with the larger 2-norm, far below 1 for a spread-out distribution.
        norm = max(float(np.linalg.norm(a)), float(np.linalg.norm(b)))
        fft_error = math.sqrt(size) * 64 * _UNIT_ROUNDOFF * math.log2(size) * norm
        limit = _DIRECT_LIMIT_PRECISE if getattr(_MODE, "precise", False) else _DIRECT_LIMIT
        if a.size * b.size <= _DIRECT_LIMIT:
            probs, error = np.convolve(a, b), 0.0  # sums of products of nonnegative numbers
        elif np.count_nonzero(a) * np.count_nonzero(b) <= limit:
            probs, error = _sparse_convolve(a, b), 0.0  # the same sums, over nonzero entries
        else:
            probs, error = np.clip(fftconvolve(a, b), 0.0, None), fft_error
        # Mass at +inf in either factor gives +inf in the product (losses never reach -inf):
        # 1 - (1 - a)(1 - b) of it, the finite masses being 1 - a and 1 - b.
        a_inf, b_inf = self.infinity_mass, other.infinity_mass
        infinity = a_inf + b_inf - a_inf * b_inf + error
        return LossDistribution(
            self.interval, self.offset + other.offset, probs, min(1.0, infinity)
        )._trimmed()

    def self_compose(self, times: int) -> LossDistribution:
        """`times` independent copies composed (binary powers)."""
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ParameterError("times", times, "[1, inf) (an integer)")
        result: LossDistribution | None = None
        power: LossDistribution = self
        while times:
            if times & 1:
                result = power if result is None else result.compose(power)
            times >>= 1
            if times:
                power = power.compose(power)
        assert result is not None
        return result

    def losses(self) -> Floats:
        return (self.offset + np.arange(self.probs.size, dtype=np.float64)) * self.interval

    def coarsened(self, interval: float) -> LossDistribution:
        """The same distribution on a grid of `interval` (an integer multiple of this one),
        every loss rounded UP to it: still pessimistic, each loss raised by less than
        `interval`."""
        factor = round(interval / self.interval)
        if factor < 1 or abs(factor * self.interval - interval) > 1e-9 * interval:
            raise ParameterError("interval", interval, f"a multiple of {self.interval}")
        if factor == 1:
            return LossDistribution(interval, self.offset, self.probs, self.infinity_mass)
        index = self.offset + np.arange(self.probs.size, dtype=np.int64)
        rounded = -((-index) // factor)  # ceiling division
        low = int(rounded[0])
        probs = np.bincount(rounded - low, weights=self.probs).astype(np.float64)
        return LossDistribution(interval, low, probs, self.infinity_mass)

    def delta(self, epsilon: float) -> float:
        """Upper bound on the hockey-stick divergence of P against Q at `epsilon`."""
        gap = np.clip(epsilon - self.losses(), None, 0.0)
        terms = self.probs * -np.expm1(gap)
        # numpy sums pairwise: error at most (log2 n + 128) u times the sum of |terms| (<= 1).
        error = (math.log2(terms.size + 1) + 128) * _UNIT_ROUNDOFF
        return min(1.0, float(np.sum(terms)) + error + self.infinity_mass)

    def epsilon(self, delta: float) -> float:
        """Smallest epsilon >= 0 (rounded up) with `self.delta(epsilon) <= delta`; inf if none."""
        return _smallest_epsilon(self.delta, delta, self.max_loss())

    def max_loss(self) -> float:
        return float(self.losses()[-1])


@dataclass(frozen=True)
class PldPair:
    """Both directions of a pair: P against Q (`forward`) and Q against P (`backward`)."""

    forward: LossDistribution
    backward: LossDistribution

    def reverse(self) -> PldPair:
        return PldPair(self.backward, self.forward)

    def coarsened(self, interval: float) -> PldPair:
        return PldPair(self.forward.coarsened(interval), self.backward.coarsened(interval))

    def compose(self, other: PldPair) -> PldPair:
        return PldPair(self.forward.compose(other.forward), self.backward.compose(other.backward))

    def self_compose(self, times: int) -> PldPair:
        return PldPair(self.forward.self_compose(times), self.backward.self_compose(times))

    def delta(self, epsilon: float) -> float:
        return max(self.forward.delta(epsilon), self.backward.delta(epsilon))

    def epsilon(self, delta: float) -> float:
        high = max(self.forward.max_loss(), self.backward.max_loss())
        return _smallest_epsilon(self.delta, delta, high)


def _sparse_convolve(a: Floats, b: Floats) -> Floats:
    """np.convolve(a, b) summing only products of nonzero entries (PLDs of counts are sparse
    on the loss grid), in blocks of about 10^7 products."""
    ia, ib = np.flatnonzero(a), np.flatnonzero(b)
    out = np.zeros(a.size + b.size - 1)
    rows = max(1, 10_000_000 // max(1, ib.size))
    for start in range(0, ia.size, rows):
        block = ia[start : start + rows]
        index = (block[:, None] + ib[None, :]).ravel()
        weight = (a[block][:, None] * b[ib][None, :]).ravel()
        out += np.bincount(index, weights=weight, minlength=out.size)
    return out


def compose_within(first: PldPair, second: PldPair, limit: int) -> PldPair:
    """The composition, on a grid coarsened (doubling the interval) until it has at most
    `limit` points. Each coarsening raises every loss by less than the interval it ends on;
    doubling keeps the sum of those below twice the final interval."""
    interval = max(first.forward.interval, second.forward.interval)
    a, b = first.coarsened(interval), second.coarsened(interval)
    result = a.compose(b)
    while max(result.forward.probs.size, result.backward.probs.size) > limit:
        interval *= 2
        result = result.coarsened(interval)
    return result


def power_within(pair: PldPair, times: int, limit: int) -> PldPair:
    """`times` copies composed by binary powers with `compose_within`."""
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ParameterError("times", times, "[1, inf) (an integer)")
    result: PldPair | None = None
    power = pair
    while times:
        if times & 1:
            result = power if result is None else compose_within(result, power, limit)
        times >>= 1
        if times:
            power = compose_within(power, power, limit)
    assert result is not None
    return result


def worst_epsilon(pairs: list[PldPair], delta: float) -> float:
    """The largest of the pairs' epsilons at `delta` (each a valid bound for its case)."""
    if not pairs:
        raise ParameterError("pairs", pairs, "at least one pair")
    return max(p.epsilon(delta) for p in pairs)


def _check_interval(interval: float) -> None:
    if not (interval > 0 and math.isfinite(interval)):
        raise ParameterError("interval", interval, "(0, inf)")


def _smallest_epsilon(delta_at: Callable[[float], float], delta: float, max_loss: float) -> float:
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
        raise ParameterError("delta", delta, "(0, 1)")
    target = delta * (1 - 1e-9)
    if delta_at(0.0) <= target:
        return 0.0
    high = max(max_loss, 0.0) + 1e-9
    if delta_at(high) > target:  # only the +inf mass is left above the largest finite loss
        return math.inf
    root = float(brentq(lambda e: delta_at(e) - target, 0.0, high, xtol=1e-13))
    while delta_at(root) > target:
        root += 1e-12 * max(1.0, root)
    return root


def on_off_mixes(pair: PldPair, queries: int) -> list[PldPair]:
    """Every composition of `queries` copies of `pair` or its reverse (a device moving onto a
    single target in some queries and off it in others); the worst of them bounds the whole."""
    if isinstance(queries, bool) or not isinstance(queries, int) or queries < 1:
        raise ParameterError("queries", queries, "[1, inf) (an integer)")
    mixes = []
    for onto in range(queries + 1):
        powers = [
            p.self_compose(k) for p, k in ((pair, onto), (pair.reverse(), queries - onto)) if k
        ]
        result = powers[0]
        for power in powers[1:]:
            result = result.compose(power)
        mixes.append(result)
    return mixes


def envelope(candidates: list[LossDistribution]) -> LossDistribution:
    """One PLD whose pair dominates every candidate's (at every real epsilon): composing it K
    times bounds any sequence of K candidates, whichever is chosen at each step.

    In t = e^eps a hockey-stick curve is convex and piecewise linear with kinks at e^loss; on
    a common loss grid the largest of the candidates' curves is interpolated by chords between
    grid points (a chord lies above a convex function), from (0, 1) on the left (where every
    curve is a line through (0, 1)) to the largest mass at +inf on the right (where every
    curve is flat). The chords' slope changes are the masses of the envelope's PLD ("connect the
    dots", Doroshenko, Ghazi, Kamath, Kumar and Manurangsi 2022). Where one candidate is the
    largest at both ends of a segment the chord is that candidate's own line, and its slope is
    taken from its suffix sums, so cancellation only enters at the few switching segments.
    """
    if not candidates:
        raise ParameterError("candidates", candidates, "at least one distribution")
    interval = candidates[0].interval
    if any(c.interval != interval for c in candidates):
        raise ParameterError("interval", [c.interval for c in candidates], "one common grid")
    low = min(c.offset for c in candidates)
    high = max(c.offset + c.probs.size - 1 for c in candidates)
    size = high - low + 1
    grid = (low + np.arange(size, dtype=np.float64)) * interval
    t = np.exp(grid)
    curves = np.empty((len(candidates), size))
    slopes = np.empty((len(candidates), size))  # slope on the segment ending at grid point j
    for row, c in enumerate(candidates):
        probs = np.zeros(size)
        probs[c.offset - low : c.offset - low + c.probs.size] = c.probs
        weighted = probs * np.exp(-grid)
        above_p = np.append(np.cumsum(probs[::-1])[::-1], 0.0)  # sum over grid index >= j
        above_q = np.append(np.cumsum(weighted[::-1])[::-1], 0.0)
        # delta at grid point j: losses strictly above it contribute p (1 - t_j e^-l).
        curves[row] = above_p[1:] - t * above_q[1:] + c.infinity_mass
        slopes[row] = -above_q[:size]  # on (t_{j-1}, t_j) every loss >= l_j is active
    best = np.argmax(curves, axis=0)
    height = curves[best, np.arange(size)]
    slope = np.empty(size + 1)
    slope[0] = (height[0] - 1.0) / t[0]  # the line through (0, 1)
    same = best[1:] == best[:-1]
    chord = (height[1:] - height[:-1]) / (t[1:] - t[:-1])
    own = slopes[best[1:], np.arange(1, size)]
    slope[1:size] = np.where(same, own, chord)
    slope[size] = 0.0  # flat beyond the largest loss
    masses = np.clip(t * (slope[1:] - slope[:-1]), 0.0, None)
    infinity = float(height[-1])
    # Renormalise to total 1 by moving any excess or shortfall to +inf (never below the curve).
    shortfall = 1.0 - infinity - math.fsum(masses.tolist())
    return LossDistribution(
        interval, low, masses, min(1.0, infinity + max(0.0, shortfall))
    )._trimmed()


def envelope_pair(candidates: list[PldPair]) -> PldPair:
    """A symmetric pair dominating every candidate and every candidate's reverse."""
    both = [d for c in candidates for d in (c.forward, c.backward)]
    worst = envelope(both)
    return PldPair(worst, worst)
