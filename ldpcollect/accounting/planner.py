"""The inverse questions an operator asks: how much noise, or how many participants, for a
target (epsilon, delta)?

Both searches only accept a candidate whose figure, computed by the same accounting the ledger
uses, is within the target: the answer is safe even where the search itself is approximate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from ldpcollect.accounting.conversions import sigma_for_target
from ldpcollect.accounting.count_level import MAX_PARTICIPANTS, rr_count_pair
from ldpcollect.accounting.discrete_gaussian import ShiftedGaussianProfile
from ldpcollect.accounting.release_cost import (
    rr_count_level_epsilon,
    sensitivity_squared,
    sp_noised_epsilon,
)
from ldpcollect.accounting.sp_pair import sp_release_pairs
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import RandomizedResponse

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
