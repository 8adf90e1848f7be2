"""One headline per release: the public's tightest epsilon at the ledger's delta, never 0 for
a view without a finite bound, and the other figures under it."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from aggregator.secure.views import secure_claims
from ldpcollect.accounting.release_cost import release_claims
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.privacy_headline import ledger_headline, release_headline, round_up

RR = RandomizedResponse("0.85", "0.3")


def as_json(claims: list) -> list[dict[str, object]]:  # type: ignore[type-arg]
    return [c.to_json() for c in claims]


def test_sp_without_noise_is_unbounded_with_words_never_zero() -> None:
    claims = as_json(release_claims(SamplingPrivacy("1/2"), 2, None, 1e-6))
    headline = release_headline(claims)
    assert headline.epsilon is None and headline.unbounded
    assert headline.delta == 1e-6
    assert "reveals a device's cell exactly with probability 0.5" in headline.words
    assert headline.to_json()["epsilon"] is None and headline.to_json()["unbounded"] is True
    assert headline.short().startswith("NO finite epsilon")
    aggregator = next(d for d in headline.details if d.name == "aggregator")
    assert aggregator.epsilon is None and "probability 0.5" in aggregator.sentence


def test_rr_headline_is_the_count_level_epsilon_not_the_pure_one() -> None:
    claims = release_claims(RR, 2, None, 1e-6, participants=20_000)
    headline = release_headline(as_json(claims))
    public = claims[0]
    assert headline.epsilon == public.epsilon == public.figures["count_level"]
    assert headline.epsilon is not None and headline.epsilon < 0.2
    names = [d.name for d in headline.details]
    # The local figure, the pure epsilon and the aggregator's view are details, not headlines.
    assert {"local_exact", "pure_epsilon", "aggregator", "honest_participants"} <= set(names)
    pure = next(d for d in headline.details if d.name == "pure_epsilon")
    assert pure.delta == 0.0 and pure.epsilon == pytest.approx(5.198, abs=1e-3)
    assert "admission tokens" in next(
        d.sentence for d in headline.details if d.name == "honest_participants"
    )


def test_no_view_is_shown_below_the_public_once_released() -> None:
    """A view whose own figure is below the public's (say, one secure-mode aggregator before
    the release: nothing about the answers) is listed at the public's figure, since it sees
    the release like everyone else."""
    public = release_claims(SamplingPrivacy("1/2"), 2, Fraction(5), 1e-6)[0]
    blind = replace(public, view="aggregator", epsilon=0.0, headline="secret_sharing")
    headline = release_headline(as_json([public, blind]))
    assert headline.epsilon is not None and headline.epsilon > 0
    one = next(d for d in headline.details if d.name == "aggregator")
    assert one.epsilon == headline.epsilon
    assert "before the release" in one.sentence
    # The secure views as stated now: one aggregator's claim is already the public's.
    secure = release_headline(
        as_json(secure_claims(SamplingPrivacy("1/2"), 2, Fraction(5), 1e-6, 100))
    )
    assert next(d for d in secure.details if d.name == "aggregator").epsilon == secure.epsilon


def test_ledger_headline_is_unbounded_while_a_release_reveals_devices() -> None:
    weak = as_json(release_claims(SamplingPrivacy("1/2"), 1, None, 1e-6))
    strong = as_json(release_claims(SamplingPrivacy("1/2"), 1, Fraction(5), 1e-6))
    headline = ledger_headline(2.0, 0.500001, "Renyi tiers", [strong, weak], 1e-6)
    assert headline.epsilon is None and headline.unbounded and "0.5" in headline.words
    fine = ledger_headline(0.5, 1e-6, "Renyi tiers", [strong, strong], 1e-6)
    assert (fine.epsilon, fine.delta, fine.unbounded) == (0.5, 1e-6, False)
    assert ledger_headline(None, 1e-6, "", [], 1e-6).epsilon == 0.0


def test_rounding_in_words_is_up() -> None:
    assert round_up(0.13551) == "0.136"
    assert round_up(5.1435) == "5.15"
    assert round_up(2.0) == "2"


def test_a_filter_that_admitted_every_release_gives_the_ledger_its_budget() -> None:
    """Ten SP releases (sigma 2.31, two targets) under a Renyi budget of (4, 1e-6): the
    odometer reads about 5.5, but the filter's budget, fixed before the first release, holds
    for everything it admitted; the ledger's headline is the smaller, the odometer a detail."""
    from ldpcollect.accounting.ledger import PrivacyLedger

    ledger = PrivacyLedger(4.0, 1e-6, filter="renyi")
    claims = release_claims(SamplingPrivacy("1/2"), 2, Fraction("2.31"), 1e-6)
    for i in range(10):
        ledger.charge(f"q{i}", claims, "2025-01-01T00:00:00+00:00")
    summary = ledger.summary()
    assert summary["odometer"]["epsilon"] > 5.0
    assert (summary["epsilon"], summary["delta"], summary["unbounded"]) == (4.0, 1e-6, False)
    assert summary["privacy"]["method"] == "budget_filter"
    # Without a budget the same releases read the odometer.
    free = PrivacyLedger()
    for i in range(10):
        free.charge(f"q{i}", claims, "2025-01-01T00:00:00+00:00")
    assert free.summary()["epsilon"] == free.summary()["odometer"]["epsilon"]


def test_one_release_gives_the_ledger_its_own_bound_and_a_second_the_odometer() -> None:
    """With one release nothing was chosen after seeing a result: the ledger publishes what
    the release published (SP, sigma 2, two targets: about 1.195 at 1e-6) instead of the
    odometer's looser reading; from the second release on, the odometer (or the budget)."""
    from ldpcollect.accounting.ledger import PrivacyLedger

    claims = release_claims(SamplingPrivacy("1/2"), 2, Fraction(2), 1e-6)
    own = release_headline(as_json(claims))
    assert own.epsilon is not None
    ledger = PrivacyLedger()
    ledger.charge("q0", claims, "2025-01-01T00:00:00+00:00")
    one = ledger.summary()
    assert one["odometer"]["epsilon"] > own.epsilon
    assert (one["epsilon"], one["delta"]) == (own.epsilon, own.delta)
    assert one["privacy"]["method"] == "single_release"
    ledger.charge("q1", claims, "2025-01-01T00:00:01+00:00")
    two = ledger.summary()
    assert two["epsilon"] == two["odometer"]["epsilon"] > own.epsilon
    # Under a budget smaller than the one release's bound, the budget stays the headline.
    tight = PrivacyLedger(1.0, 1e-6, filter="renyi")
    small = release_claims(SamplingPrivacy("1/2"), 2, Fraction(5), 1e-6)
    tight.charge("q0", small, "2025-01-01T00:00:00+00:00")
    own_small = release_headline(as_json(small)).epsilon
    assert own_small is not None
    assert tight.summary()["epsilon"] == min(own_small, 1.0, tight.summary()["odometer"]["epsilon"])
