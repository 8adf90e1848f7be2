"""The ledger's filter, odometer and persistence; the device budget."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from fractions import Fraction

import pytest

from ldpcollect.accounting.conversions import cks_epsilon, pure_to_rho, rho_for_target
from ldpcollect.accounting.device_budget import (
    DeviceBudget,
    DeviceBudgetExceeded,
    device_query_cost,
)
from ldpcollect.accounting.ledger import BudgetExceeded, PrivacyLedger
from ldpcollect.accounting.release_cost import PrivacyClaim, release_claims
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def pure_claims(eps: float) -> list[PrivacyClaim]:
    claim = PrivacyClaim("public", "pure", eps, 1e-6, math.inf, pure_to_rho(eps), eps, "test")
    return [claim, PrivacyClaim("aggregator", "pure", eps, 1e-6, math.inf, None, eps, "test")]


def fill(ledger: PrivacyLedger, eps_i: float) -> int:
    n = 0
    while True:
        try:
            ledger.charge(f"q{n}", pure_claims(eps_i), NOW)
        except BudgetExceeded:
            return n
        n += 1


@pytest.mark.parametrize(
    ("eps_g", "delta_g", "eps_i", "allowed"),
    [(1, 1e-6, 0.01, 487), (1, 1e-6, 0.05, 19), (1, 1e-9, 0.01, 299)],
)
def test_zcdp_filter_reference_counts(
    eps_g: float, delta_g: float, eps_i: float, allowed: int
) -> None:
    ledger = PrivacyLedger(eps_g, delta_g)
    assert fill(ledger, eps_i) == allowed
    assert cks_epsilon(ledger.spent(), delta_g) <= eps_g


def test_pure_budget_basic_composition() -> None:
    exact = PrivacyLedger(1.0, 0.0)
    assert fill(exact, 0.25) == 4
    assert exact.odometer()["epsilon"] == pytest.approx(1.0) and exact.odometer()["delta"] == 0


def test_refusal_message_and_nothing_charged() -> None:
    ledger = PrivacyLedger(1.0, 1e-6)
    claims = release_claims(RandomizedResponse("0.85", "0.3"), 10, None, 1e-6)
    with pytest.raises(BudgetExceeded) as info:
        ledger.charge("q1", claims, NOW)
    message = str(info.value)
    assert "spent rho 0" in message and "requested rho 4.41823" in message
    assert "remaining rho 0.024356" in message
    assert info.value.remaining == pytest.approx(rho_for_target(1.0, 1e-6))
    assert ledger.releases == []


def test_sp_without_noise_refused_with_reason() -> None:
    ledger = PrivacyLedger(5.0, 1e-6)
    claims = release_claims(SamplingPrivacy("1/2"), 3, None, 1e-6)
    with pytest.raises(BudgetExceeded, match="no zCDP bound"):
        ledger.check(claims)
    noisy = release_claims(SamplingPrivacy("1/2"), 3, Fraction(10), 1e-6)
    ledger.charge("q1", noisy, NOW)
    assert ledger.spent() == pytest.approx(1 / 100)


def test_no_budget_records_everything_and_notes_weakness() -> None:
    ledger = PrivacyLedger()
    ledger.charge("sp", release_claims(SamplingPrivacy("1/2"), 3, None, 1e-6), NOW)
    ledger.charge("rr", release_claims(RandomizedResponse("0.85", "0.3"), 1, None, 1e-6), NOW)
    summary = ledger.summary()
    assert summary["budget"]["mode"] == "none"
    assert summary["odometer"]["delta"] >= 0.5
    assert any("no finite epsilon" in n for n in summary["notes"])
    with pytest.raises(ParameterError, match="query_id"):
        ledger.charge("rr", release_claims(SamplingPrivacy("1/2"), 3, None, 1e-6), NOW)


def test_odometer_valid_and_monotone() -> None:
    ledger = PrivacyLedger(odometer_delta=1e-6)
    previous = 0.0
    for i in range(6):
        claims = release_claims(SamplingPrivacy("1/2"), 2, Fraction(20), 1e-6)
        ledger.charge(f"q{i}", claims, NOW)
        odo = ledger.odometer()
        assert odo["delta"] == 1e-6
        # Never below the first release's own exact figure: the transcript contains it.
        assert odo["epsilon"] >= ledger.releases[0].public().epsilon
        # Never below the (near exact) PLD composition of the same releases fixed in advance,
        # up to its discretization.
        assert odo["epsilon"] >= odo["pld_planned_epsilon"] - 1e-3
        assert odo["epsilon"] >= previous
        previous = odo["epsilon"]


def test_persistence_round_trip() -> None:
    ledger = PrivacyLedger(8.0, 1e-6)
    ledger.charge("a", release_claims(SamplingPrivacy("1/4"), 5, Fraction(3), 1e-6), NOW)
    ledger.charge("b", release_claims(RandomizedResponse("1/2", "1/2"), 1, Fraction(2), 1e-6), NOW)
    text = json.dumps(ledger.to_json())
    restored = PrivacyLedger.from_json(json.loads(text))
    assert restored.summary() == ledger.summary()
    summary = json.loads(json.dumps(ledger.summary()))
    assert summary["releases"][0]["claims"][0]["view"] == "public"
    assert summary["spent_rho"] == pytest.approx(ledger.spent_rho())


def test_device_budget() -> None:
    rr = RandomizedResponse("0.85", "0.3")
    cost = device_query_cost(rr, 1)
    assert cost.epsilon == pytest.approx(rr.local_epsilon()) and cost.delta == 0
    assert device_query_cost(rr, 3).epsilon > cost.epsilon
    budget = DeviceBudget(10.0)
    budget.record("q1", cost.epsilon)
    budget.record("q1", cost.epsilon)  # replaying the same query costs nothing more
    budget.record("q2", cost.epsilon)
    budget.record("q3", cost.epsilon)
    assert not budget.can_answer(cost.epsilon)
    with pytest.raises(DeviceBudgetExceeded, match=r"spent epsilon 8\.97"):
        budget.record("q4", cost.epsilon)
    sp = device_query_cost(SamplingPrivacy("1/2"), 4)
    assert (sp.epsilon, sp.delta) == (0.0, 0.5)
    assert not budget.can_answer(sp.epsilon, sp.delta)
    assert DeviceBudget(1.0, 0.5).can_answer(sp.epsilon, sp.delta)
    restored = DeviceBudget.from_json(json.loads(json.dumps(budget.to_json())))
    assert restored == budget
    with pytest.raises(ParameterError, match="epsilon"):
        DeviceBudget(-1.0)


def _strings_for_numbers(value: object) -> list[str]:
    """Every string in a JSON tree that is a spelled-out number such as "inf"."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings_for_numbers(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings_for_numbers(v)]
    return [value] if isinstance(value, str) and value in ("inf", "-inf", "nan") else []


def test_summary_json_is_numbers_or_null_with_reasons() -> None:
    ledger = PrivacyLedger()
    ledger.charge("sp", release_claims(SamplingPrivacy("1/2"), 3, None, 1e-6), NOW)
    ledger.charge("rr", release_claims(RandomizedResponse(1, "0.3"), 2, None, 1e-6), NOW)
    summary = ledger.summary()
    json.dumps(summary, allow_nan=False)  # strict JSON
    assert _strings_for_numbers(summary) == []
    assert summary["budget_epsilon"] is None and summary["budget_delta"] is None
    assert summary["null_reasons"]["budget_epsilon"] == "no budget is set"
    assert summary["odometer_epsilon"] is None and "odometer_epsilon" in summary["null_reasons"]
    public = summary["releases"][1]["claims"][0]
    assert public["epsilon"] is None and public["headline"] == "none"
    assert "no finite bound" in public["null_reasons"]["epsilon"]
    budgeted = PrivacyLedger(1.0, 1e-6)
    assert budgeted.summary()["budget_epsilon"] == 1.0
    assert "budget_epsilon" not in budgeted.summary()["null_reasons"]
