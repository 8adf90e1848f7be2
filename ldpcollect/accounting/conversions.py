"""Conversions between zCDP / Renyi DP and (epsilon, delta)-DP, and their inverses.

Every function here returns an upper bound on privacy loss (or a lower bound on the noise or
budget it inverts to): where a numerical search is involved, the search only ever evaluates
valid bounds, and inverses are rounded towards the safe side.

- Bun-Steinke (seed 000): eps = rho + 2 sqrt(rho ln(1/delta)). Conservative.
- Canonne-Kamath-Steinke (CKS 2020, Prop. 12 / Cor. 13): for an RDP curve D(alpha),
  eps = inf_{alpha > 1} D(alpha) + (ln(1/delta) + (alpha-1) ln(1-1/alpha) - ln alpha)/(alpha-1).
  For rho-zCDP (D(alpha) = alpha rho) the optimal alpha solves rho (alpha-1)^2 = ln(1/delta) -
  ln(alpha), which we find by root finding (the left side minus the right is increasing).
- A zero-epsilon shortcut (also in dp-accounting): delta(0) is the total variation distance,
  at most sqrt(1 - exp(-KL)) (Bretagnolle-Huber) and KL <= rho.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scipy.optimize import brentq

from ldpcollect.errors import ParameterError

# Relative slack used when an inverse must land on the safe side of a floating-point root.
SAFETY = 1e-12


def _check_rho(rho: float) -> None:
    if not (rho >= 0 and math.isfinite(rho)):
        raise ParameterError("rho", rho, "[0, inf)")


def _check_delta(delta: float) -> None:
    if not (0 < delta < 1):
        raise ParameterError("delta", delta, "(0, 1)")


def _check_epsilon(epsilon: float) -> None:
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise ParameterError("epsilon", epsilon, "[0, inf)")


def bun_steinke_epsilon(rho: float, delta: float) -> float:
    """Seed 000's conversion: rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP."""
    _check_rho(rho)
    _check_delta(delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def cks_term(alpha: float, delta: float) -> float:
    """(ln(1/delta) + (alpha-1) ln(1-1/alpha) - ln alpha) / (alpha-1): the conversion's cost."""
    return (math.log(1.0 / delta) + (alpha - 1.0) * math.log1p(-1.0 / alpha) - math.log(alpha)) / (
        alpha - 1.0
    )


def _kl_zero_epsilon(kl: float, delta: float) -> bool:
    """True when total variation <= sqrt(1 - exp(-KL)) <= delta, so (0, delta)-DP holds."""
    return delta * delta + math.expm1(-kl) > 0


def cks_optimal_order(rho: float, delta: float) -> float:
    """The order alpha > 1 minimizing the CKS conversion of rho-zCDP at delta."""
    _check_rho(rho)
    _check_delta(delta)
    if rho == 0:
        return math.inf
    log_inv_delta = math.log(1.0 / delta)

    def slope(alpha: float) -> float:  # derivative of the objective times (alpha-1)^2
        return rho * (alpha - 1.0) ** 2 + math.log(alpha) - log_inv_delta

    low = 1.0 + 1e-15
    if slope(low) > 0:
        # The objective already rises at its lowest order: the infimum is its alpha -> 1 limit,
        # delta = 1 (no root to bracket; rho far above epsilon).
        return 1.0
    high = 2.0
    while slope(high) <= 0:
        high *= 2.0
    return float(brentq(slope, 1.0, high, xtol=1e-15, rtol=1e-15, maxiter=500))


def cks_epsilon(rho: float, delta: float) -> float:
    """Tight (CKS) epsilon at delta for rho-zCDP."""
    _check_rho(rho)
    _check_delta(delta)
    if rho == 0 or _kl_zero_epsilon(rho, delta):
        return 0.0
    alpha = cks_optimal_order(rho, delta)
    return max(0.0, alpha * rho + cks_term(alpha, delta))


def cks_delta(rho: float, epsilon: float) -> float:
    """Smallest delta CKS Cor. 13 gives for rho-zCDP at epsilon:
    inf_alpha exp((alpha-1)(alpha rho - eps)) / alpha * (1 - 1/alpha)^(alpha-1), capped at 1."""
    _check_rho(rho)
    _check_epsilon(epsilon)
    if rho == 0:
        return 0.0

    def slope(alpha: float) -> float:  # derivative of the log objective
        return (2.0 * alpha - 1.0) * rho - epsilon + math.log1p(-1.0 / alpha)

    low = 1.0 + 1e-15
    if slope(low) > 0:
        # The objective already rises at its lowest order: the infimum is its alpha -> 1 limit,
        # delta = 1 (no root to bracket; rho far above epsilon).
        return 1.0
    high = 2.0
    while slope(high) <= 0:
        high *= 2.0
    alpha = float(brentq(slope, low, high, xtol=1e-15, rtol=1e-15, maxiter=500))
    log_delta = (
        (alpha - 1.0) * (alpha * rho - epsilon)
        + (alpha - 1.0) * math.log1p(-1.0 / alpha)
        - math.log(alpha)
    )
    return min(1.0, math.exp(log_delta))


def rho_for_target(epsilon: float, delta: float) -> float:
    """Largest rho (up to a 1e-12 relative safety margin) whose CKS epsilon at delta is <= epsilon.

    This is the inverse the ledger uses to turn an operator's (eps, delta) budget into a zCDP
    budget; rounding is downward so the budget is never overstated.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)
    if epsilon == 0:
        # Only rho with (0, delta)-DP via the KL shortcut: KL <= -ln(1 - delta^2).
        return -math.log1p(-delta * delta) * (1 - SAFETY)
    high = max(epsilon, 1.0)
    while cks_epsilon(high, delta) <= epsilon:
        high *= 2.0
    root = float(
        brentq(lambda r: cks_epsilon(r, delta) - epsilon, 0.0, high, xtol=1e-300, rtol=1e-15)
    )
    rho = root * (1 - SAFETY)
    while cks_epsilon(rho, delta) > epsilon:
        rho *= 1 - SAFETY
    return rho


def sigma_for_target(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest discrete Gaussian sigma (rounded up) meeting (epsilon, delta) via zCDP and CKS,
    for an L2 sensitivity `sensitivity`: rho = sensitivity^2 / (2 sigma^2)."""
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ParameterError("sensitivity", sensitivity, "(0, inf)")
    rho = rho_for_target(epsilon, delta)
    return sensitivity / math.sqrt(2.0 * rho) * (1 + SAFETY)


def pure_to_rho(epsilon: float) -> float:
    """Sharp zCDP bound of an eps-DP mechanism: rho = eps tanh(eps/2).

    Every eps-DP pair of distributions is a post-processing of binary randomized response with
    ratio e^eps, whose sup_alpha D_alpha/alpha is its KL divergence eps tanh(eps/2) (reached as
    alpha -> 1); this is below eps^2/2 (Bun-Steinke Prop. 3.3).
    """
    _check_epsilon(epsilon)
    return epsilon * math.tanh(epsilon / 2.0)


def rdp_curve_epsilon(
    curve: Callable[[float], float], delta: float, orders: Sequence[float]
) -> tuple[float, float]:
    """CKS conversion of an RDP curve known at `orders` (each > 1): min over the orders.

    Returns (epsilon, order). Any order gives a valid bound, so a coarse grid only loosens.
    """
    _check_delta(delta)
    best, best_order = math.inf, math.nan
    for alpha in orders:
        if not alpha > 1:
            raise ParameterError("orders", alpha, "(1, inf)")
        value = curve(alpha)
        if math.isinf(value):
            continue
        eps = value + cks_term(alpha, delta)
        if eps < best:
            best, best_order = eps, alpha
    return max(0.0, best), best_order


def round_up(value: float, digits: int = 6) -> float:
    """Round a guarantee for printing: `digits` significant digits, never below `value`."""
    if value == 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(abs(value))) - digits + 1
    scale = 10.0**exponent
    rounded = math.ceil(value / scale) * scale
    if rounded < value:  # floating error in the division
        rounded += scale
    return float(f"{rounded:.{digits}g}") if float(f"{rounded:.{digits}g}") >= value else rounded
