"""The odometer: the better of two adaptively valid odometers, never a mix of their deltas."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from ldpcollect.accounting.conversions import cks_epsilon, round_up
from ldpcollect.accounting.ledger import PrivacyLedger
from ldpcollect.accounting.release_cost import PrivacyClaim, release_claims
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

NOW = datetime(2025, 1, 1, tzinfo=UTC)
DELTA = 1e-6
RR = RandomizedResponse("0.85", "0.3")
SP = SamplingPrivacy("1/2")


def public(claims: list[PrivacyClaim] | tuple[PrivacyClaim, ...]) -> PrivacyClaim:
    return next(c for c in claims if c.view == "public")


def tier_odometer(total_rho: float, approx_eps: float, approx_delta: float) -> tuple[float, float]:
    """The zCDP doubling tiers written out again: smallest 1e-4 * 2^k >= rho, delta / 2^(k+1)."""
    k = 0
    while 1e-4 * 2.0**k < total_rho:
        k += 1
    return cks_epsilon(1e-4 * 2.0**k, DELTA / 2.0 ** (k + 1)) + approx_eps, DELTA + approx_delta


def charge_all(ledger: PrivacyLedger, runs: list[tuple[Mechanism, int, Fraction | None]]) -> None:
    for i, (mech, targets, sigma) in enumerate(runs):
        ledger.charge(f"q{i}", release_claims(mech, targets, sigma, DELTA), NOW)


def test_demo_mix_reports_basic_composition_of_the_claims() -> None:
    ledger = PrivacyLedger()
    charge_all(ledger, [(RR, 100, None), (SP, 100, None), (SP, 100, Fraction(2))])
    odo = ledger.odometer()
    # RR with two answers changing: ln(0.895/0.045) + ln(0.955/0.105), pure.
    rr_pure = math.log(0.895 / 0.045) + math.log(0.955 / 0.105)
    noisy = public(ledger.releases[2].claims)
    assert noisy.delta == DELTA and noisy.rho == pytest.approx(0.25)
    expected = rr_pure + 0.0 + noisy.epsilon  # SP without noise: (0, 0.5)
    assert odo["epsilon"] == pytest.approx(expected, rel=1e-9)
    # SP sigma 2 is now charged its exact single-device figure 1.1954 (was 3.29 by the Gaussian
    # bound); test_sp_pair checks that figure against enumeration and dp-accounting's PLD.
    assert 1.1953 <= noisy.epsilon < 1.196
    assert 6.39 < odo["epsilon"] < 6.40
    assert odo["delta"] == pytest.approx(0.5 + DELTA, rel=1e-12)
    assert odo["method"].startswith("basic composition of the 3 releases' public claims")
    # The zCDP tiers over rho 4.42 + 0.25 give far more at the same delta: it is shown beside.
    rho = math.fsum(r for r in (public(x.claims).rho for x in ledger.releases) if r)
    tier_eps, tier_delta = tier_odometer(rho, 0.0, 0.5)
    assert odo["zcdp_tier_epsilon"] == pytest.approx(tier_eps, rel=1e-9) and tier_eps > 30
    assert odo["zcdp_tier_delta"] == pytest.approx(tier_delta)
    # Printed rounded up: a bound in words is never below the figure.
    assert f"zCDP tiers give epsilon {round_up(tier_eps, 4):.4g}" in odo["method"]


def test_pure_releases_never_below_the_exact_composition() -> None:
    ledger = PrivacyLedger()
    charge_all(ledger, [(RR, 1, None)] * 10)
    odo = ledger.odometer()
    # Reference: 10 answers at delta 1e-6, exact 29.9016092528; basic composition 29.9016122850.
    assert odo["epsilon"] >= 29.9016092528
    assert odo["epsilon"] == pytest.approx(29.9016122850, abs=1e-9)
    assert odo["delta"] == 0.0 and odo["method"].startswith("sum of pure epsilons")


def test_tier_odometer_kept_when_basic_composition_needs_more_delta() -> None:
    ledger = PrivacyLedger()
    charge_all(ledger, [(SP, 100, Fraction(20))] * 40)
    odo = ledger.odometer()
    tier_eps, _ = tier_odometer(40 / 400, 0.0, 0.0)
    basic = 40 * public(ledger.releases[0].claims).epsilon
    assert tier_eps < basic  # the tiers are better here ...
    assert (odo["epsilon"], odo["delta"]) == (pytest.approx(tier_eps, rel=1e-9), DELTA)
    assert odo["basic_delta"] == pytest.approx(40 * DELTA)  # ... and basic needs 40 deltas
    assert odo["method"].startswith("zCDP odometer tier 10")


def test_smaller_epsilon_at_a_larger_delta_is_not_mixed_in() -> None:
    # Two noisy releases: basic composition has the smaller epsilon but needs delta 2e-6; the
    # report stays the tier pair at 1e-6 rather than pairing one's epsilon with the other's delta.
    ledger = PrivacyLedger()
    charge_all(ledger, [(SP, 1, Fraction(3)), (SP, 100, Fraction(5))])
    odo = ledger.odometer()
    assert odo["basic_epsilon"] < odo["zcdp_tier_epsilon"]
    assert odo["basic_delta"] == pytest.approx(2 * DELTA) and odo["zcdp_tier_delta"] == DELTA
    assert (odo["epsilon"], odo["delta"]) == (odo["zcdp_tier_epsilon"], DELTA)


def test_reported_pair_is_always_one_candidate_whole() -> None:
    rng = random.Random(7)
    choices: list[tuple[Mechanism, int, Fraction | None]] = [
        (RR, 1, None),
        (RR, 100, None),
        (SP, 100, None),
        (SP, 1, Fraction(1)),
        (SP, 100, Fraction(10)),
        (RandomizedResponse("1/2", "1/2"), 3, Fraction(4)),
    ]
    seen = set()
    for _ in range(30):
        ledger = PrivacyLedger()
        charge_all(ledger, [rng.choice(choices) for _ in range(rng.randint(1, 6))])
        odo = ledger.odometer()
        tier = (odo["zcdp_tier_epsilon"], odo["zcdp_tier_delta"])
        basic = (odo["basic_epsilon"], odo["basic_delta"])
        pair = (odo["epsilon"], odo["delta"])
        assert pair in (tier, basic)
        assert odo["epsilon"] <= tier[0] and odo["delta"] <= tier[1]
        if pair == basic:
            assert basic[0] < tier[0] and basic[1] <= tier[1]
        seen.add(pair == basic)
    assert seen == {True, False}  # both candidates won somewhere


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
    assert (summary["odometer_epsilon"], summary["odometer_delta"]) == (3.29, DELTA)
    assert summary["odometer"]["method"].startswith("basic composition")
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
