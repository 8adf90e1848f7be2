"""Exact privacy of one device's report(s) as finite pairs of distributions.

A device's report for a query is one bit per target. Under bounded neighbours a device changes
its location; with two or more targets it may move from one target t1 to another t2, which
changes the input of TWO bits (t1: Yes -> No, t2: No -> Yes). Moves to or from a location that
is not a target change one bit, and those pairs are post-processings of the two-bit pair (replace
the second bit with a fresh draw), so the two-bit pair dominates. With a single target only one
bit can change, in either direction.

A `Pair` is a product of independent binary pairs (P_i, Q_i), each given by P(bit = 1) under
the two neighbours; privacy loss, Renyi divergences and the exact hockey-stick profile of its
K-fold composition follow from binomial counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import logsumexp
from scipy.stats import binom

from ldpcollect.errors import ParameterError


@dataclass(frozen=True)
class BinaryPair:
    """Bernoulli(p) under one neighbour against Bernoulli(q) under the other."""

    p: float
    q: float

    def reverse(self) -> BinaryPair:
        return BinaryPair(self.q, self.p)

    def losses(self) -> tuple[float, float]:
        """Privacy loss ln(P/Q) of output 1 and of output 0 (inf where Q = 0 < P)."""
        return _log_ratio(self.p, self.q), _log_ratio(1 - self.p, 1 - self.q)

    def pure_epsilon(self) -> float:
        """max over outputs of ln(P/Q), this direction only."""
        return max(self.losses())

    def renyi(self, alpha: float) -> float:
        """D_alpha(P || Q), alpha > 1; alpha == 1 gives KL.

        Written as ln(1 + sum_x P(x) expm1((alpha-1) ln(P/Q))) / (alpha-1), which stays
        accurate as alpha -> 1; large orders fall back to log-sum-exp.
        """
        terms = [(a, b) for a, b in ((self.p, self.q), (1 - self.p, 1 - self.q)) if a > 0]
        if any(b == 0 for _, b in terms):
            return math.inf
        logs = [math.log(a / b) for a, b in terms]
        if alpha == 1:
            return max(0.0, math.fsum(a * x for (a, _), x in zip(terms, logs, strict=True)))
        t = alpha - 1
        if t * max(abs(x) for x in logs) < 1.0:
            inner = math.fsum(a * math.expm1(t * x) for (a, _), x in zip(terms, logs, strict=True))
            return max(0.0, math.log1p(inner) / t)
        exps = [math.log(a) + t * x for (a, _), x in zip(terms, logs, strict=True)]
        return max(0.0, float(logsumexp(exps)) / t)


def _log_ratio(a: float, b: float) -> float:
    if a == 0:
        return -math.inf
    if b == 0:
        return math.inf
    return math.log(a / b)


@dataclass(frozen=True)
class Pair:
    """A product of independent binary pairs, each used `count` times (K-fold composition)."""

    parts: tuple[tuple[BinaryPair, int], ...]

    def reverse(self) -> Pair:
        return Pair(tuple((b.reverse(), k) for b, k in self.parts))

    def pure_epsilon(self) -> float:
        return math.fsum(b.pure_epsilon() * k for b, k in self.parts if k)

    def renyi(self, alpha: float) -> float:
        return math.fsum(b.renyi(alpha) * k for b, k in self.parts if k)

    def _loss_distribution(self) -> tuple[np.ndarray, np.ndarray]:
        probs, losses = np.array([1.0]), np.array([0.0])
        for b, k in self.parts:
            if k == 0:
                continue
            ones = np.arange(k + 1)
            pmf = binom.pmf(ones, k, b.p)
            l1, l0 = b.losses()
            with np.errstate(invalid="ignore"):
                loss = np.where(ones > 0, ones * l1, 0.0) + np.where(
                    k - ones > 0, (k - ones) * l0, 0.0
                )
            keep = pmf > 0
            probs = np.outer(probs, pmf[keep]).ravel()
            losses = np.add.outer(losses, loss[keep]).ravel()
        return probs, losses

    def delta(self, epsilon: float) -> float:
        """Exact hockey-stick divergence E_P[(1 - e^(eps - L))_+], this direction."""
        probs, losses = self._loss_distribution()
        gap = np.clip(epsilon - losses, None, 0.0)
        return math.fsum((probs * -np.expm1(gap)).tolist())


def worst_delta(pairs: Sequence[Pair], epsilon: float) -> float:
    """Largest exact delta at epsilon over the pairs and both directions of each."""
    return max(max(p.delta(epsilon), p.reverse().delta(epsilon)) for p in pairs)


def worst_epsilon(pairs: Sequence[Pair], delta: float) -> float:
    """Smallest epsilon (rounded up) at which every pair, both ways, has delta <= `delta`."""
    if not 0 < delta < 1:
        raise ParameterError("delta", delta, "(0, 1)")
    target = delta * (1 - 1e-9)
    if worst_delta(pairs, 0.0) <= target:
        return 0.0
    high = max(max(p.pure_epsilon(), p.reverse().pure_epsilon()) for p in pairs)
    if math.isinf(high):
        high = 1.0
        while worst_delta(pairs, high) > target:
            high *= 2.0
            if high > 1e6:
                return math.inf
    root = float(brentq(lambda e: worst_delta(pairs, e) - target, 0.0, high, xtol=1e-13))
    while worst_delta(pairs, root) > target:
        root += 1e-12 * max(1.0, root)
    return root


def worst_pure_epsilon(pairs: Sequence[Pair]) -> float:
    return max(max(p.pure_epsilon(), p.reverse().pure_epsilon()) for p in pairs)


def worst_renyi(pairs: Sequence[Pair], alpha: float) -> float:
    return max(max(p.renyi(alpha), p.reverse().renyi(alpha)) for p in pairs)


def zcdp_rho(pairs: Sequence[Pair]) -> float:
    """sup over alpha > 1 of D_alpha / alpha (the pairs' tight zCDP rho), both directions.

    Found on a dense logarithmic grid of orders with local refinement; when the supremum is
    the alpha -> 1 limit (the KL divergence) that exact value is returned.
    """
    if math.isinf(worst_pure_epsilon(pairs)):
        return math.inf

    def ratio(alpha: float) -> float:
        return worst_renyi(pairs, alpha) / alpha

    kl = worst_renyi(pairs, 1.0)
    grid = 1.0 + np.logspace(-6, 5, 600)
    values = [ratio(float(a)) for a in grid]
    best = int(np.argmax(values))
    if values[best] <= kl:
        return kl
    low = float(grid[max(best - 1, 0)])
    high = float(grid[min(best + 1, len(grid) - 1)])
    found = minimize_scalar(
        lambda a: -ratio(a), bounds=(low, high), method="bounded", options={"xatol": 1e-12}
    )
    return max(values[best], -float(found.fun)) * (1 + 1e-9)


# -- the mechanisms' pairs --------------------------------------------------------------------


def rr_pairs(flip1: float, flip2: float, n_targets: int, queries: int = 1) -> list[Pair]:
    """Dominating pairs of `queries` randomized-response reports over `n_targets` targets."""
    a1 = flip1 + (1 - flip1) * flip2
    a0 = (1 - flip1) * flip2
    return _one_hot_pairs(BinaryPair(a1, a0), n_targets, queries)


def sp_round_pairs(sampling_rate: float, n_targets: int, queries: int = 1) -> list[Pair]:
    """Dominating pairs of ONE round's Sampling Privacy answers (round 1; round 2 mirrors it):
    the device's own target is Yes with probability (1-s)/2, any other target with 1/2."""
    return _one_hot_pairs(BinaryPair((1 - sampling_rate) / 2, 0.5), n_targets, queries)


def _one_hot_pairs(at_target: BinaryPair, n_targets: int, queries: int) -> list[Pair]:
    if n_targets < 1:
        raise ParameterError("n_targets", n_targets, "[1, 65536]")
    if queries < 1:
        raise ParameterError("queries", queries, "[1, inf)")
    leaving, arriving = at_target, at_target.reverse()
    if n_targets >= 2:
        return [Pair(((leaving, queries), (arriving, queries)))]
    # One target: each query moves the device onto or off the target; any mix may occur.
    return [Pair(((leaving, m), (arriving, queries - m))) for m in range(queries + 1)]
