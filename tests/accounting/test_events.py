"""Privacy events and their composition: reference vectors, dp-accounting, algebra, validation."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.accounting import (
    ApproxDp,
    Composition,
    PureDp,
    RenyiCurve,
    Zcdp,
    compose,
    rho_for_target,
    sigma_for_target,
)
from ldpcollect.accounting.calculator import queries_cost
from ldpcollect.accounting.conversions import cks_epsilon, cks_term
from ldpcollect.accounting.local_pairs import rr_pairs, worst_renyi
from ldpcollect.accounting.release_cost import ORDERS
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import RandomizedResponse

ORACLE_ORDERS = tuple(float(a) for a in rdp.DEFAULT_RDP_ORDERS)
RR_EPS0 = 2.9901612285045354
ZCDP_TABLE = [  # rho, delta, Bun-Steinke, CKS (reference privacy-vectors.md)
    (0.03125, 1e-3, 0.960480547212, 0.688002455488),
    (0.025, 1e-6, 1.200394000238, 1.014074254726),
    (0.1, 1e-5, 2.245966026289, 1.914238832004),
    (0.5, 1e-5, 5.298525912188, 4.728386984943),
    (1.0, 1e-6, 8.433844377700, 7.766216625312),
    (0.01, 1e-9, 0.920456277631, 0.810174467868),
    (2.0, 1e-7, 13.355384855110, 12.569691681713),
]


def rel_diff(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))


# -- reference vectors ----------------------------------------------------------------------------


def test_ten_rr_answers_through_their_renyi_curve() -> None:
    one = rr_pairs(0.85, 0.3, 1)
    curve = RenyiCurve(ORDERS, tuple(worst_renyi(one, a) for a in ORDERS))
    report = Composition().compose(curve, 10).epsilon_report(1e-6)
    calculator = queries_cost(RandomizedResponse("0.85", "0.3"), 10, 1e-6)
    assert report.renyi >= 29.9016092528  # never below the exact composition
    assert report.renyi <= calculator["details"]["renyi"]["epsilon"]
    assert report.renyi == pytest.approx(29.9028, abs=1e-4)
    assert report.zcdp_cks is None and report.zcdp_bun_steinke is None
    pure = Composition().compose(PureDp(RR_EPS0), 10).epsilon_report(1e-6)
    assert pure.basic == pytest.approx(29.9016122850, abs=1e-9)
    assert pure.epsilon == pure.basic  # pure composition beats every conversion here


@pytest.mark.parametrize(("rho", "delta", "bun", "cks"), ZCDP_TABLE)
def test_zcdp_rows_of_the_reference_table(rho: float, delta: float, bun: float, cks: float) -> None:
    report = compose(Zcdp(rho)).epsilon_report(delta)
    assert report.zcdp_cks == pytest.approx(cks, rel=1e-11)
    assert report.zcdp_bun_steinke == pytest.approx(bun, rel=1e-11)
    assert report.epsilon == report.zcdp_cks
    assert cks <= report.renyi <= cks * (1 + 1e-3)  # a grid never beats the optimal order


def test_zcdp_delta_vectors_and_the_inverse() -> None:
    assert compose(Zcdp(0.05)).delta_report(0.25).zcdp_cks == pytest.approx(
        8.17727531036956e-2, rel=1e-9
    )
    assert compose(Zcdp(0.5)).delta(0.0) == pytest.approx(0.5588356393474351, rel=1e-9)
    rho = rho_for_target(1.0, 1e-6)
    assert rho == pytest.approx(0.0243559704, abs=5e-11)
    assert compose(Zcdp(rho)).epsilon(1e-6) <= 1.0
    assert sigma_for_target(1.0, 1e-6) == pytest.approx(4.5309, abs=1e-4)


# -- the oracle: dp-accounting's RdpAccountant ----------------------------------------------------


@pytest.mark.parametrize(("rho", "count"), [(0.01, 1), (0.1, 7), (0.5, 3), (2.0, 40)])
def test_zcdp_agrees_with_dp_accounting(rho: float, count: int) -> None:
    oracle = rdp.RdpAccountant(ORACLE_ORDERS)
    oracle.compose(dp_accounting.ZCDpEvent(rho), count)
    ours = Composition(base_orders=ORACLE_ORDERS).compose(Zcdp(rho), count)
    np.testing.assert_allclose(ours.rdp(), oracle.rdp, rtol=1e-12)
    for delta in (1e-3, 1e-6, 1e-10):
        assert rel_diff(ours.epsilon_report(delta).renyi, oracle.get_epsilon(delta)) < 1e-9
    for epsilon in (0.5, 2.0, 10.0):
        theirs = oracle.get_delta(epsilon)
        assert rel_diff(ours.delta_report(epsilon).renyi, theirs) < 1e-9
    # On our default grid (a superset of the oracle's), never worse.
    default = Composition().compose(Zcdp(rho), count)
    assert default.epsilon_report(1e-6).renyi <= oracle.get_epsilon(1e-6)
    assert default.epsilon(1e-6) <= oracle.get_epsilon(1e-6)


def _oracle_pure(epsilon: float, count: int) -> rdp.RdpAccountant:
    """eps-DP's sharp curve is binary randomized response with ratio e^eps (replace-one)."""
    oracle = rdp.RdpAccountant(ORACLE_ORDERS, dp_accounting.NeighboringRelation.REPLACE_ONE)
    event = dp_accounting.RandomizedResponseDpEvent(2 / (1 + math.exp(epsilon)), 2)
    oracle.compose(event, count)
    return oracle


@pytest.mark.parametrize(("epsilon", "count"), [(0.05, 50), (0.5, 10), (1.3, 5), (2.99, 10)])
def test_pure_dp_curve_agrees_with_dp_accounting_randomized_response(
    epsilon: float, count: int
) -> None:
    oracle = _oracle_pure(epsilon, count)
    ours = Composition(base_orders=ORACLE_ORDERS).compose(PureDp(epsilon), count)
    np.testing.assert_allclose(ours.rdp(), oracle.rdp, rtol=1e-9)
    assert rel_diff(ours.epsilon_report(1e-6).renyi, oracle.get_epsilon(1e-6)) < 1e-9
    assert (
        rel_diff(
            ours.delta_report(count * epsilon / 2).renyi, oracle.get_delta(count * epsilon / 2)
        )
        < 1e-9
    )


def test_mixed_composition_agrees_with_dp_accounting() -> None:
    oracle = _oracle_pure(1.0, 3)
    oracle.compose(dp_accounting.ZCDpEvent(0.2), 2)
    ours = compose(
        PureDp(1.0), PureDp(1.0), PureDp(1.0), Zcdp(0.2), Zcdp(0.2), orders=ORACLE_ORDERS
    )
    assert rel_diff(ours.epsilon_report(1e-6).renyi, oracle.get_epsilon(1e-6)) < 1e-9
    assert Composition().compose(PureDp(1.0), 3).compose(Zcdp(0.2), 2).epsilon(
        1e-6
    ) <= oracle.get_epsilon(1e-6)


def test_pure_curve_bounds_the_rr_mechanism_it_describes() -> None:
    one = rr_pairs(0.85, 0.3, 1)
    orders = np.array(ORDERS)
    ours = PureDp(RR_EPS0).renyi(orders)
    exact = np.array([worst_renyi(one, a) for a in ORDERS])
    assert np.all(ours >= exact * (1 - 1e-12))
    assert np.all(ours <= RR_EPS0) and np.all(ours <= orders * RR_EPS0 * math.tanh(RR_EPS0 / 2))


# -- the algebra ----------------------------------------------------------------------------------

rhos = st.floats(0.0, 5.0)
epsilons = st.floats(0.0, 5.0)


@settings(max_examples=40, deadline=None)
@given(a=rhos, b=rhos, e=epsilons, k=st.integers(1, 20))
def test_composition_is_additive_in_rho_and_rdp(a: float, b: float, e: float, k: int) -> None:
    both = compose(Zcdp(a), Zcdp(b), PureDp(e))
    assert both.rho == pytest.approx(a + b + e * math.tanh(e / 2), rel=1e-12, abs=1e-300)
    parts = compose(Zcdp(a)).rdp() + compose(Zcdp(b)).rdp() + compose(PureDp(e)).rdp()
    np.testing.assert_allclose(both.rdp(), parts, rtol=1e-12)
    repeated = Composition().compose(Zcdp(a), k).compose(PureDp(e), k)
    np.testing.assert_allclose(repeated.rdp(), k * compose(Zcdp(a), PureDp(e)).rdp(), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    e=st.floats(0.01, 3.0),
    rho=st.floats(0.001, 2.0),
    ae=st.floats(0.0, 2.0),
    ad=st.floats(1e-9, 1e-7),
    delta=st.floats(1e-6, 1e-3),
)
def test_mixing_is_between_each_part_and_basic_composition(
    e: float, rho: float, ae: float, ad: float, delta: float
) -> None:
    mixed = compose(PureDp(e), Zcdp(rho), ApproxDp(ae, ad))
    eps = mixed.epsilon(delta)
    for part in (PureDp(e), Zcdp(rho), ApproxDp(ae, ad)):
        assert eps >= compose(part).epsilon(delta)
    basic = e + ae + cks_epsilon(rho, delta - ad)
    assert eps <= basic * (1 + 1e-12)
    # delta(epsilon) is consistent: at the reported epsilon, the reported delta is met.
    assert mixed.delta(eps * (1 + 1e-9)) <= delta * (1 + 1e-6)


def test_approximate_parts_compose_by_basic_composition() -> None:
    pairs = compose(ApproxDp(1.0, 1e-6), ApproxDp(0.5, 1e-7))
    assert pairs.approx[0] == 1.5 and pairs.approx[1] == pytest.approx(1.1e-6)
    assert pairs.epsilon(2e-6) == 1.5
    assert math.isinf(pairs.epsilon(1e-6))  # the deltas alone exceed the budget
    assert pairs.delta(1.5) == pytest.approx(1.1e-6)
    assert pairs.delta(1.4) == 1.0
    with_zcdp = pairs.compose(Zcdp(0.1))
    report = with_zcdp.epsilon_report(1e-5)
    assert report.zcdp_cks == pytest.approx(1.5 + cks_epsilon(0.1, 1e-5 - 1.1e-6), rel=1e-12)
    assert report.approx_epsilon == 1.5 and report.approx_delta == pytest.approx(1.1e-6)


def test_renyi_curve_is_read_upwards_between_orders() -> None:
    curve = RenyiCurve((2.0, 8.0), (0.3, 0.7))
    np.testing.assert_array_equal(
        curve.renyi(np.array([1.5, 2.0, 3.0, 8.0, 9.0])), [0.3, 0.3, 0.7, 0.7, math.inf]
    )
    report = compose(RenyiCurve((2.0,), (0.3,))).epsilon_report(1e-5)
    assert report.renyi == pytest.approx(0.3 + cks_term(2.0, 1e-5), rel=1e-14)
    assert report.renyi_order == 2.0


def test_empty_composition_costs_nothing() -> None:
    assert compose().epsilon(1e-6) == 0.0 and compose().delta(0.0) == 0.0
    assert compose().rho == 0.0


# -- validation -----------------------------------------------------------------------------------

bad_nonnegative = st.one_of(
    st.floats(max_value=-1e-300), st.just(math.inf), st.just(math.nan), st.just(-math.inf)
)


@settings(max_examples=30, deadline=None)
@given(value=bad_nonnegative)
def test_bad_parameters_are_named(value: float) -> None:
    with pytest.raises(ParameterError, match=r"epsilon must be in \[0, inf\)"):
        PureDp(value)
    with pytest.raises(ParameterError, match=r"rho must be in \[0, inf\)"):
        Zcdp(value)
    with pytest.raises(ParameterError, match=r"epsilon must be in \[0, inf\)"):
        ApproxDp(value, 0.5)
    with pytest.raises(ParameterError, match=r"epsilon must be in \[0, inf\)"):
        compose(Zcdp(1.0)).delta(value)


@settings(max_examples=30, deadline=None)
@given(
    delta=st.one_of(
        st.floats(max_value=-1e-300), st.floats(min_value=1.0 + 1e-12), st.just(math.nan)
    )
)
def test_bad_deltas_are_named(delta: float) -> None:
    with pytest.raises(ParameterError, match=r"delta must be in \[0, 1\]"):
        ApproxDp(1.0, delta)
    with pytest.raises(ParameterError, match=r"delta must be in \(0, 1\)"):
        compose(Zcdp(1.0)).epsilon(delta)


@settings(max_examples=30, deadline=None)
@given(order=st.one_of(st.floats(max_value=1.0), st.just(math.inf), st.just(math.nan)))
def test_bad_orders_are_named(order: float) -> None:
    with pytest.raises(ParameterError, match=r"orders must be in \(1, inf\)"):
        RenyiCurve((2.0, order), (0.1, 0.2))


def test_bad_curves_and_counts() -> None:
    with pytest.raises(ParameterError, match="orders"):
        RenyiCurve((), ())
    with pytest.raises(ParameterError, match="epsilons"):
        RenyiCurve((2.0, 3.0), (0.1,))
    with pytest.raises(ParameterError, match="distinct"):
        RenyiCurve((2.0, 2.0), (0.1, 0.1))
    with pytest.raises(ParameterError, match=r"epsilons must be in \[0, inf\]"):
        RenyiCurve((2.0,), (-0.1,))
    with pytest.raises(ParameterError, match="count"):
        Composition().compose(Zcdp(1.0), -1)
    with pytest.raises(ParameterError, match=r"delta must be in \(0, 1\)"):
        compose(Zcdp(1.0)).epsilon(0.0)
    assert RenyiCurve((2.0,), (math.inf,)).renyi(np.array([2.0]))[0] == math.inf
