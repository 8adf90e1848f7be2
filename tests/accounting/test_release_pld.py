"""The PLD composition of recorded releases (a plan fixed in advance): each release's pair
against its own claim, a mixed plan against exact enumeration of small populations, and a
large mixed plan against dp-accounting's PLD."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as oracle

from ldpcollect.accounting.release_cost import release_claims
from ldpcollect.accounting.release_pld import planned_epsilon, release_pld
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy
from tests.accounting.test_enumeration import TOL, hockey, rr_dists, sp_dists
from tests.accounting.test_sp_pair import oracle_pmfs

RR = RandomizedResponse("0.85", "0.3")
SP = SamplingPrivacy("1/2")


def source(
    mech: Mechanism, targets: int, sigma: int | None, floor: int | None, delta: float = 1e-6
) -> dict[str, str]:
    noise = None if sigma is None else Fraction(sigma)
    return release_claims(mech, targets, noise, delta, participants=floor)[0].source


@pytest.mark.parametrize(
    ("mech", "targets", "sigma", "floor"),
    [
        (RR, 1, None, None),
        (RR, 2, None, None),
        (RR, 2, None, 20_000),
        (RR, 1, None, 2_000),
        (SP, 2, 5, None),
        (SP, 1, 5, None),
        (RandomizedResponse("1/2", "1/2"), 3, 4, None),
    ],
)
def test_one_release_pair_matches_its_claim(
    mech: Mechanism, targets: int, sigma: int | None, floor: int | None
) -> None:
    """One release's envelope pair gives its claim's own figure (never below it by more than
    the discretization; the envelope joining both directions may add a little)."""
    noise = None if sigma is None else Fraction(sigma)
    claim = release_claims(mech, targets, noise, 1e-6, participants=floor)[0]
    ours = planned_epsilon([claim.source], 1e-6)
    assert claim.epsilon - 2e-4 <= ours <= claim.epsilon + 2e-3


def test_sp_without_noise_is_loss_infinite_with_probability_s() -> None:
    pair = release_pld(source(SP, 100, None, None), 1e-6)
    assert pair is not None and pair.forward.infinity_mass == 0.5
    # Two such releases: selection shows in either with probability 1 - (1/2)^2.
    both = pair.compose(pair)
    assert both.forward.infinity_mass == pytest.approx(0.75, abs=1e-12)
    mixed = [source(SP, 100, None, None), source(RR, 100, None, None)]
    assert planned_epsilon(mixed, 0.5 + 1e-6) <= planned_epsilon(mixed[1:], 1e-6) + 1e-9


@pytest.mark.parametrize(("n", "sigma"), [(3, 1), (5, 1)])
def test_mixed_plan_bounds_every_neighbouring_pair(n: int, sigma: int) -> None:
    """A count-level RR release (floor n) and a noisy SP release, one target each, over n
    devices: every combination of arrangements and moves in the two queries, enumerated, has
    its true delta within the plan's figure."""
    delta = 1e-3
    rr, rr_pairs, _ = rr_dists(n, 1, "0.85", "0.3", None)
    sp, sp_pairs, tail = sp_dists(n, 1, 0.5, float(sigma))
    plan = [source(RR, 1, None, n, delta), source(SP, 1, sigma, None, delta)]
    eps = planned_epsilon(plan, delta)
    worst = 0.0
    for a, b in rr_pairs:
        for c, d in sp_pairs:
            for first in ((a, b), (b, a)):
                p = np.multiply.outer(rr[first[0]], sp[c].ravel()).ravel()
                q = np.multiply.outer(rr[first[1]], sp[d].ravel()).ravel()
                worst = max(worst, hockey(p, q, eps), hockey(q, p, eps))
    assert worst + tail <= delta + TOL
    # Not vacuous: the plan is within 10% of the worst pair's true epsilon.
    worst_below = 0.0
    for a, b in rr_pairs:
        for c, d in sp_pairs:
            p = np.multiply.outer(rr[a], sp[c].ravel()).ravel()
            q = np.multiply.outer(rr[b], sp[d].ravel()).ravel()
            worst_below = max(worst_below, hockey(p, q, 0.9 * eps), hockey(q, p, 0.9 * eps))
    assert worst_below > delta


def test_large_mixed_plan_against_dp_accounting() -> None:
    """Two local RR releases (two targets) and one SP release with sigma 2 (two targets),
    composed by dp-accounting from pmfs written out here: ours lies between its optimistic and
    pessimistic estimates (up to our extra +inf mass)."""
    a1, a0 = 0.85 + 0.15 * 0.3, 0.15 * 0.3
    at = {1: math.log(a1), 0: math.log(1 - a1)}  # log pmfs, as oracle_pmfs writes them
    away = {1: math.log(a0), 0: math.log(1 - a0)}
    a, u = oracle_pmfs(0.5, 2)

    def composed(pessimistic: bool) -> float:
        def pld(p: dict[Any, float], q: dict[Any, float]) -> oracle.PrivacyLossDistribution:
            return oracle.from_two_probability_mass_functions(
                p, q, pessimistic_estimate=pessimistic, symmetric=False
            )

        rr = pld(at, away).compose(pld(away, at))
        sp = pld(u, a).compose(pld(a, u))
        return float(rr.compose(rr).compose(sp).get_epsilon_for_delta(1e-6))

    plan = [source(RR, 2, None, None), source(RR, 2, None, None), source(SP, 2, 2, None)]
    ours = planned_epsilon(plan, 1e-6)
    assert composed(False) <= ours <= composed(True) + 1e-3
    basic = sum(release_claims(RR, 2, None, 1e-6)[0].epsilon for _ in range(2))
    assert ours < basic + release_claims(SP, 2, Fraction(2), 1e-6)[0].epsilon
