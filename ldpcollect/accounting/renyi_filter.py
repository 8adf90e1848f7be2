"""A Renyi filter over several orders: a budget (epsilon, delta) that stays valid when each
release is chosen after seeing earlier results.

Feldman and Zrnic (2021): for one order alpha fixed in advance, admitting releases while the
sum of their Renyi divergences D_alpha stays within B keeps the whole run (alpha, B)-RDP, even
when each release's curve is chosen adaptively; CKS turns that into (epsilon, delta_alpha)-DP
when B = epsilon - (ln(1/delta_alpha) + (alpha-1) ln(1-1/alpha) - ln alpha)/(alpha-1).

Several orders: a release is admitted while SOME order stays within its budget. An order that
has left its budget never returns (sums only grow), so the run is, on the event that order
alpha is the first one still within budget at the end (a function of the transcript), exactly
the run of alpha's own filter. Splitting the output space along those events and summing gives
(epsilon, sum of delta_alpha)-DP; each order gets delta / (number of orders).

A release's curve is the smallest of what its public claim states: its own Renyi divergences
(`PrivacyClaim.renyi`, e.g. randomized response at count level), alpha * rho for rho-zCDP,
and the sharp curve of pure epsilon-DP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ldpcollect.accounting.conversions import cks_term
from ldpcollect.accounting.events import PureDp
from ldpcollect.accounting.release_cost import FILTER_ORDERS, PrivacyClaim
from ldpcollect.errors import ParameterError

Curve = npt.NDArray[np.float64]


def claim_curve(claim: PrivacyClaim, orders: Sequence[float] = FILTER_ORDERS) -> Curve:
    """The claim's Renyi curve at `orders` (inf where it states none)."""
    alphas = np.asarray(orders, dtype=np.float64)
    curve = np.full(alphas.size, math.inf)
    if claim.rho is not None and math.isfinite(claim.rho):
        curve = np.minimum(curve, alphas * claim.rho)
    if claim.pure_epsilon is not None and math.isfinite(claim.pure_epsilon):
        curve = np.minimum(curve, PureDp(claim.pure_epsilon).renyi(alphas))
    stated = np.array([claim.renyi.get(_key(a), math.inf) for a in orders], dtype=np.float64)
    result: Curve = np.minimum(curve, stated)
    return result


def _key(alpha: float) -> str:
    return f"{alpha:g}"


def order_budgets(epsilon: float, delta: float, orders: Sequence[float] = FILTER_ORDERS) -> Curve:
    """B_alpha for each order: the Renyi budget whose CKS conversion at delta / |orders| is
    epsilon (negative where an order cannot reach epsilon at all)."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ParameterError("epsilon", epsilon, "(0, inf)")
    if not 0 < delta < 1:
        raise ParameterError("delta", delta, "(0, 1)")
    share = delta / len(orders)
    return np.array([epsilon - cks_term(a, share) for a in orders], dtype=np.float64)


def admits(spent: Curve, request: Curve, budgets: Curve) -> bool:
    """True when some order stays within its budget with the request added."""
    return bool(np.any(spent + request <= budgets))


def used_fraction(spent: Curve, budgets: Curve) -> float:
    """The fraction of the budget used at the best order (1 or more: nothing more fits)."""
    usable = budgets > 0
    if not np.any(usable):
        return math.inf
    return float(np.min(spent[usable] / budgets[usable]))
