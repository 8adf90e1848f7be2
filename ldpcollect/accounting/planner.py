"""The inverse questions an operator asks: how much noise, or how many participants, for a
target (epsilon, delta)?

Both searches only accept a candidate whose figure, computed by the same accounting the ledger
uses, is within the target: the answer is safe even where the search itself is approximate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ldpcollect.accounting import odometer
from ldpcollect.accounting.claim import PrivacyClaim
from ldpcollect.accounting.conversions import sigma_for_target
from ldpcollect.accounting.count_level import MAX_PARTICIPANTS, rr_count_pair
from ldpcollect.accounting.discrete_gaussian import ShiftedGaussianProfile
from ldpcollect.accounting.ledger import BudgetExceeded, PrivacyLedger
from ldpcollect.accounting.release_cost import (
    release_claims,
    rr_count_level_epsilon,
    sensitivity_squared,
    sp_noised_epsilon,
)
from ldpcollect.accounting.sp_pair import sp_release_pairs
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

SIGMA_STEP = Fraction(1, 100)  # sigmas are planned in hundredths
MAX_SIGMA = Fraction(100)


def _check_target(epsilon: float, delta: float) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ParameterError("epsilon", epsilon, "(0, inf)")
    if not 0 < delta < 1:
        raise ParameterError("delta", delta, "(0, 1)")


def _smallest_step(ok: Callable[[int], bool], low: int, high: int) -> int | None:
    """Smallest k in [low, high] with ok(k), for ok monotone (False ... True); None if none."""
    if not ok(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if ok(mid):
            high = mid
        else:
            low = mid + 1
    return low


def gaussian_sigma(epsilon: float, delta: float, n_targets: int, queries: int) -> Fraction | None:
    """Smallest sigma (in hundredths) for which the noise alone (exact discrete Gaussian profile
    at the release's sensitivity, K releases) meets the target: the figure before issue 9."""
    _check_target(epsilon, delta)
    shifts = queries * sensitivity_squared(n_targets)

    def ok(k: int) -> bool:
        sigma = k * SIGMA_STEP
        profile = ShiftedGaussianProfile(float(sigma * sigma), shifts)
        return profile.epsilon(delta) <= epsilon

    found = _smallest_step(ok, 1, _cks_steps(epsilon, delta, n_targets, queries))
    return None if found is None else found * SIGMA_STEP


def _cks_steps(epsilon: float, delta: float, n_targets: int, queries: int) -> int:
    """Hundredths of the sigma the zCDP (CKS) conversion needs: an upper bound on the rest."""
    sensitivity = math.sqrt(sensitivity_squared(n_targets))
    sigma = math.sqrt(queries) * sigma_for_target(epsilon, delta, sensitivity)
    return math.ceil(sigma / float(SIGMA_STEP)) + 1


def sp_sigma(
    sampling_rate: Fraction, epsilon: float, delta: float, n_targets: int, queries: int = 1
) -> Fraction | None:
    """Smallest sigma (in hundredths, up to `MAX_SIGMA`) for which `queries` noisy SP releases
    meet (epsilon, delta) by the exact single-device pair; None past `MAX_SIGMA`."""
    _check_target(epsilon, delta)

    def ok(k: int) -> bool:
        sigma = k * SIGMA_STEP
        if sp_release_pairs(sampling_rate, sigma, n_targets, 1) is None:
            return True  # past the exact grid: treated as enough, checked below
        return sp_noised_epsilon(sampling_rate, sigma, n_targets, delta, queries) <= epsilon

    high = min(int(MAX_SIGMA / SIGMA_STEP), _cks_steps(epsilon, delta, n_targets, queries))
    found = _smallest_step(ok, 1, high)
    if found is None:
        return None
    sigma = found * SIGMA_STEP
    if sp_release_pairs(sampling_rate, sigma, n_targets, 1) is None:
        return None
    return sigma


def rr_participants(
    mechanism: RandomizedResponse, epsilon: float, delta: float, n_targets: int, queries: int = 1
) -> int | None:
    """Smallest participants floor for which `queries` RR releases meet (epsilon, delta) for
    the public at count level; None beyond `MAX_PARTICIPANTS`."""
    _check_target(epsilon, delta)

    def ok(n: int) -> bool:
        return rr_count_level_epsilon(mechanism, n_targets, n, delta, queries) <= epsilon

    # No floor below the one at which a single arrangement (all others off the target, a real
    # case) already misses the target can work: find that one with the cheap pair, then
    # gallop up from it (1%, 2%, 4%, ...) and bisect with the full figure.
    a1 = float(mechanism.flip1 + (1 - mechanism.flip1) * mechanism.flip2)
    a0 = float((1 - mechanism.flip1) * mechanism.flip2)

    def off_ok(n: int) -> bool:
        off = rr_count_pair(a1, a0, n - 1, 0)
        one = off if n_targets == 1 else off.compose(off.reverse())
        return (one if queries == 1 else one.self_compose(queries)).epsilon(delta) <= epsilon

    high = 1
    while not off_ok(high):
        if high >= MAX_PARTICIPANTS:
            return None
        high = min(MAX_PARTICIPANTS, high * 2)
    low = _smallest_step(off_ok, max(1, high // 2), high) or high
    step, high = max(1, low // 100), low
    while not ok(high):
        if high >= MAX_PARTICIPANTS:
            return None
        low, high = high + 1, min(MAX_PARTICIPANTS, high + step)
        step *= 2
    return _smallest_step(ok, low, high)


SCOPES = ("release", "campaign")


def _admits(claims: list[PrivacyClaim], releases: int, epsilon: float, delta: float) -> bool:
    """Whether a ledger with budget (epsilon, delta) under the Renyi filter admits `releases`
    releases with these claims (what the operator will see, valid under adaptive choice)."""
    ledger = PrivacyLedger(epsilon, delta, filter="renyi")
    try:
        for i in range(releases):
            ledger.charge(f"q{i}", claims, "2000-01-01T00:00:00+00:00")
    except BudgetExceeded:
        return False
    return True


def _claims(
    mechanism: Mechanism, targets: int, sigma: Fraction | None, floor: int | None, delta: float
) -> list[PrivacyClaim]:
    return release_claims(mechanism, targets, sigma, delta, participants=floor)


def campaign_budget(
    mechanism: Mechanism,
    targets: int,
    sigma: Fraction | None,
    floor: int | None,
    delta: float,
    releases: int,
) -> float:
    """The smallest epsilon (in hundredths, at `delta`) whose Renyi-filter budget admits
    `releases` such releases: what to fix with `serve --budget` for the campaign."""
    claims = _claims(mechanism, targets, sigma, floor, delta)
    public = claims[0]
    if public.unbounded:
        return math.inf
    # Start from the odometer's reading after these releases (the filter usually needs about
    # as much); search every hundredth below it too.
    reading = odometer.headline([public] * releases, delta).epsilon
    low, high = 1, max(1, math.floor(reading * 100))

    def fits(hundredths: int) -> bool:
        return _admits(claims, releases, hundredths / 100, delta)

    for _ in range(400):  # gallop up 2% at a time, then bisect in hundredths
        if fits(high):
            found = _smallest_step(fits, low, high)
            return math.inf if found is None else found / 100
        low, high = high + 1, math.ceil(high * 1.02) + 1
    return math.inf


def plan_settings(
    mechanism: Mechanism,
    epsilon: float,
    delta: float,
    targets: int,
    releases: int,
    scope: str,
    count: int,
) -> dict[str, Any]:
    """The operator's question: for a target epsilon (per release, or for the whole campaign
    of `releases`) at `delta`, the noise or participants floor that meets it, the budget to fix
    before the first release, and the standard error per cell (true count `count`) it buys."""
    _check_target(epsilon, delta)
    if scope not in SCOPES:
        raise ParameterError("scope", scope, "release or campaign")
    sigma: Fraction | None = None
    floor: int | None = None
    if isinstance(mechanism, SamplingPrivacy):
        if scope == "release":
            sigma = sp_sigma(mechanism.sampling_rate, epsilon, delta, targets, 1)
        else:

            def fits(k: int) -> bool:
                claims = _claims(mechanism, targets, k * SIGMA_STEP, None, delta)
                return _admits(claims, releases, epsilon, delta)

            top = int(MAX_SIGMA / SIGMA_STEP)
            found = _smallest_step(fits, 1, top)
            sigma = None if found is None else found * SIGMA_STEP
        if sigma is None:
            raise ParameterError("epsilon", epsilon, "a target some sigma up to 100 meets")
    else:
        assert isinstance(mechanism, RandomizedResponse)
        if scope == "release":
            floor = rr_participants(mechanism, epsilon, delta, targets, 1)
        else:
            single = rr_participants(mechanism, epsilon, delta, targets, releases) or 1

            def fits_floor(n: int) -> bool:
                claims = _claims(mechanism, targets, None, n, delta)
                return _admits(claims, releases, epsilon, delta)

            high = single
            while not fits_floor(high):
                if high >= MAX_PARTICIPANTS:
                    high = 0
                    break
                high = min(MAX_PARTICIPANTS, high * 2)
            floor = _smallest_step(fits_floor, max(1, single), high) if high else None
        if floor is None:
            raise ParameterError("epsilon", epsilon, "a target some participants floor meets")
    budget = (
        epsilon
        if scope == "campaign"
        else campaign_budget(mechanism, targets, sigma, floor, delta, releases)
    )
    per_release = _claims(mechanism, targets, sigma, floor, delta)[0].epsilon
    return {
        "noise_sigma": None if sigma is None else float(sigma),
        "min_reports": floor,
        "per_release_epsilon": per_release,
        "budget": {"epsilon": budget, "delta": delta, "filter": "renyi"},
        "std_error": standard_error(mechanism, count, sigma, floor),
        "count": count,
    }


def standard_error(
    mechanism: Mechanism, count: int, sigma: Fraction | None, participants: int | None
) -> float:
    """A cell's standard error with `count` devices truly there (RR: among `participants`,
    its floor, the fewest it can have; more participants only add error)."""
    noise = 0.0 if sigma is None else float(sigma * sigma)
    if isinstance(mechanism, SamplingPrivacy):
        s = float(mechanism.sampling_rate)
        return math.sqrt(count * (1 - s) / s + 2 * noise / s**2)
    assert isinstance(mechanism, RandomizedResponse)
    p, q = float(mechanism.flip1), float(mechanism.flip2)
    a1, a0 = p + (1 - p) * q, (1 - p) * q
    n = max(participants or count, count)
    return math.sqrt((count * a1 * (1 - a1) + (n - count) * a0 * (1 - a0) + noise) / p**2)
