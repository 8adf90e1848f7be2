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
the target can be worse than none. `segment_pairs` bounds every k instead (see there).

With two or more targets a move changes two counts (t1: a1 -> a0, t2: a0 -> a1), and the
counts of different targets are independent, so the pair is the composition of both.
"""

from __future__ import annotations

import itertools
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
    envelope,
    envelope_pair,
)
from ldpcollect.errors import ParameterError

MAX_PARTICIPANTS = 100_000_000
# Releases account a larger floor as this one: a lower floor is still a valid floor, the figure
# is already small there (0.0232 for RR 0.85/0.3, two targets), and one exact computation at
# 10^6 takes seconds.
RELEASE_FLOOR_CAP = 1_000_000


# The arrangements k = 0..m of the other participants are covered by this many segments.
SEGMENTS = 64
# Each binomial is kept within mean +- this many sd (the rest is `tail`): wide enough that the
# tail times the largest likelihood ratio to the 63rd power (Renyi order 64) stays negligible.
_WINDOW_SD = 24.0


def _others_pmf(others: int, on_target: int, a1: float, a0: float) -> tuple[int, Floats, float]:
    """(offset, pmf, tail): X ~ Bin(on_target, a1) + Bin(others - on_target, a0) on a window
    of values from `offset`, and the exact mass of X outside that window (at most)."""
    offset, pmf, tail = 0, np.ones(1), 0.0
    for size, p in ((on_target, a1), (others - on_target, a0)):
        if size == 0:
            continue
        sd = math.sqrt(size * p * (1 - p))
        low = max(0, math.floor(size * p - _WINDOW_SD * sd) - 5)
        high = min(size, math.ceil(size * p + _WINDOW_SD * sd) + 5)
        part = binom.pmf(np.arange(low, high + 1), size, p)
        tail += float(binom.cdf(low - 1, size, p) + binom.sf(high, size, p))
        pmf = np.convolve(pmf, part) if pmf.size > 1 else part
        offset += low
    return offset, np.asarray(pmf, dtype=np.float64), min(1.0, tail)


def _count_log_pmfs(
    a1: float, a0: float, others: int, on_target: int
) -> tuple[Floats, Floats, float]:
    """log pmfs of X + Bern(a1) and X + Bern(a0) on the window's values (and one above), and
    the mass of either outside it (X's tail: adding the device's answer moves no mass out)."""
    offset, x, tail = _others_pmf(others, on_target, a1, a0)
    shifted = np.concatenate([[0.0], x])  # P(X = c - 1)
    same = np.concatenate([x, [0.0]])  # P(X = c)
    at_p = a1 * shifted + (1 - a1) * same
    away_p = a0 * shifted + (1 - a0) * same
    # A row whose X(c - 1) or X(c) lies outside a truncated window is not known: leave it out
    # and count its mass (at most that of the known term) in the tail.
    keep = np.ones(at_p.size, dtype=bool)
    if offset > 0:
        keep[0] = False
    if offset + x.size - 1 < others:
        keep[-1] = False
    tail += float(np.sum(np.maximum(at_p, away_p)[~keep]))
    with np.errstate(divide="ignore"):
        return np.log(at_p[keep]), np.log(away_p[keep]), min(1.0, tail)


def _renyi(log_p: Floats, log_q: Floats, alpha: float, tail: float, ratio: float) -> float:
    """D_alpha(P || Q) from log pmfs on a window; the P-mass `tail` outside it adds at most
    tail * ratio^(alpha - 1), `ratio` bounding P / Q everywhere."""
    finite = log_p > -np.inf
    # Where Q underflowed to 0 (far tails of the window), P is counted with the tail.
    lost = finite & (log_q == -np.inf)
    tail += float(np.sum(np.exp(log_p[lost])))
    keep = finite & ~lost
    terms = alpha * log_p[keep] + (1 - alpha) * log_q[keep]
    outside = tail * ratio ** (alpha - 1)
    total = float(np.exp(logsumexp(terms))) + outside
    return max(0.0, math.log(total) / (alpha - 1))


@lru_cache(maxsize=512)
def rr_count_pair(
    a1: float, a0: float, others: int, on_target: int = 0, interval: float = DEFAULT_INTERVAL
) -> PldPair:
    """PLDs of X + Bern(a1) (forward: the device at the target) against X + Bern(a0), X the
    answers of `others` other participants of whom `on_target` are at the target."""
    if not 0 <= a0 <= a1 <= 1:
        raise ParameterError("a1/a0", (a1, a0), "0 <= a0 <= a1 <= 1")
    if not 0 <= on_target <= others:
        raise ParameterError("on_target", on_target, f"[0, {others}]")
    at, away, tail = _count_log_pmfs(a1, a0, others, on_target)
    return PldPair(
        LossDistribution.from_log_pmfs(at, away, interval, tail=tail),
        LossDistribution.from_log_pmfs(away, at, interval, tail=tail),
    )


def segments(participants: int) -> list[tuple[int, int]]:
    """The arrangements k = 0..m (m = participants - 1 others, k of them at the target) in at
    most SEGMENTS consecutive runs [first, last]."""
    if isinstance(participants, bool) or not 1 <= participants <= MAX_PARTICIPANTS:
        raise ParameterError("participants", participants, f"[1, {MAX_PARTICIPANTS}]")
    m = participants - 1
    edges = np.unique(np.linspace(0, m + 1, min(SEGMENTS, m + 1) + 1).round().astype(np.int64))
    return [(int(a), int(b) - 1) for a, b in itertools.pairwise(edges.tolist())]


def segment_arrangement(participants: int, first: int, last: int) -> tuple[int, int]:
    """(others, on_target) of the pair bounding every k in [first, last]: `first` others at the
    target and m - last elsewhere. Arrangement k adds k - first devices at the target and
    last - k elsewhere, independent of the device: adding them to the count is
    post-processing, so its pair is dominated in both directions."""
    m = participants - 1
    return first + (m - last), first


def segment_pairs(
    a1: float, a0: float, participants: int, interval: float = DEFAULT_INTERVAL
) -> list[PldPair]:
    """One pair per segment; together they bound every arrangement of the others (take the
    worst, or their envelope). With SEGMENTS runs the pairs drop at most 1/SEGMENTS of the
    others (0.8% of epsilon at large populations); below SEGMENTS others each is exact."""
    return [
        rr_count_pair(a1, a0, *segment_arrangement(participants, a, b), interval)
        for a, b in segments(participants)
    ]


def rr_count_renyi(
    flip1: float,
    flip2: float,
    n_targets: int,
    participants: int,
    delta: float,
    orders: tuple[float, ...],
) -> tuple[float, ...]:
    """Renyi divergence at each order bounding one release as counts (every arrangement, by
    the same segments; Renyi divergences are jointly convex and shrink under
    post-processing). Two or more targets add the worst forward and the worst backward
    divergence (a product's divergence is the sum). `delta` is not used (kept for callers)."""
    del delta
    a1 = flip1 + (1 - flip1) * flip2
    a0 = (1 - flip1) * flip2
    ratio = max(a1 / a0 if a0 > 0 else math.inf, (1 - a0) / (1 - a1) if a1 < 1 else math.inf)
    pmfs = [
        _count_log_pmfs(a1, a0, *segment_arrangement(participants, a, b))
        for a, b in segments(participants)
    ]
    result = []
    for alpha in orders:
        forward = max(_renyi(p, q, alpha, t, ratio) for p, q, t in pmfs)
        backward = max(_renyi(q, p, alpha, t, ratio) for p, q, t in pmfs)
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
    pairs = segment_pairs(a1, a0, participants, interval)
    if n_targets == 1:
        if queries == 1:
            return pairs
        # The device may move onto the target in some queries and off it in others: one
        # symmetric pair dominating every pair and its reverse is composed.
        return [envelope_pair(pairs).self_compose(queries)]
    # Two targets: one target's pair composed with the other's reversed,
    # each target's others arranged independently. Every forward PLD is dominated by the
    # envelope of the forwards, every backward by that of the backwards, and domination
    # survives composition: both directions of the move are bounded by their composition.
    onto = envelope([p.forward for p in pairs])
    off = envelope([p.backward for p in pairs])
    both = onto.compose(off)
    per_query = PldPair(both, both)
    return [per_query if queries == 1 else per_query.self_compose(queries)]
