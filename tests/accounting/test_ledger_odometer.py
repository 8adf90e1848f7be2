"""The odometer: the smaller of two adaptively valid odometers (Renyi tiers, basic composition
with a delta schedule), each with half the delta; the PLD composition of a plan fixed in advance
beside them."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from ldpcollect.accounting.conversions import cks_epsilon
from ldpcollect.accounting.ledger import PrivacyLedger
from ldpcollect.accounting.odometer import has_curve, renyi_tier_delta, scheduled_delta
from ldpcollect.accounting.release_cost import FILTER_ORDERS, PrivacyClaim, release_claims
from ldpcollect.accounting.renyi_filter import claim_curve
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

NOW = datetime(2025, 1, 1, tzinfo=UTC)
DELTA = 1e-6
RR = RandomizedResponse("0.85", "0.3")
SP = SamplingPrivacy("1/2")


def public(claims: list[PrivacyClaim] | tuple[PrivacyClaim, ...]) -> PrivacyClaim:
    return next(c for c in claims if c.view == "public")


def renyi_tiers_by_hand(claims: list[PrivacyClaim], delta: float) -> float:
    """Odometer A written out again: at each order the summed divergences rounded up to
    1e-4 * 1.05^k, converted by CKS at delta * 6 / (12 pi^2 (k+1)^2); the best order."""
    best = math.inf
    for i, alpha in enumerate(FILTER_ORDERS):
        total = sum(float(claim_curve(c)[i]) for c in claims)
        if not math.isfinite(total):
            continue
        k = 0
        while 1e-4 * 1.05**k < total:
            k += 1
        share = delta * 6 / (len(FILTER_ORDERS) * math.pi**2 * (k + 1) ** 2)
        log_term = math.log(1 / share) + (alpha - 1) * math.log(1 - 1 / alpha) - math.log(alpha)
        best = min(best, 1e-4 * 1.05**k + log_term / (alpha - 1))
    return best


def charge_all(
    ledger: PrivacyLedger, runs: list[tuple[Mechanism, int, Fraction | None, int | None]]
) -> None:
    for i, (mech, targets, sigma, floor) in enumerate(runs):
        claims = release_claims(mech, targets, sigma, DELTA, participants=floor)
        ledger.charge(f"q{i}", claims, NOW)


def restated(mech: Mechanism, targets: int, sigma: Fraction | None, delta: float) -> float:
    return public(release_claims(mech, targets, sigma, delta)).epsilon


def test_demo_mix_scheduled_basic_composition() -> None:
    ledger = PrivacyLedger()
    charge_all(ledger, [(RR, 100, None, None), (SP, 100, None, None), (SP, 100, Fraction(2), None)])
    odo = ledger.odometer()
    # RR with two answers changing: ln(0.895/0.045) + ln(0.955/0.105), pure (delta 0). The
    # third release is stated at delta_B 6 / (pi^2 3^2), delta_B = delta_o / 2.
    rr_pure = math.log(0.895 / 0.045) + math.log(0.955 / 0.105)
    third = restated(SP, 100, Fraction(2), DELTA / 2 * 6 / (math.pi**2 * 9))
    assert odo["epsilon"] == pytest.approx(rr_pure + 0.0 + third, rel=1e-9)
    assert 6.6 < odo["epsilon"] < 6.7
    # Sampling Privacy without noise is only (0, 0.5): its delta is the mechanism's, added as
    # realized, so the reading is not claimed valid under adaptive choice.
    assert odo["delta"] == pytest.approx(0.5 + DELTA) and odo["adaptive"] is False
    assert odo["zcdp_tier_epsilon"] > 31  # the zCDP tiers, shown beside
    assert odo["pld_planned_epsilon"] <= odo["epsilon"]
    assert "realized deltas (valid if fixed in advance)" in odo["method"]
    assert any("realized" in note for note in ledger.summary()["notes"])


def test_without_the_unbounded_release_the_reading_is_adaptive() -> None:
    ledger = PrivacyLedger()
    charge_all(ledger, [(RR, 100, None, None), (SP, 100, Fraction(2), None)])
    odo = ledger.odometer()
    rr_pure = math.log(0.895 / 0.045) + math.log(0.955 / 0.105)
    second = restated(SP, 100, Fraction(2), DELTA / 2 * 6 / (math.pi**2 * 4))
    assert odo["epsilon"] == pytest.approx(rr_pure + second, rel=1e-9)
    assert (odo["delta"], odo["adaptive"]) == (DELTA, True)
    assert odo["method"].startswith("basic composition with scheduled deltas; also Renyi")
    assert not any("realized" in note for note in ledger.summary()["notes"])


def test_scheduled_deltas_never_sum_past_the_odometer_delta() -> None:
    assert math.fsum(scheduled_delta(i, DELTA) for i in range(1, 200_000)) < DELTA
    shares = [renyi_tier_delta(k, DELTA) for k in range(200_000)]
    assert len(FILTER_ORDERS) * math.fsum(shares) < DELTA


def test_pure_releases_never_below_the_exact_composition() -> None:
    ledger = PrivacyLedger()
    charge_all(ledger, [(RR, 1, None, None)] * 10)
    odo = ledger.odometer()
    # Reference: 10 answers at delta 1e-6, exact 29.9016092528; basic composition 29.9016122850.
    assert odo["epsilon"] >= 29.9016092528
    assert odo["epsilon"] == pytest.approx(29.9016122850, abs=1e-9)
    assert odo["delta"] == 0.0 and odo["method"].startswith("sum of pure epsilons")


def test_count_level_releases_use_the_renyi_tiers() -> None:
    """Ten RR releases as counts over 20,000 participants: the Renyi tiers (written out here
    again) beat basic composition; the PLD composition of the same plan fixed in advance is the
    0.5297 (all others elsewhere alone: 0.525), and the local figure is 51.98."""
    ledger = PrivacyLedger()
    charge_all(ledger, [(RR, 2, None, 20_000)] * 10)
    odo = ledger.odometer()
    publics = [public(r.claims) for r in ledger.releases]
    assert odo["epsilon"] == pytest.approx(renyi_tiers_by_hand(publics, DELTA / 2), rel=1e-12)
    assert odo["method"].startswith("Renyi tiers; also") and "order" in odo["words"]
    assert (odo["delta"], odo["adaptive"]) == (DELTA, True)
    assert 1.0 < odo["epsilon"] < 1.1 and odo["scheduled_basic_epsilon"] > odo["epsilon"]
    assert odo["pld_planned_epsilon"] == pytest.approx(0.5297, abs=1e-4)


def test_headline_is_the_smaller_adaptive_reading_and_never_below_the_plan() -> None:
    rng = random.Random(7)
    choices: list[tuple[Mechanism, int, Fraction | None, int | None]] = [
        (RR, 1, None, None),
        (RR, 100, None, None),
        (RR, 2, None, 1000),
        (SP, 100, None, None),
        (SP, 1, Fraction(1), None),
        (SP, 100, Fraction(10), None),
        (RandomizedResponse("1/2", "1/2"), 3, Fraction(4), None),
    ]
    winners = set()
    for _ in range(25):
        ledger = PrivacyLedger()
        charge_all(ledger, [rng.choice(choices) for _ in range(rng.randint(1, 6))])
        odo = ledger.odometer()
        a, b = odo["renyi_tier_epsilon"], odo["scheduled_basic_epsilon"]
        assert odo["epsilon"] == min(a, b)
        winners.add("A" if a < b else "B")
        unbounded = any(not has_curve(public(r.claims)) for r in ledger.releases)
        assert odo["adaptive"] is (not unbounded)
        # The exact PLD composition of the same releases is (up to discretization) the
        # tightest upper bound for them fixed in advance; an adaptive reading is never below.
        assert odo["epsilon"] >= odo["pld_planned_epsilon"] - 1e-3
    assert winners == {"A", "B"}


def test_ledger_json_written_before_this_change_still_loads() -> None:
    old: dict[str, Any] = {
        "version": 1,
        "epsilon": 0.0,
        "delta": 0.0,
        "odometer_delta": DELTA,
        "releases": [
            {
                "query_id": "a",
                "released_at": "2025-01-01T00:00:00+00:00",
                "claims": [
                    {
                        "view": view,
                        "guarantee": "zcdp",
                        "epsilon": 3.29,
                        "delta": DELTA,
                        "epsilon_bun_steinke": 3.97,
                        "rho": 0.25,
                        "pure_epsilon": None,
                        "explanation": "written by an older ldpcollect",
                    }
                    for view in ("public", "aggregator")
                ],
            }
        ],
    }
    ledger = PrivacyLedger.from_json(old)
    summary = ledger.summary()
    # No source: the claim is restated from its rho (CKS at the scheduled delta), still
    # adaptive; the PLD reading needs a source and is null.
    assert summary["odometer_delta"] == DELTA and summary["odometer"]["adaptive"] is True
    assert summary["odometer_epsilon"] == pytest.approx(
        min(
            cks_epsilon(0.25, DELTA / 2 * 6 / math.pi**2), summary["odometer"]["renyi_tier_epsilon"]
        )
    )
    assert summary["odometer_epsilon"] > 3.29
    assert summary["odometer"]["pld_planned_epsilon"] is None
    # Written back, every old field survives unchanged; claims gain the headline method, the
    # other figures by name and the reasons for nulls (issue 12, item 7).
    again = ledger.to_json()
    for new_claim, old_claim in zip(
        again["releases"][0]["claims"], old["releases"][0]["claims"], strict=True
    ):
        assert {k: new_claim[k] for k in old_claim} == old_claim
        assert new_claim["headline"] == "local_exact" and new_claim["figures"] == {}
        assert new_claim["null_reasons"] == {"pure_epsilon": "no pure-DP bound for this view"}
    assert PrivacyLedger.from_json(again).to_json() == again
