"""The exact single-device pair of a Sampling Privacy release with discrete Gaussian noise.

A target's release is its two round counts (Y1, Y2), each plus independent N_Z(0, sigma^2).
Fix every other device's coins: they add a constant to the counts, which translates both
neighbours' outputs alike and leaves the hockey-stick divergence unchanged; by joint convexity
the mixture over their coins is no worse. So the worst case is one device alone, with its own
randomness and the noise. For one target, the device's contribution to (Y1, Y2) is

  at the target (A):  (0, 1) with probability s, else (b, b) for a uniform bit b;
  elsewhere     (U):  (b, b) for a uniform bit b;

and the pair is A + noise against U + noise, a mixture of three (two) shifted 2-D discrete
Gaussians. Moving between two targets changes both: A x U against U x A, the composition of the
pair with its reverse. Other targets' answers are identical under both neighbours.

The PLD is computed on the grid [-r, r+1]^2 holding all but `TAIL` of each component's mass
(`discrete_gaussian.tail_bound`), the rest counted at loss +inf, then discretized pessimistically
(`pld`). Past `MAX_GRID` points (sigma above about 100) the caller falls back to the zCDP bound.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.special import logsumexp

from ldpcollect.accounting.discrete_gaussian import (
    discrete_gaussian_log_pmf,
    radius_for_tail,
    tail_bound,
)
from ldpcollect.accounting.pld import DEFAULT_INTERVAL, LossDistribution, PldPair, envelope_pair
from ldpcollect.errors import ParameterError

TAIL = 1e-20  # bound on each component's mass left off the grid
RENYI_TAIL = 1e-80  # the same for the Renyi divergences, when the grid fits ...
MAX_RENYI_GRID = 1_000_000  # ... in this many points (sigma up to about 25); else the PLD
MAX_GRID = 5_000_000
MAX_CHUNKED_GRID = 40_000_000  # past MAX_GRID, built in blocks up to this (sigma about 300)


def _log_mix(*terms: tuple[float, np.ndarray]) -> np.ndarray:
    """log of sum_i w_i exp(x_i), skipping zero weights."""
    parts = [math.log(w) + x for w, x in terms if w > 0]
    out = parts[0]
    for part in parts[1:]:
        out = np.logaddexp(out, part)
    return out


@lru_cache(maxsize=32)
def _target_log_pmfs(
    sampling_rate: Fraction, sigma_sq: Fraction, tail: float = TAIL, max_grid: int = MAX_GRID
) -> tuple[np.ndarray, np.ndarray, float] | None:
    """log A and log U on the grid, and a bound on each one's mass off it (None past
    `max_grid` points)."""
    s = float(sampling_rate)
    if not 0 < s <= 1:
        raise ParameterError("sampling_rate", sampling_rate, "(0, 1]")
    var = float(sigma_sq)
    if not var > 0:
        raise ParameterError("sigma_sq", sigma_sq, "(0, inf)")
    # At least 3: with a tiny sigma the tail bound alone allows radius 0, and the truncated U
    # would be 0 where A is not (a loss of +inf instead of about 1/(2 sigma^2)).
    radius = max(3, radius_for_tail(var, tail))
    if (2 * radius + 2) ** 2 > max_grid:
        return None
    log_g = discrete_gaussian_log_pmf(var, radius)  # x = -r..r
    minus_inf = np.array([-np.inf])
    g = np.concatenate([log_g, minus_inf])  # log G(x) on x = -r..r+1
    g1 = np.concatenate([minus_inf, log_g])  # log G(x - 1) on the same x
    zero_zero = g[:, None] + g[None, :]  # outputs of (0, 0) plus noise at (x, y)
    one_one = g1[:, None] + g1[None, :]
    zero_one = g[:, None] + g1[None, :]
    log_u = _log_mix((0.5, zero_zero), (0.5, one_one))
    log_a = _log_mix((s, zero_one), ((1 - s) / 2, zero_zero), ((1 - s) / 2, one_one))
    # Off the grid: a component's point leaves it only if |Z| > r in one coordinate.
    return log_a, log_u, 2.0 * tail_bound(var, radius)


@lru_cache(maxsize=32)
def sp_target_pair(
    sampling_rate: Fraction, sigma_sq: Fraction, interval: float = DEFAULT_INTERVAL
) -> PldPair | None:
    """PLDs of one target's noisy (Y1, Y2): device there (A) against device elsewhere (U).

    None when the grid would exceed `MAX_GRID` points.
    """
    pmfs = _target_log_pmfs(sampling_rate, sigma_sq)
    if pmfs is None:
        return _chunked_target_pair(sampling_rate, sigma_sq, interval)
    log_a, log_u, tail = pmfs
    return PldPair(
        LossDistribution.from_log_pmfs(log_a, log_u, interval, tail),
        LossDistribution.from_log_pmfs(log_u, log_a, interval, tail),
    )


def _chunked_target_pair(
    sampling_rate: Fraction, sigma_sq: Fraction, interval: float
) -> PldPair | None:
    """`sp_target_pair` for grids past `MAX_GRID` points: the same PLDs, built from blocks of
    rows (each block's losses rounded up and histogrammed as `LossDistribution.from_log_pmfs`
    does), so memory stays bounded. None past `MAX_CHUNKED_GRID` points."""
    s, var = float(sampling_rate), float(sigma_sq)
    radius = max(3, radius_for_tail(var, TAIL))
    side = 2 * radius + 2
    if side * side > MAX_CHUNKED_GRID:
        return None
    log_g = discrete_gaussian_log_pmf(var, radius)
    minus_inf = np.array([-np.inf])
    g = np.concatenate([log_g, minus_inf])
    g1 = np.concatenate([minus_inf, log_g])
    tail = 2.0 * tail_bound(var, radius)
    rows = max(1, 4_000_000 // side)
    parts: dict[str, list[LossDistribution]] = {"forward": [], "backward": []}
    for start in range(0, side, rows):
        x = slice(start, start + rows)
        zero_zero = g[x, None] + g[None, :]
        one_one = g1[x, None] + g1[None, :]
        zero_one = g[x, None] + g1[None, :]
        log_u = _log_mix((0.5, zero_zero), (0.5, one_one))
        log_a = _log_mix((s, zero_one), ((1 - s) / 2, zero_zero), ((1 - s) / 2, one_one))
        parts["forward"].append(LossDistribution.from_log_pmfs(log_a, log_u, interval))
        parts["backward"].append(LossDistribution.from_log_pmfs(log_u, log_a, interval))
    forward, backward = (_merged(parts[k], tail) for k in ("forward", "backward"))
    return PldPair(forward, backward)


def _merged(blocks: list[LossDistribution], tail: float) -> LossDistribution:
    """The blocks' masses added on one grid (each block holds part of the outcomes)."""
    low = min(b.offset for b in blocks)
    high = max(b.offset + b.probs.size for b in blocks)
    probs = np.zeros(high - low)
    for b in blocks:
        probs[b.offset - low : b.offset - low + b.probs.size] += b.probs
    infinity = min(1.0, tail + math.fsum(b.infinity_mass for b in blocks))
    return LossDistribution(blocks[0].interval, low, probs, infinity)


def _off_grid_term(alpha: float, mass: float, rho: float) -> float:
    """log of a bound on sum_T P (P/Q)^(alpha-1) over a set T with P(T) <= mass: by
    Cauchy-Schwarz sqrt(P(T)) sqrt(E_P[(P/Q)^(2 alpha - 2)]) = sqrt(P(T)) e^((alpha-1)
    D_(2 alpha - 1)), and D_beta <= beta rho (the noise alone, sensitivity 1 given the coins,
    joint convexity)."""
    return (
        0.5 * math.log(mass) + (alpha - 1.0) * (2.0 * alpha - 1.0) * rho if mass > 0 else -math.inf
    )


def _grid_renyi(
    log_p: np.ndarray, log_q: np.ndarray, alphas: tuple[float, ...], tail: float, rho: float
) -> list[float]:
    """D_alpha(P || Q) at each order: the sum of P^alpha Q^(1-alpha) over the grid is exact;
    the off-grid set (and grid corners where the truncated Q is 0) is bounded by
    `_off_grid_term`; the result is at most alpha rho (the noise alone)."""
    finite_p = np.isfinite(log_p)
    keep = finite_p & np.isfinite(log_q)
    mass = tail + float(np.sum(np.exp(log_p[finite_p & ~keep])))
    lp, loss = log_p[keep], log_p[keep] - log_q[keep]
    result = []
    for alpha in alphas:
        t = alpha - 1.0
        total = float(np.logaddexp(logsumexp(lp + t * loss), _off_grid_term(alpha, mass, rho)))
        result.append(min(alpha * rho, max(0.0, total / t)))
    return result


def pld_renyi_bound(dist: LossDistribution, alphas: tuple[float, ...], rho: float) -> list[float]:
    """The same bound from a pessimistic PLD (losses rounded up only raise the sum; its mass
    at +inf is the off-grid set)."""
    keep = dist.probs > 0
    lp, loss = np.log(dist.probs[keep]), dist.losses()[keep]
    result = []
    for alpha in alphas:
        t = alpha - 1.0
        off = _off_grid_term(alpha, dist.infinity_mass, rho)
        total = float(np.logaddexp(logsumexp(lp + t * loss), off))
        result.append(min(alpha * rho, max(0.0, total / t)))
    return result


@lru_cache(maxsize=64)
def sp_release_renyi(
    sampling_rate: Fraction, noise_sigma: Fraction, n_targets: int, orders: tuple[float, ...]
) -> tuple[float, ...] | None:
    """Renyi divergence at each order bounding one noisy SP release (the single-device pair,
    as in `sp_release_pairs`): D(A||U) + D(U||A) with two or more targets, the larger of the two
    with one. On a grid wide enough that the off-grid term is negligible at moderate orders
    when it fits; otherwise from the pair's PLD. None past `MAX_GRID`."""
    sigma_sq = noise_sigma * noise_sigma
    rho = 1.0 / (2.0 * float(sigma_sq))  # one target's pair, sensitivity 1 given the coins
    wide = _target_log_pmfs(Fraction(sampling_rate), sigma_sq, RENYI_TAIL, MAX_RENYI_GRID)
    if wide is not None:
        log_a, log_u, tail = wide
        forward = _grid_renyi(log_a, log_u, orders, tail, rho)
        backward = _grid_renyi(log_u, log_a, orders, tail, rho)
    else:
        pair = sp_target_pair(Fraction(sampling_rate), sigma_sq)
        if pair is None:
            return None
        forward = pld_renyi_bound(pair.forward, orders, rho)
        backward = pld_renyi_bound(pair.backward, orders, rho)
    return tuple(
        f + b if n_targets >= 2 else max(f, b) for f, b in zip(forward, backward, strict=True)
    )


def sp_release_pairs(
    sampling_rate: Fraction,
    noise_sigma: Fraction,
    n_targets: int,
    queries: int = 1,
    interval: float = DEFAULT_INTERVAL,
) -> list[PldPair] | None:
    """Dominating pairs (take the worst) of `queries` noisy SP releases; None past `MAX_GRID`.

    Two or more targets: (A x U) against (U x A) per query. One target: the device moves on or
    off the target in each query; one symmetric pair dominating the pair and its reverse
    (`pld.envelope_pair`) is composed (within 0.6% of the worst exact mix at 20 queries, sigma 5,
    and valid for any number; the two-target pair used beyond 20 queries was 1.42x at 30).
    """
    if queries < 1:
        raise ParameterError("queries", queries, "[1, inf)")
    if not noise_sigma > 0:
        raise ParameterError("noise_sigma", noise_sigma, "(0, inf)")
    one = sp_target_pair(Fraction(sampling_rate), noise_sigma * noise_sigma, interval)
    if one is None:
        return None
    if n_targets >= 2:
        return [one.compose(one.reverse()).self_compose(queries)]
    if queries == 1:
        return [one]
    return [envelope_pair([one]).self_compose(queries)]
