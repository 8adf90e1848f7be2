"""Privacy-loss distributions: pessimistic discretization, composition and the envelope, checked
against exact binomial composition of randomized response (local_pairs)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpcollect.accounting.local_pairs import rr_pairs, worst_delta
from ldpcollect.accounting.local_pairs import worst_epsilon as exact_epsilon
from ldpcollect.accounting.pld import LossDistribution, PldPair, envelope, power_within
from ldpcollect.errors import ParameterError


def binary(p: float, q: float) -> PldPair:
    lp = np.log(np.array([p, 1 - p]))
    lq = np.log(np.array([q, 1 - q]))
    return PldPair(LossDistribution.from_log_pmfs(lp, lq), LossDistribution.from_log_pmfs(lq, lp))


RR = binary(0.895, 0.045)  # randomized response 0.85 / 0.3


@pytest.mark.parametrize("queries", [1, 2, 10, 40])
def test_composition_is_an_upper_bound_close_to_the_exact_one(queries: int) -> None:
    pld = RR.compose(RR.reverse()).self_compose(queries)
    exact = exact_epsilon(rr_pairs(0.85, 0.3, 2, queries), 1e-6)
    assert exact <= pld.epsilon(1e-6) <= exact + 2 * queries * 1e-4  # rounding up per loss
    for eps in (0.0, 1.0, 5.0):
        assert pld.delta(eps) >= worst_delta(rr_pairs(0.85, 0.3, 2, queries), eps) - 1e-15


def test_envelope_dominates_every_candidate_at_every_epsilon() -> None:
    candidates = [RR.forward, RR.backward, binary(0.6, 0.3).forward, binary(0.99, 0.5).backward]
    worst = envelope(candidates)
    for eps in np.linspace(-4.0, 4.0, 161):
        assert worst.delta(float(eps)) >= max(c.delta(float(eps)) for c in candidates) - 1e-12
    alone = envelope([RR.forward])
    assert alone.epsilon(1e-3) == pytest.approx(RR.forward.epsilon(1e-3), abs=1e-9)
    assert math.isclose(alone.total + alone.infinity_mass, 1.0, abs_tol=1e-12)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ParameterError, match="times"):
        RR.forward.self_compose(0)
    with pytest.raises(ParameterError, match="interval"):
        LossDistribution.from_log_pmfs(np.zeros(1), np.zeros(1), interval=0.0)
    with pytest.raises(ParameterError, match="delta"):
        RR.epsilon(1.5)
    with pytest.raises(ParameterError, match="candidates"):
        envelope([])


def test_a_coarser_grid_stays_above_and_within_its_interval() -> None:
    pld = RR.compose(RR.reverse()).self_compose(10)
    coarse = pld.coarsened(16e-4)
    for eps in np.linspace(0.0, 60.0, 121):
        assert coarse.delta(float(eps)) >= pld.delta(float(eps)) - 1e-15
    assert pld.epsilon(1e-6) <= coarse.epsilon(1e-6) <= pld.epsilon(1e-6) + 16e-4
    with pytest.raises(ParameterError, match="multiple"):
        pld.coarsened(1.5e-4)


@pytest.mark.parametrize("queries", [1, 40])
def test_bounded_composition_costs_at_most_twice_its_final_interval(queries: int) -> None:
    """Forty local RR answers (losses up to 208) kept within 2^17 points: a coarser grid, never
    below the exact composition, and above it by at most twice the final interval; one answer
    fits on the original grid."""
    pair = RR.compose(RR.reverse())
    bounded = power_within(pair, queries, 1 << 17)
    exact = exact_epsilon(rr_pairs(0.85, 0.3, 2, queries), 1e-6)
    interval = bounded.forward.interval
    assert max(bounded.forward.probs.size, bounded.backward.probs.size) <= 1 << 17
    assert exact <= bounded.epsilon(1e-6) <= exact + 2 * queries * 1e-4 + 2 * interval
    assert (interval > 1e-4) is (queries == 40)
