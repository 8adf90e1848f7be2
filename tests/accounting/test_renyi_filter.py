"""The Renyi filter over several orders: what it admits, and that what it admits is within the
budget by an independent measure (the exact PLD composition of the admitted releases)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction

import numpy as np
import pytest

from ldpcollect.accounting.conversions import cks_epsilon
from ldpcollect.accounting.ledger import BudgetExceeded, PrivacyLedger
from ldpcollect.accounting.release_cost import (
    FILTER_ORDERS,
    release_claims,
    rr_count_level_epsilon,
    sp_noised_epsilon,
)
from ldpcollect.accounting.renyi_filter import claim_curve, order_budgets
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy

NOW = datetime(2025, 1, 1, tzinfo=UTC)
RR = RandomizedResponse("0.85", "0.3")


def fill(ledger: PrivacyLedger, claims_for: object, limit: int = 200) -> int:
    """Charge the same release until the filter refuses; the number admitted."""
    assert callable(claims_for)
    for i in range(limit):
        try:
            ledger.charge(f"q{i}", claims_for(), NOW)
        except BudgetExceeded:
            return i
    return limit


def test_one_count_level_rr_release_no_longer_empties_the_budget() -> None:
    def claims() -> list[object]:
        return release_claims(RR, 2, None, 1e-6, participants=20_000)  # type: ignore[return-value]

    zcdp = PrivacyLedger(1.0, 1e-6)
    with pytest.raises(BudgetExceeded, match="rho"):  # rho 4.42 > 0.0244
        zcdp.charge("q", release_claims(RR, 2, None, 1e-6, participants=20_000), NOW)
    renyi = PrivacyLedger(1.0, 1e-6, filter="renyi")
    admitted = fill(renyi, claims)
    assert admitted == 23  # (1, 1e-6) holds 23 releases over 20,000 participants
    # Independent check: the exact (non-adaptive) PLD composition of what was admitted is
    # within the budget, and one more release would not have been by much.
    assert rr_count_level_epsilon(RR, 2, 20_000, 1e-6, admitted) <= 1.0
    assert renyi.spent() <= 1.0 < renyi.spent() + renyi.cost(claims())  # type: ignore[arg-type]


def test_zcdp_releases_cost_a_little_more_than_under_the_zcdp_filter() -> None:
    """The orders share delta (a union bound): for releases known only by their rho the Renyi
    filter admits at most what the zCDP filter admits, and nearly as much."""
    sigma = Fraction(20)

    def zcdp_only() -> list[object]:
        claims = release_claims(SamplingPrivacy("1/2"), 2, sigma, 1e-6)
        return [replace(c, renyi={}) for c in claims]

    by_zcdp = fill(PrivacyLedger(1.0, 1e-6), zcdp_only)
    by_renyi = fill(PrivacyLedger(1.0, 1e-6, filter="renyi"), zcdp_only)
    assert 0.7 * by_zcdp <= by_renyi <= by_zcdp  # sigma 20: 7 against 9
    rho = 1 / 400
    assert cks_epsilon(by_renyi * rho, 1e-6 / len(FILTER_ORDERS)) <= 1.0


def test_noisy_sp_is_charged_its_exact_pair_divergences() -> None:
    """With the exact single-device pair's divergences (checked in test_sp_pair) the Renyi
    filter admits more noisy SP releases than the zCDP filter, and what it admits is within
    the budget by the exact PLD composition of the same releases."""

    def claims() -> list[object]:
        return release_claims(SamplingPrivacy("1/2"), 2, Fraction(20), 1e-6)  # type: ignore[return-value]

    by_zcdp = fill(PrivacyLedger(1.0, 1e-6), claims)
    by_renyi = fill(PrivacyLedger(1.0, 1e-6, filter="renyi"), claims)
    assert (by_zcdp, by_renyi) == (9, 62)
    assert sp_noised_epsilon(Fraction(1, 2), Fraction(20), 2, 1e-6, by_renyi) <= 1.0


def test_budgets_and_curves() -> None:
    budgets = order_budgets(1.0, 1e-6)
    assert budgets.shape == (len(FILTER_ORDERS),) and np.all(np.diff(budgets) > 0)
    assert budgets[-1] > 0 > budgets[0]  # low orders cannot reach epsilon 1 at this delta
    public = release_claims(RR, 2, None, 1e-6, participants=20_000)[0]
    curve = claim_curve(public)
    assert np.all(curve < np.array(FILTER_ORDERS) * public.rho)  # count level beats local
    assert np.all(np.diff(curve) >= 0)  # D_alpha grows with alpha
    bare = release_claims(SamplingPrivacy("1/2"), 2, None, 1e-6)[0]
    assert np.all(np.isinf(claim_curve(bare)))  # (0, s) has no Renyi curve: always refused


def test_filter_kind_survives_json_and_bad_kind_is_refused() -> None:
    ledger = PrivacyLedger(1.0, 1e-6, filter="renyi")
    ledger.charge("a", release_claims(RR, 2, None, 1e-6, participants=20_000), NOW)
    again = PrivacyLedger.from_json(ledger.to_json())
    assert again.filter == "renyi" and again.mode == "renyi"
    assert again.spent() == pytest.approx(ledger.spent())
    summary = again.summary()
    assert summary["currency"] == "budget_fraction" and summary["remaining_epsilon"] is None
    assert "Renyi filter" in summary["null_reasons"]["remaining_epsilon"]
    assert math.isfinite(summary["spent"]) and 0 < summary["spent"] < 1
    with pytest.raises(ValueError, match="filter"):
        PrivacyLedger(1.0, 1e-6, filter="pld")
