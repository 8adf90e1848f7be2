"""Release claims: the reference figures, both views, and plain-words explanations."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from ldpcollect.accounting.conversions import bun_steinke_epsilon, cks_epsilon
from ldpcollect.accounting.release_cost import (
    PrivacyClaim,
    noise_rho,
    release_claims,
    sp_round_epsilon,
)
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy

RR = RandomizedResponse("0.85", "0.3")
EPS0 = 2.9901612285045354
NO_SIDE = 2.2077509903232064


def by_view(claims: list[PrivacyClaim]) -> dict[str, PrivacyClaim]:
    assert sorted(c.view for c in claims) == ["aggregator", "public"]
    return {c.view: c for c in claims}


def test_rr_single_target_matches_reference() -> None:
    claims = by_view(release_claims(RR, 1, None, 1e-6))
    for claim in claims.values():
        assert claim.guarantee == "pure"
        assert claim.pure_epsilon == pytest.approx(EPS0, rel=1e-12)
        assert claim.rho == pytest.approx(2.4443804455276226, rel=1e-12)
        assert claim.epsilon <= EPS0
        assert claim.rho is not None
        assert claim.epsilon_bun_steinke == pytest.approx(bun_steinke_epsilon(claim.rho, 1e-6))
    assert RR.local_epsilon() == pytest.approx(EPS0, rel=1e-12)


def test_rr_two_targets_two_answers_change() -> None:
    claims = by_view(release_claims(RR, 40, None, 1e-6))
    assert claims["public"].pure_epsilon == pytest.approx(EPS0 + NO_SIDE, rel=1e-12)
    assert "two" in claims["public"].explanation


def test_rr_noise_improves_public_view_only() -> None:
    claims = by_view(release_claims(RR, 40, Fraction(4), 1e-6))
    public, aggregator = claims["public"], claims["aggregator"]
    assert public.rho is not None
    assert public.rho == pytest.approx(2 / (2 * 16))
    assert public.epsilon < cks_epsilon(public.rho, 1e-6)  # exact profile beats generic CKS
    assert public.epsilon < aggregator.epsilon
    assert aggregator.pure_epsilon == pytest.approx(EPS0 + NO_SIDE)
    assert "sqrt(2)" in public.explanation


def test_sp_without_noise_is_only_approximate() -> None:
    claims = by_view(release_claims(SamplingPrivacy("1/2"), 10, None, 1e-6))
    for claim in claims.values():
        assert claim.guarantee == "approximate"
        # No finite epsilon at the stated delta; (0, s) is kept as the reveal probability.
        assert claim.delta == 1e-6 and math.isinf(claim.epsilon) and claim.unbounded
        assert claim.reveal_probability == 0.5 and claim.composable() == (0.0, 0.5)
        assert claim.to_json()["epsilon"] is None and claim.to_json()["unbounded"] is True
        assert claim.rho is None and claim.pure_epsilon is None
        assert "no finite epsilon" in claim.explanation


def test_sp_round_leakage() -> None:
    for s, eps in [
        ("0.1", 0.10536051565782628),
        ("0.25", 0.2876820724517809),
        ("0.5", 0.6931471805599453),
        ("0.75", 1.3862943611198906),
    ]:
        assert sp_round_epsilon(Fraction(s), 1) == pytest.approx(eps, rel=1e-12)
        two = math.log((1 + float(Fraction(s))) / (1 - float(Fraction(s))))
        assert sp_round_epsilon(Fraction(s), 2) == pytest.approx(two, rel=1e-12)
    aggregator = by_view(release_claims(SamplingPrivacy("0.5"), 1, None, 1e-6))["aggregator"]
    assert "0.693147" in aggregator.explanation


def test_sp_with_noise_is_zcdp() -> None:
    claims = by_view(release_claims(SamplingPrivacy("1/2"), 10, Fraction(4), 1e-6))
    public = claims["public"]
    assert public.guarantee == "zcdp"
    assert public.rho == pytest.approx(noise_rho(Fraction(4), 10)) and public.rho == 1 / 16
    assert 0 < public.epsilon <= cks_epsilon(1 / 16, 1e-6) < public.epsilon_bun_steinke
    assert claims["aggregator"].guarantee == "approximate"
    single = by_view(release_claims(SamplingPrivacy("1/2"), 1, Fraction(4), 1e-6))["public"]
    assert single.rho == 1 / 32


def test_no_guarantee_is_stated() -> None:
    claims = by_view(release_claims(RandomizedResponse(1, "0.3"), 3, None, 1e-6))
    assert claims["public"].guarantee == "none" and math.isinf(claims["public"].epsilon)
    noisy = by_view(release_claims(RandomizedResponse(1, "0.3"), 3, Fraction(2), 1e-6))
    assert noisy["public"].guarantee == "zcdp" and math.isfinite(noisy["public"].epsilon)


def test_claim_json_round_trip() -> None:
    for claim in release_claims(RandomizedResponse(1, "0.3"), 3, None, 1e-6) + release_claims(
        SamplingPrivacy("0.3"), 2, Fraction(3), 1e-6
    ):
        assert PrivacyClaim.from_json(claim.to_json()) == claim


def test_bad_input() -> None:
    with pytest.raises(ParameterError, match="n_targets"):
        release_claims(RR, 0, None, 1e-6)
    with pytest.raises(ParameterError, match="noise_sigma"):
        release_claims(RR, 1, Fraction(0), 1e-6)
    with pytest.raises(ParameterError, match="delta"):
        release_claims(RR, 1, None, 1.5)
