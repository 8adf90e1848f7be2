"""Count-level privacy of randomized-response releases: what the public learns from counts.

The public sees each target's Yes count over all participants, never an individual report. A
device moving changes its own answer's law at a target from Bern(a1) to Bern(a0) (or back);
the other participants' answers X are added to it, so the public's pair at that target is
X + Bern(a1) against X + Bern(a0), X ~ Bin(k, a1) + Bin(m - k, a0) for m other participants of
whom k are at the target. Assumptions, in words:

- the public never sees individual reports (the trusted aggregator does: its view stays local);
- nothing is released with fewer than n participants (the query's min_reports), so m >= n - 1.
  More participants only add independent terms to X (post-processing), so m = n - 1 is worst;
- the number of participants is public and the same in both neighbours (bounded neighbours).

Which k is worst is not assumed: an exhaustive search over small populations finds that
neither extreme (all others off the target, all on it) is always the worst; one other device at
the target can be worse than none. `split_pairs` bounds every k instead (see there).

With two or more targets a move changes two counts (t1: a1 -> a0, t2: a0 -> a1), and the
counts of different targets are independent, so the pair is the composition of both.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import logsumexp
from scipy.stats import binom

from ldpcollect.accounting.pld import (
    DEFAULT_INTERVAL,
    Floats,
    LossDistribution,
    PldPair,
    envelope_pair,
)
from ldpcollect.errors import ParameterError

MAX_PARTICIPANTS = 100_000_000
# Releases account a larger floor as this one: a lower floor is still a valid floor, the figure
# is already small there (0.0232 for RR 0.85/0.3, two targets), and one exact computation at
# 10^6 takes seconds.
RELEASE_FLOOR_CAP = 1_000_000


def _log_others(others: int, on_target: int, a1: float, a0: float) -> np.ndarray:
    """log P(X = c), c = 0..others, X ~ Bin(on_target, a1) + Bin(others - on_target, a0)."""
    c = np.arange(others + 1)
    if on_target == 0:
        return np.asarray(binom.logpmf(c, others, a0), dtype=np.float64)
    if on_target == others:
        return np.asarray(binom.logpmf(c, others, a1), dtype=np.float64)
    mixed = np.convolve(
        binom.pmf(np.arange(on_target + 1), on_target, a1),
        binom.pmf(np.arange(others - on_target + 1), others - on_target, a0),
    )
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(mixed), dtype=np.float64)


def _count_log_pmfs(a1: float, a0: float, others: int, on_target: int) -> tuple[Floats, Floats]:
    """log pmfs of X + Bern(a1) and X + Bern(a0) on c = 0..others+1."""
    log_x = _log_others(others, on_target, a1, a0)
    minus_inf = np.array([-np.inf])
    shifted = np.concatenate([minus_inf, log_x])  # log P(X = c - 1)
    same = np.concatenate([log_x, minus_inf])  # log P(X = c)

    def count(a: float) -> Floats:
        terms = [math.log(w) + x for w, x in ((a, shifted), (1 - a, same)) if w > 0]
        return terms[0] if len(terms) == 1 else np.logaddexp(terms[0], terms[1])

    return count(a1), count(a0)


def _renyi(log_p: Floats, log_q: Floats, alpha: float) -> float:
    """D_alpha(P || Q) from full log pmfs (no truncation: both have the same finite support)."""
    keep = log_p > -np.inf
    if np.any(log_q[keep] == -np.inf):
        return math.inf
    terms = alpha * log_p[keep] + (1 - alpha) * log_q[keep]
    return max(0.0, float(logsumexp(terms)) / (alpha - 1))


@lru_cache(maxsize=64)
def rr_count_pair(
    a1: float, a0: float, others: int, on_target: int = 0, interval: float = DEFAULT_INTERVAL
) -> PldPair:
    """PLDs of X + Bern(a1) (forward: the device at the target) against X + Bern(a0)."""
    if not 0 <= a0 <= a1 <= 1:
        raise ParameterError("a1/a0", (a1, a0), "0 <= a0 <= a1 <= 1")
    if not 0 <= on_target <= others:
        raise ParameterError("on_target", on_target, f"[0, {others}]")
    at, away = _count_log_pmfs(a1, a0, others, on_target)
    return PldPair(
        LossDistribution.from_log_pmfs(at, away, interval),
        LossDistribution.from_log_pmfs(away, at, interval),
    )


def split_pairs(
    a1: float, a0: float, participants: int, delta: float, interval: float = DEFAULT_INTERVAL
) -> list[PldPair]:
    """Two pairs, one of which bounds every arrangement of the other participants at every
    epsilon (take the worst of them).

    k others at the target: a device there answers like one elsewhere with probability
    lambda = (1 - a1)/(1 - a0) and Yes otherwise, so X is a mixture of shifts of
    Bin(m - k + J, a0); shifts change nothing and fewer others only hurt, so by joint convexity
    delta_k <= delta_off(m - k). Symmetrically (a device elsewhere answers like one at the
    target with probability a0/a1, else No) delta_k <= delta_on(k). For any split k*, every k
    is covered by off(m - k*) (k <= k*) or on(k*) (k >= k*); k* is chosen by bisection to
    balance the two at `delta`.
    """
    m, best = split_point(a1, a0, participants, delta, interval)
    return [
        rr_count_pair(a1, a0, m - best, 0, interval),
        rr_count_pair(a1, a0, best, best, interval),
    ]


@lru_cache(maxsize=64)
def split_point(
    a1: float, a0: float, participants: int, delta: float, interval: float = DEFAULT_INTERVAL
) -> tuple[int, int]:
    """(m, k*): the other participants and the split balancing both bounds at `delta`."""
    if isinstance(participants, bool) or not 1 <= participants <= MAX_PARTICIPANTS:
        raise ParameterError("participants", participants, f"[1, {MAX_PARTICIPANTS}]")
    m = participants - 1

    def off(k: int) -> PldPair:
        return rr_count_pair(a1, a0, m - k, 0, interval)

    def on(k: int) -> PldPair:
        return rr_count_pair(a1, a0, k, k, interval)

    low, high = 0, m  # off(m - k) worsens and on(k) improves as k grows
    while low < high:
        mid = (low + high) // 2
        if off(mid).epsilon(delta) >= on(mid).epsilon(delta):
            high = mid
        else:
            low = mid + 1
    best = min(
        (k for k in (low - 1, low) if 0 <= k <= m),
        key=lambda k: max(off(k).epsilon(delta), on(k).epsilon(delta)),
    )
    return m, best


def rr_count_renyi(
    flip1: float,
    flip2: float,
    n_targets: int,
    participants: int,
    delta: float,
    orders: tuple[float, ...],
) -> tuple[float, ...]:
    """Renyi divergence at each order bounding one release as counts (every arrangement, by
    the same split; Renyi divergences are jointly convex too). Two or more targets add the
    worst forward and the worst backward divergence (a product's divergence is the sum)."""
    a1 = flip1 + (1 - flip1) * flip2
    a0 = (1 - flip1) * flip2
    m, k = split_point(a1, a0, participants, delta)
    pmfs = [_count_log_pmfs(a1, a0, m - k, 0), _count_log_pmfs(a1, a0, k, k)]
    result = []
    for alpha in orders:
        forward = max(_renyi(p, q, alpha) for p, q in pmfs)
        backward = max(_renyi(q, p, alpha) for p, q in pmfs)
        result.append(forward + backward if n_targets >= 2 else max(forward, backward))
    return tuple(result)


def rr_count_pairs(
    flip1: float,
    flip2: float,
    n_targets: int,
    participants: int,
    delta: float,
    queries: int = 1,
    interval: float = DEFAULT_INTERVAL,
) -> list[PldPair]:
    """Pairs (take the worst) bounding `queries` RR releases as the public sees them.

    Per query the candidates are the split pairs (one target; each covers moves onto and off
    the target) or, with two or more targets, t1's pair composed with t2's reversed for each
    choice of split pair at each target. One query: the worst candidate. Several: the others
    may be arranged differently and the device may move differently in each query, so one
    pair dominating every candidate and its reverse (`pld.envelope_pair`) is composed.
    """
    if n_targets < 1:
        raise ParameterError("n_targets", n_targets, "[1, 65536]")
    if isinstance(queries, bool) or queries < 1:
        raise ParameterError("queries", queries, "[1, inf)")
    a1 = flip1 + (1 - flip1) * flip2
    a0 = (1 - flip1) * flip2
    split = split_pairs(a1, a0, participants, delta, interval)
    candidates = (
        split if n_targets == 1 else [c1.compose(c2.reverse()) for c1 in split for c2 in split]
    )
    if queries == 1:
        return candidates
    return [envelope_pair(candidates).self_compose(queries)]
