"""Conversions hit the reference vectors (shared/reference/privacy-vectors.md)."""

from __future__ import annotations

import math

import pytest

from ldpcollect.accounting.conversions import (
    bun_steinke_epsilon,
    cks_delta,
    cks_epsilon,
    pure_to_rho,
    rho_for_target,
    round_up,
    sigma_for_target,
)
from ldpcollect.errors import ParameterError

VECTORS = [
    (0.03125, 1e-3, 0.960480547212, 0.688002455488),
    (0.025, 1e-6, 1.200394000238, 1.014074254726),
    (0.1, 1e-5, 2.245966026289, 1.914238832004),
    (0.5, 1e-5, 5.298525912188, 4.728386984943),
    (1.0, 1e-6, 8.433844377700, 7.766216625312),
    (0.01, 1e-9, 0.920456277631, 0.810174467868),
    (2.0, 1e-7, 13.355384855110, 12.569691681713),
]


@pytest.mark.parametrize(("rho", "delta", "eps_bs", "eps_cks"), VECTORS)
def test_zcdp_to_approx_vectors(rho: float, delta: float, eps_bs: float, eps_cks: float) -> None:
    assert bun_steinke_epsilon(rho, delta) == pytest.approx(eps_bs, rel=1e-11)
    assert cks_epsilon(rho, delta) == pytest.approx(eps_cks, rel=1e-11)
    assert cks_epsilon(rho, delta) < bun_steinke_epsilon(rho, delta)


def test_opendp_published_value() -> None:
    assert cks_epsilon(0.03125, 1e-3) == pytest.approx(0.6880024554878086, rel=1e-12)


@pytest.mark.parametrize(
    ("rho", "expected"),
    [(0.1885, 4.36), (1.095, 11.14), (2.56, 17.92), (0.07, 2.61), (2.63, 18.19)],
)
def test_seed_000_bun_steinke(rho: float, expected: float) -> None:
    assert round(bun_steinke_epsilon(rho, 1e-10), 2) == expected


@pytest.mark.parametrize(
    ("rho", "eps", "delta"),
    [
        (0.05, 0.25, 8.17727531036956e-2),
        (0.5, 0.0, 0.5588356393474351),
        (0.03125, 0.0, 0.1508457845622862),
    ],
)
def test_cks_delta_vectors(rho: float, eps: float, delta: float) -> None:
    assert cks_delta(rho, eps) == pytest.approx(delta, rel=1e-9)


def test_cks_delta_and_epsilon_are_inverse() -> None:
    for rho, delta in [(0.1, 1e-5), (1.0, 1e-6), (0.01, 1e-9)]:
        assert cks_delta(rho, cks_epsilon(rho, delta)) == pytest.approx(delta, rel=1e-7)


def test_inverse_budget_vector() -> None:
    rho = rho_for_target(1.0, 1e-6)
    assert rho == pytest.approx(0.0243559704, abs=5e-11)  # the vector's 10 digits
    assert cks_epsilon(rho, 1e-6) <= 1.0  # rounded to the safe side
    assert sigma_for_target(1.0, 1e-6) == pytest.approx(4.5309, abs=5e-5)
    assert sigma_for_target(1.0, 1e-6) >= 1 / math.sqrt(2 * rho)


@pytest.mark.parametrize(
    ("eps_g", "delta_g", "eps_i", "allowed"),
    [(1, 1e-6, 0.01, 487), (1, 1e-6, 0.05, 19), (1, 1e-9, 0.01, 299)],
)
def test_filter_counts_vector(eps_g: float, delta_g: float, eps_i: float, allowed: int) -> None:
    rho_budget = rho_for_target(eps_g, delta_g)
    assert math.floor(rho_budget / pure_to_rho(eps_i)) == allowed
    assert math.floor(rho_budget / (eps_i**2 / 2)) == allowed


def test_pure_to_rho_reference() -> None:
    assert pure_to_rho(2.9901612285045354) == pytest.approx(2.7038691959881436, rel=1e-12)
    assert pure_to_rho(2.9901612285045354) < 2.9901612285045354**2 / 2


def test_bad_input_names_parameter() -> None:
    with pytest.raises(ParameterError, match="delta"):
        cks_epsilon(0.1, 0.0)
    with pytest.raises(ParameterError, match="rho"):
        cks_epsilon(-1.0, 1e-6)
    with pytest.raises(ParameterError, match="epsilon"):
        rho_for_target(-1.0, 1e-6)


def test_round_up_never_below() -> None:
    for value in [2.9901612285045354, 0.0243559704, 1e-7 / 3, 123456.7891, 0.1 + 0.2]:
        assert round_up(value) >= value
        assert round_up(value) <= value * (1 + 2e-5)


def test_cks_delta_is_one_when_rho_is_far_above_epsilon() -> None:
    # No root to bracket: the objective rises from its lowest order, so the infimum is 1.
    assert cks_delta(80.0, 0.5) == 1.0
    assert cks_delta(40.0, 0.0) == 1.0
