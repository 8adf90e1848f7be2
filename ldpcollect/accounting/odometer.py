"""The ledger's odometer: the public's realized loss so far, valid at any moment.

A reading (epsilon(T), delta) is valid when, for every event E of the whole transcript T,
P(T in E) <= E_Q[e^epsilon(T) 1_E] + delta, even though which releases are made (mechanism,
targets, noise, floor) is decided after seeing earlier results. The headline is the smaller of
two such odometers, A and B, each given half of delta_o; both halves are fixed before the first
release, so taking the smaller (a function of T) is covered by a union bound: delta_o in all.

**A: Renyi tiers.** Fixed in advance: the orders alpha of `FILTER_ORDERS` (A of them) and, at
every order, budgets b_k = B0 g^k (k = 0, 1, ...; g = 1.05, so rounding the spent divergence up
to its tier costs at most 5%) with delta_(alpha,k) = delta_A 6 / (A pi^2 (k+1)^2), which sum to
delta_A. Each (alpha, k) is a Feldman-Zrnic Renyi filter (admit while the summed divergences at
alpha stay within b_k), valid under adaptive choice and, by the CKS conversion,
(b_k + cks_term(alpha, delta_(alpha,k)), delta_(alpha,k))-DP. The reading is the smallest of
those epsilons over the filters that admitted every release so far; splitting the transcripts
by which filter gives it and summing over filters gives delta_A (the filter-to-odometer
construction of Whitehouse, Ramdas, Rogers & Wu 2023, over several orders). A release's
divergences are those its public claim states (`renyi_filter.claim_curve`: exact count-level
divergences for randomized response, the exact single-device pair's for noisy Sampling Privacy,
alpha rho for rho-zCDP, the sharp curve of pure DP).

**B: basic composition with a delta schedule.** The i-th release counts as its pure epsilon
(delta 0) or its claim restated at delta_B 6 / (pi^2 i^2) (`scheduled_basic`). The deltas sum
to delta_B whatever happens, which is the condition under which Rogers, Roth, Ullman & Vadhan's
(2016) basic-composition odometer is valid for adaptively chosen epsilons. (Adding the deltas
as realized, which an earlier version did, is valid only against a total fixed in advance.)

**Releases without a Renyi curve** (Sampling Privacy without noise: (0, s) only; s is fixed by
the mechanism and cannot be scheduled) are added with their own delta as realized; the reading
then says `adaptive: false`.

**For a plan fixed in advance** (shown beside, never the headline): the releases' exact
privacy-loss distributions composed (`release_pld`). That is valid when which releases would
be made was fixed before the first one; whether composing exact privacy-loss distributions
stays valid when the releases themselves are chosen adaptively is not known (the known fully
adaptive results cover Renyi/zCDP filters, Gaussian DP and approximate DP), so the ledger does
not rely on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ldpcollect.accounting.conversions import cks_epsilon, cks_term, round_up
from ldpcollect.accounting.release_cost import FILTER_ORDERS, PrivacyClaim
from ldpcollect.accounting.release_pld import planned_epsilon, restated_epsilon
from ldpcollect.accounting.renyi_filter import claim_curve

RHO_0 = 1e-4  # the first tier: of zCDP rho, and of the Renyi divergence at every order
RENYI_GROWTH = 1.05  # the Renyi tiers' ratio
PLD_NAME = "PLD if fixed in advance"


@dataclass(frozen=True)
class Reading:
    """One odometer's reading: (epsilon, delta) and how it was obtained."""

    epsilon: float
    delta: float
    name: str  # short, for the ledger's one-line method
    words: str  # the details
    adaptive: bool = True  # valid when releases are chosen after seeing earlier results


def rounded_up(value: float, digits: int = 4) -> str:
    """A bound in words: rounded up, never printed below the true figure."""
    return f"{round_up(value, digits):.{digits}g}"


def has_curve(claim: PrivacyClaim) -> bool:
    return bool(np.any(np.isfinite(claim_curve(claim))))


def _approximate(claims: Sequence[PrivacyClaim]) -> tuple[float, float, int]:
    """Basic composition of the releases without a Renyi curve: (epsilon, delta, count)."""
    rest = [c for c in claims if not has_curve(c)]
    pairs = [c.composable() for c in rest]
    return math.fsum(e for e, _ in pairs), math.fsum(d for _, d in pairs), len(rest)


def _tier(spent: float, growth: float = 2.0) -> int:
    """The smallest k with RHO_0 growth^k >= spent."""
    tier = 0
    while RHO_0 * growth**tier < spent:
        tier += 1
    return tier


def renyi_tier_delta(tier: int, odometer_delta: float) -> float:
    """delta_(alpha,k): the shares sum to odometer_delta over every order and tier."""
    return odometer_delta * 6.0 / (len(FILTER_ORDERS) * math.pi**2 * (tier + 1) ** 2)


def _tier_epsilon(curves: Sequence[np.ndarray], delta: float) -> tuple[float, str]:
    """The smallest CKS epsilon over the (order, tier) filters still admitting the summed
    curve, and which filter gives it."""
    if not curves:
        return 0.0, "nothing with a Renyi curve"
    spent = np.sum(curves, axis=0)
    best, words = math.inf, "no finite Renyi divergence"
    for alpha, total in zip(FILTER_ORDERS, spent.tolist(), strict=True):
        if not math.isfinite(total):
            continue
        tier = _tier(total, RENYI_GROWTH)
        budget = RHO_0 * RENYI_GROWTH**tier
        share = renyi_tier_delta(tier, delta)
        eps = max(0.0, budget + cks_term(alpha, share))
        if eps < best:
            best = eps
            words = f"order {alpha:g}, tier {tier} (divergence <= {budget:.4g}, delta {share:.3g})"
    return best, words


def _with_approximate(
    eps: float, delta: float, name: str, words: str, claims: Sequence[PrivacyClaim]
) -> Reading:
    approx_eps, approx_delta, approx = _approximate(claims)
    if approx:
        words += f", plus basic composition of {approx} release(s) without a Renyi curve"
    return Reading(
        eps + approx_eps, min(1.0, delta + approx_delta), name, words, adaptive=approx == 0
    )


def renyi_tiers(claims: Sequence[PrivacyClaim], delta: float) -> Reading:
    """Odometer A: every release's Renyi curve, the (order, tier) filters converted by CKS."""
    eps, words = _tier_epsilon([claim_curve(c) for c in claims if has_curve(c)], delta)
    return _with_approximate(eps, delta, "Renyi tiers", f"Renyi odometer at {words}", claims)


def zcdp_tiers(claims: Sequence[PrivacyClaim], odometer_delta: float) -> Reading:
    """The zCDP doubling tiers over releases with a rho (each tier a Feldman-Zrnic zCDP filter
    with delta_o / 2^(k+1)), plus basic composition of those without."""
    total = math.fsum(c.rho for c in claims if c.rho is not None)
    rest = [c for c in claims if c.rho is None]
    tier = _tier(total)
    eps = cks_epsilon(RHO_0 * 2.0**tier, odometer_delta / 2.0 ** (tier + 1)) if total > 0 else 0.0
    pairs = [c.composable() for c in rest]
    eps += math.fsum(e for e, _ in pairs)
    delta = min(1.0, odometer_delta + math.fsum(d for _, d in pairs))
    return Reading(eps, delta, "zCDP tiers", f"zCDP odometer tier {tier}", adaptive=not rest)


def scheduled_delta(index: int, delta: float) -> float:
    """The delta at which the index-th release (from 1) is stated by odometer B; the shares
    sum to `delta` (the sum of 1/i^2 is pi^2/6)."""
    return delta * 6.0 / (math.pi**2 * index**2)


def scheduled_basic(claims: Sequence[PrivacyClaim], delta: float) -> Reading:
    """Odometer B: basic composition with deltas fixed in advance.

    The i-th release counts as its pure epsilon (delta 0) or its claim restated at
    `scheduled_delta(i, delta)`, whichever epsilon is smaller. The epsilons may be chosen
    adaptively; the deltas are a schedule fixed before the first release whose sum is `delta`,
    which is the condition of Rogers, Roth, Ullman & Vadhan's basic-composition odometer.
    A claim is restated from its `source`, or from its rho (CKS) when it has no source; one that
    cannot be restated (Sampling Privacy without noise: no finite epsilon below its own delta s)
    adds its own delta as realized (`adaptive: false`).
    """
    total_eps: list[float] = []
    realized: list[float] = []
    pure_only = True
    for index, claim in enumerate(claims, start=1):
        share = scheduled_delta(index, delta)
        restated = restated_epsilon(claim.source, share, claim.delta) if claim.source else math.inf
        if claim.rho is not None and math.isfinite(claim.rho):  # zCDP restates at any delta
            restated = min(restated, cks_epsilon(claim.rho, share))
        pure = math.inf if claim.pure_epsilon is None else claim.pure_epsilon
        if min(pure, restated) < math.inf:
            # The pure figure (delta 0) unless restating saves more than a millionth.
            use_pure = pure <= restated * (1 + 1e-6)
            total_eps.append(pure if use_pure else restated)
            pure_only = pure_only and use_pure
        else:
            eps_i, delta_i = claim.composable()
            total_eps.append(eps_i)
            realized.append(delta_i)
            pure_only = pure_only and delta_i == 0
    eps = math.fsum(total_eps)
    if pure_only:
        return Reading(eps, 0.0, "sum of pure epsilons", "sum of pure epsilons")
    words = "basic composition, the i-th release stated at delta 6 delta_B / (pi^2 i^2)"
    if realized:
        words += f", {len(realized)} release(s) at their own delta as realized"
    return Reading(
        eps,
        min(1.0, delta + math.fsum(realized)),
        "basic composition with scheduled deltas",
        words,
        adaptive=not realized,
    )


def planned_pld(claims: Sequence[PrivacyClaim], odometer_delta: float) -> Reading:
    """PLD composition of the releases' exact pairs, for a plan fixed in advance (inf when a
    release has no `source`, e.g. recorded before sources were kept)."""
    if any(not c.source for c in claims):
        return Reading(
            math.inf, odometer_delta, PLD_NAME, "a release has no source", adaptive=False
        )
    # Releases without a curve (selection revealed with probability s): together at most
    # 1 - prod(1 - s) of loss +inf, on top of the rest's delta.
    kept = math.prod(1.0 - c.composable()[1] for c in claims if not has_curve(c))
    delta = min(1.0, odometer_delta + (1.0 - kept))
    sources = [c.source for c in claims]
    eps = planned_epsilon(sources, delta, odometer_delta) if delta < 1 else math.inf
    words = "PLD composition of the releases' exact pairs"
    return Reading(eps, delta, PLD_NAME, words, adaptive=False)


def headline(claims: Sequence[PrivacyClaim], odometer_delta: float) -> Reading:
    """The reported reading: the smaller of odometers A and B, each given half of delta_o
    (fixed in advance), so choosing costs nothing beyond delta_o. When B counts every release
    by its pure epsilon it holds with certainty and its delta is 0."""
    half = odometer_delta / 2.0
    a, b = renyi_tiers(claims, half), scheduled_basic(claims, half)
    best = b if b.epsilon <= a.epsilon else a
    if best.delta == 0.0:
        return best
    extra = best.delta - half  # the realized deltas of releases without a curve
    return replace(best, delta=min(1.0, odometer_delta + extra))
