"""Agreement with independent oracles (dev-only dependencies: dp-accounting, opendp)."""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np
import opendp.prelude as dp
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from dp_accounting.rdp import RdpAccountant

from ldpcollect.accounting.conversions import cks_epsilon, cks_optimal_order
from ldpcollect.accounting.discrete_gaussian import ShiftedGaussianProfile
from ldpcollect.accounting.local_pairs import BinaryPair, Pair, rr_pairs, worst_epsilon

CASES = [
    (0.03125, 1e-3),
    (0.025, 1e-6),
    (0.1, 1e-5),
    (0.5, 1e-5),
    (1.0, 1e-6),
    (2.0, 1e-7),
    (5.0, 1e-9),
]


@pytest.mark.parametrize(("rho", "delta"), CASES)
def test_dp_accounting_rdp_zcdp(rho: float, delta: float) -> None:
    """RdpAccountant converts with the same CKS formula, but only over its list of orders.
    Given our optimal order among a dense grid, its minimum must equal ours: were ours not the
    true minimum, some grid order would beat it."""
    best = cks_optimal_order(rho, delta)
    orders = sorted({best, *np.linspace(1.02, 4 * best, 2000).tolist()})
    accountant = RdpAccountant(orders=orders)
    accountant.compose(dp_accounting.ZCDpEvent(rho))
    assert accountant.get_epsilon(delta) == pytest.approx(cks_epsilon(rho, delta), rel=1e-9)


@pytest.mark.parametrize(("rho", "delta"), CASES)
def test_opendp_zcdp_to_approx(rho: float, delta: float) -> None:
    dp.enable_features("contrib")
    scale = 1 / math.sqrt(2 * rho)
    meas: Any = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale
    )
    assert meas.map(1.0) == pytest.approx(rho, rel=1e-12)
    converted: Any = dp.c.make_zCDP_to_approxDP(meas)
    profile = converted.map(1.0)
    ours = cks_epsilon(meas.map(1.0), delta)
    assert profile.epsilon(delta) == pytest.approx(ours, rel=1e-9)


def _pld_of(pair: BinaryPair, interval: float) -> pld.PrivacyLossDistribution:
    upper = {1: math.log(pair.p), 0: math.log(1 - pair.p)}
    lower = {1: math.log(pair.q), 0: math.log(1 - pair.q)}
    return pld.from_two_probability_mass_functions(
        upper, lower, value_discretization_interval=interval
    )


@pytest.mark.parametrize(
    ("p", "q", "queries", "delta"),
    [(0.85, 0.3, 10, 1e-6), (0.5, 0.5, 20, 1e-5), (0.3, 0.6, 5, 1e-3)],
)
def test_dp_accounting_pld_randomized_response(
    p: float, q: float, queries: int, delta: float
) -> None:
    """PLD accounting with pessimistic discretization is an upper bound on the exact figure:
    ours (exact) must be below it and within the discretization error."""
    interval = 1e-4
    a1, a0 = p + (1 - p) * q, (1 - p) * q
    leaving = BinaryPair(a1, a0)
    for one_pair, ours_pairs in [
        (Pair(((leaving, queries),)), None),
        (Pair(((leaving, queries), (leaving.reverse(), queries))), rr_pairs(p, q, 2, queries)),
    ]:
        oracle = 0.0
        for direction in (one_pair, one_pair.reverse()):  # the oracle's worst of both ways
            accountant = None
            for part, count in direction.parts:
                single = _pld_of(part, interval).self_compose(count)
                accountant = single if accountant is None else accountant.compose(single)
            assert accountant is not None
            oracle = max(oracle, accountant.get_epsilon_for_delta(delta))
        ours = worst_epsilon([one_pair], delta)
        assert ours <= oracle + 1e-12
        assert oracle - ours < 2 * queries * interval
        if ours_pairs is not None:  # the two-target cost is exactly this symmetric pair
            assert worst_epsilon(ours_pairs, delta) == pytest.approx(ours, rel=1e-12)
    # The reference vector: 10 single-target answers at delta 1e-6.
    if (p, q, queries) == (0.85, 0.3, 10):
        assert worst_epsilon(rr_pairs(p, q, 1, 10), 1e-6) == pytest.approx(29.9016092528, abs=1e-9)


@pytest.mark.parametrize(
    ("sigma", "shifts", "eps", "interval"),
    [(4.0, 1, 1.0, 1e-6), (2.0, 1, 0.5, 1e-6), (1.0, 1, 0.3, 1e-6)],
)
def test_dp_accounting_discrete_gaussian(
    sigma: float, shifts: int, eps: float, interval: float
) -> None:
    oracle = pld.from_discrete_gaussian_mechanism(
        sigma, sensitivity=1, value_discretization_interval=1e-6
    )
    oracle = oracle.self_compose(shifts)
    ours = ShiftedGaussianProfile(sigma * sigma, shifts).delta(eps)
    assert ours == pytest.approx(oracle.get_delta_for_epsilon(eps), rel=1e3 * interval)
    assert ours <= oracle.get_delta_for_epsilon(eps) * (1 + 1e-9)
    if (sigma, shifts, eps) == (4.0, 1, 1.0):
        assert ours == pytest.approx(3.055455e-6, rel=1e-6)
