"""Count-level privacy of randomized response: the issue's values, dp-accounting's PLD as the
oracle, the worst arrangement of the other participants searched exhaustively, and every
neighbouring pair of small populations enumerated."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as oracle
from scipy.stats import binom

from ldpcollect.accounting.count_level import rr_count_pair
from ldpcollect.accounting.release_cost import release_claims, rr_count_level_epsilon
from ldpcollect.mechanisms import RandomizedResponse
from tests.accounting.test_enumeration import TOL, assert_claim_holds, rr_dists, worst_true_delta

RR = RandomizedResponse("0.85", "0.3")
A1, A0 = 0.895, 0.045


@pytest.mark.parametrize(
    ("participants", "targets", "delta", "queries", "ours"),
    [
        (20_000, 1, 1e-6, 1, 0.1107),
        (20_000, 2, 1e-6, 1, 0.1548),
        (10**6, 2, 1e-6, 1, 0.01895),
        (20_000, 2, 1e-6, 10, 0.5297),
        (20_000, 1, 1e-12, 1, 0.1948),
        (20_000, 2, 1e-12, 1, 0.2626),
    ],
)
def test_figures_are_within_five_percent_of_the_exact_worst_case(
    participants: int, targets: int, delta: float, queries: int, ours: float
) -> None:
    """One arrangement (all others off the target) is a real case, so its figure is a lower
    bound on the exact worst case; ours bound every arrangement (and every sequence of them
    over the queries), so the exact figure lies between the two, which are within 5%."""
    figure = rr_count_level_epsilon(RR, targets, participants, delta, queries)
    assert figure == pytest.approx(ours, abs=1e-4)
    off = rr_count_pair(A1, A0, participants - 1, 0)
    one = off if targets == 1 else off.compose(off.reverse())
    off_figure = (one if queries == 1 else one.self_compose(queries)).epsilon(delta)
    assert off_figure <= figure <= 1.05 * off_figure


def test_two_targets_at_the_demos_floor_against_every_arrangement() -> None:
    """The demo's RR release (floor 100, two or more targets): every pair of arrangements
    (k1 others at the device's old target, k2 at its new one, k1 + k2 <= 99) computed
    exactly. Our figure holds for all of them and is within 5% of the worst (3.7339)."""
    n, delta = 100, 1e-6
    ours = rr_count_level_epsilon(RR, 2, n, delta)
    assert ours == pytest.approx(3.8076, abs=1e-4)
    pmfs = [count_pmfs(n - 1, k, A1, A0) for k in range(n)]

    def worst(eps: float) -> float:
        found = 0.0
        for k1 in range(n):
            p1, q1 = pmfs[k1]
            p2 = np.array([pmfs[k][0] for k in range(n - k1)])  # k2 = 0 .. 99 - k1
            q2 = np.array([pmfs[k][1] for k in range(n - k1)])
            # leaving t1 (p1 -> q1) while arriving at t2 (q2 -> p2), and the reverse move
            for a, b, c, d in ((p1, q1, q2, p2), (q1, p1, p2, q2)):
                big = a[None, :, None] * c[:, None, :] - math.exp(eps) * (
                    b[None, :, None] * d[:, None, :]
                )
                found = max(found, float(np.max(np.maximum(big, 0.0).sum(axis=(1, 2)))))
        return found

    assert worst(ours) <= delta * (1 + 1e-6)
    assert worst(ours / 1.05) > delta


def test_one_target_against_every_arrangement_computed_exactly() -> None:
    """n = 600: the exact worst case over every k (others at the target), by direct hockey-stick
    sums, lies below our figure and within 5% of it."""
    n, delta = 600, 1e-6
    pmfs = [count_pmfs(n - 1, k, A1, A0) for k in range(n)]

    def worst(eps: float) -> float:
        return max(max(hockey(p, q, eps), hockey(q, p, eps)) for p, q in pmfs)

    ours = rr_count_level_epsilon(RR, 1, n, delta)
    assert worst(ours) <= delta * (1 + 1e-6)
    low, high = 0.0, ours  # bisect the exact epsilon
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (low, mid) if worst(mid) <= delta else (mid, high)
    assert high <= ours <= 1.05 * high


def count_pmfs(others: int, on: int, a1: float, a0: float) -> tuple[np.ndarray, np.ndarray]:
    """pmfs of X + Bern(a1) and X + Bern(a0), X ~ Bin(on, a1) + Bin(others - on, a0)."""
    x = np.convolve(
        binom.pmf(np.arange(on + 1), on, a1),
        binom.pmf(np.arange(others - on + 1), others - on, a0),
    )
    x0, x1 = np.append(x, 0.0), np.insert(x, 0, 0.0)
    return a1 * x1 + (1 - a1) * x0, a0 * x1 + (1 - a0) * x0


def test_matches_the_dp_accounting_oracle() -> None:
    p, q = count_pmfs(19_999, 0, A1, A0)
    keep = (p > 1e-300) & (q > 1e-300)
    lp = {i: math.log(v) for i, v in enumerate(p) if keep[i]}
    lq = {i: math.log(v) for i, v in enumerate(q) if keep[i]}
    figures = []
    for pessimistic in (False, True):
        one = oracle.from_two_probability_mass_functions(
            lq, lp, pessimistic_estimate=pessimistic, symmetric=False
        )
        figures.append(float(one.get_epsilon_for_delta(1e-6)))
    ours = rr_count_pair(A1, A0, 19_999, 0).epsilon(1e-6)  # the same pair, our PLD code
    assert figures[0] <= ours <= figures[1] + 1e-4
    assert rr_count_level_epsilon(RR, 1, 20_000, 1e-6) >= ours


def hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


EPSILONS = np.linspace(0.0, 6.0, 61)


def test_neither_extreme_arrangement_is_always_the_worst() -> None:
    """Exhaustive search (n = 40, flip1 0.6, flip2 0.2, delta 1e-6): 38 of the 39 others at the
    target beats both extremes, so no figure may assume an extreme is the worst."""
    a1, a0 = 0.6 + 0.4 * 0.2, 0.4 * 0.2

    def worst_delta(k: int, eps: float) -> float:
        p, q = count_pmfs(39, k, a1, a0)
        return max(hockey(p, q, eps), hockey(q, p, eps))

    assert worst_delta(38, 1.41) > max(worst_delta(0, 1.41), worst_delta(39, 1.41))


@pytest.mark.parametrize(("n", "targets"), [(2, 1), (6, 1), (30, 1), (2, 2), (5, 2), (10, 2)])
def test_count_level_claims_hold_for_every_neighbouring_pair(n: int, targets: int) -> None:
    dists, pairs, tail = rr_dists(n, targets, "0.85", "0.3", None)
    for delta in (1e-2, 1e-4):
        claims = release_claims(RR, targets, None, delta, participants=n)
        for claim in claims:
            assert_claim_holds(claim, dists, pairs, tail)
        public = claims[0]
        count = rr_count_level_epsilon(RR, targets, n, delta)
        assert worst_true_delta(dists, pairs, count, tail) <= delta + TOL  # every arrangement
        assert public.epsilon == min(count, public.figures["local_exact"])


def test_public_view_at_count_level_aggregator_view_local() -> None:
    public, aggregator = release_claims(RR, 2, None, 1e-6, participants=20_000)
    assert public.headline == "count_level" and public.epsilon == pytest.approx(0.1548, abs=1e-4)
    assert public.figures["local_exact"] == pytest.approx(5.198, abs=1e-3)
    assert "at least 20000 participants" in public.explanation
    assert aggregator.epsilon == pytest.approx(5.198, abs=1e-3)  # trusted: sees every report
    assert public.pure_epsilon == aggregator.pure_epsilon  # pure figure stays the local one


@pytest.mark.parametrize(("n", "targets"), [(4, 1), (12, 1), (3, 2), (6, 2)])
def test_composed_figure_bounds_every_sequence_of_arrangements(n: int, targets: int) -> None:
    """Two queries, each with its own arrangement of the others and its own move: the exact
    delta of every combination (product of two single-query neighbouring pairs) at the
    composed claim is within delta."""
    delta = 1e-3
    dists, pairs, _ = rr_dists(n, targets, "0.85", "0.3", None)
    claim = rr_count_level_epsilon(RR, targets, n, delta, 2)
    worst = 0.0
    for a, b in pairs:
        for c, d in pairs:
            for first in ((a, b), (b, a)):
                p = np.multiply.outer(dists[first[0]], dists[c]).ravel()
                q = np.multiply.outer(dists[first[1]], dists[d]).ravel()
                worst = max(worst, hockey(p, q, claim), hockey(q, p, claim))
    assert worst <= delta + TOL
    assert claim >= rr_count_level_epsilon(RR, targets, n, delta)  # two cost more than one


def test_ten_queries_at_twenty_thousand() -> None:
    ten = rr_count_level_epsilon(RR, 2, 20_000, 1e-6, 10)
    assert ten == pytest.approx(0.5297, abs=1e-4)  # all others elsewhere alone: 0.525
    off = rr_count_pair(A1, A0, 19_999, 0)
    assert off.compose(off.reverse()).self_compose(10).epsilon(1e-6) < ten


def test_huge_floors_are_accounted_as_the_cap_and_bad_floors_refused() -> None:
    huge = release_claims(RR, 1, None, 1e-6, participants=2**62)[0]
    capped = release_claims(RR, 1, None, 1e-6, participants=1_000_000)[0]
    assert huge == capped and huge.headline == "count_level"
    with pytest.raises(ValueError, match="participants"):
        release_claims(RR, 1, None, 1e-6, participants=0)


def test_the_planners_floor_is_within_five_percent_of_the_smallest_that_works() -> None:
    """`privacy plan` for epsilon 1, two targets: the floor meets the target, one fewer does
    not, and at 1/1.05 of it even the all-others-off arrangement (a real case) misses the
    target, so no floor below that could work (the old split bound asked for 1,212)."""
    from ldpcollect.accounting.planner import rr_participants

    floor = rr_participants(RR, 1.0, 1e-6, 2)
    assert floor is not None and floor == 715
    assert rr_count_level_epsilon(RR, 2, floor, 1e-6) <= 1.0
    assert rr_count_level_epsilon(RR, 2, floor - 1, 1e-6) > 1.0
    below = math.floor(floor / 1.05)
    off = rr_count_pair(A1, A0, below - 1, 0)
    assert off.compose(off.reverse()).epsilon(1e-6) > 1.0
