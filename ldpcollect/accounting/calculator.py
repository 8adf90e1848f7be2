"""The budget calculator: what K queries of one mechanism cost, in both views.

Composition of K queries with the same parameters uses, for the public view, the best of
several valid bounds: the exact K-fold composition of the per-query dominating pair (randomized
response; exact hockey-stick over binomial counts), the exact profile of K releases of discrete
Gaussian noise, and the CKS conversion of the summed Renyi curves (per order the smaller of the
mechanism's own curve and the noise's alpha rho). Basic composition and Bun-Steinke figures
are shown beside them. These compose K queries fixed in advance; `eps_adaptive` is what the
ledger's odometer reads when each query is chosen after seeing earlier results.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from ldpcollect.accounting import odometer
from ldpcollect.accounting.count_level import MAX_PARTICIPANTS
from ldpcollect.accounting.discrete_gaussian import ShiftedGaussianProfile
from ldpcollect.accounting.events import Composition, EpsilonReport, PureDp, RenyiCurve, Zcdp
from ldpcollect.accounting.local_pairs import (
    rr_pairs,
    worst_epsilon,
    worst_pure_epsilon,
    worst_renyi,
    zcdp_rho,
)
from ldpcollect.accounting.release_cost import (
    MAX_TARGETS,
    ORDERS,
    noise_rho,
    release_claims,
    rr_count_level_epsilon,
    sensitivity_squared,
    sp_noised_epsilon,
    sp_round_epsilon,
)
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy
from ldpcollect.privacy_headline import HONEST_PARTICIPANTS, bounded_words

MAX_EXACT_QUERIES = 200  # exact RR composition beyond this falls back to Renyi / pure bounds
MAX_PLD_QUERIES = 1000  # SP's exact pair is composed by PLD up to this many queries
MAX_ADAPTIVE_QUERIES = 200  # the odometer's reading is computed up to this many queries


def _add_count_level(
    result: dict[str, Any],
    mechanism: RandomizedResponse,
    queries: int,
    delta: float,
    n_targets: int,
    participants: int | None,
) -> None:
    """The count-level public figure, composed over the queries by PLD."""
    if participants is None:
        return
    if queries > MAX_PLD_QUERIES:
        result["eps_count_level"] = None
        result["notes"].append(f"count level: not composed beyond {MAX_PLD_QUERIES} queries")
        return
    count = rr_count_level_epsilon(mechanism, n_targets, participants, delta, queries)
    result["eps_count_level"] = count
    if result["eps"] is None or count < result["eps"]:
        result["eps"] = count
    result["notes"].append(
        f"count level: the public sees only counts over at least {participants} participants "
        "(nothing is released below that floor); the aggregator's view stays local"
    )


def _add_adaptive(
    result: dict[str, Any],
    mechanism: Mechanism,
    queries: int,
    delta: float,
    n_targets: int,
    noise_sigma: Fraction | None,
    participants: int | None,
) -> None:
    """What the ledger's odometer would read after these queries if each were chosen after
    seeing the earlier results (`odometer.headline`); `eps` assumes the K queries were fixed
    in advance."""
    if queries > MAX_ADAPTIVE_QUERIES:
        result["eps_adaptive"] = None
        result["notes"].append(f"eps_adaptive: not computed beyond {MAX_ADAPTIVE_QUERIES} queries")
        return
    public = release_claims(mechanism, n_targets, noise_sigma, delta, participants)[0]
    reading = odometer.headline([public] * queries, delta)
    valid = public.guarantee != "none" and reading.adaptive
    result["eps_adaptive"] = _out(reading.epsilon) if valid else None
    result["notes"].append(
        "eps_adaptive: the ledger's odometer after these releases when each is chosen after "
        "seeing earlier results (Renyi tiers or basic composition with scheduled deltas); eps "
        "holds for K queries fixed in advance"
        if valid
        else "eps_adaptive: no adaptive bound (a release whose delta is set by the mechanism)"
    )


def _out(value: float | None) -> float | None:
    """JSON has no infinity: an absent or infinite figure is written as null."""
    return None if value is None or math.isinf(value) else value


def queries_cost(
    mechanism: Mechanism,
    queries: int,
    delta: float,
    n_targets: int = 1,
    noise_sigma: Fraction | None = None,
    participants: int | None = None,
) -> dict[str, Any]:
    """Both views of `queries` queries; `participants` (a release floor) adds the RR count-level
    public view. `eps` is always the tightest valid public figure."""
    if not 1 <= queries <= 1_000_000:
        raise ParameterError("queries", queries, "[1, 1000000]")
    if not 0 < delta < 1:
        raise ParameterError("delta", delta, "(0, 1)")
    if not 1 <= n_targets <= MAX_TARGETS:
        raise ParameterError("targets", n_targets, f"[1, {MAX_TARGETS}]")
    if noise_sigma is not None and not noise_sigma > 0:
        raise ParameterError("noise_sigma", noise_sigma, "(0, inf)")
    noise = _noise_terms(queries, delta, n_targets, noise_sigma)
    if participants is not None and not 1 <= participants <= MAX_PARTICIPANTS:
        raise ParameterError("participants", participants, f"[1, {MAX_PARTICIPANTS}]")
    if isinstance(mechanism, RandomizedResponse):
        result = _rr_cost(mechanism, queries, delta, n_targets, noise)
        _add_count_level(result, mechanism, queries, delta, n_targets, participants)
    elif isinstance(mechanism, SamplingPrivacy):
        if noise is not None and noise_sigma is not None and queries <= MAX_PLD_QUERIES:
            exact = sp_noised_epsilon(
                mechanism.sampling_rate, noise_sigma, n_targets, delta, queries
            )
            noise["eps_sp_exact_pair"] = exact
            noise["eps"] = min(noise["eps"], exact)
        result = _sp_cost(mechanism, queries, delta, n_targets, noise)
        if noise is not None:
            result["eps_sp_exact_pair"] = _out(noise.get("eps_sp_exact_pair"))
    else:
        raise ParameterError("mechanism", mechanism, "rr or sp")
    _add_adaptive(result, mechanism, queries, delta, n_targets, noise_sigma, participants)
    result.update(
        participants=participants,
        mechanism=mechanism.name,
        params=mechanism.params(),
        queries=queries,
        targets=n_targets,
        delta=delta,
        noise_sigma=None if noise_sigma is None else str(noise_sigma),
    )
    if n_targets == 1:
        result["notes"].append(
            "Figures assume one target per query. With two or more targets a device moving "
            "between two targets changes two answers; use --targets 2 (or more) for such queries."
        )
    return presented(result)


# The figures beside the headline, by their old keys: (name under `details`, one sentence).
DETAIL_WORDS = {
    "eps_count_level": (
        "count_level",
        "the public sees only counts over at least --participants devices (exact PLD); "
        + HONEST_PARTICIPANTS,
    ),
    "eps_sp_exact_pair": ("sp_exact_pair", "one device's noisy SP releases composed exactly"),
    "eps_renyi": ("renyi", "the summed Renyi curves converted by CKS"),
    "eps_cks": ("zcdp_cks", "the summed zCDP rho converted by Canonne-Kamath-Steinke"),
    "eps_bun_steinke": ("zcdp_bun_steinke", "the same rho by Bun-Steinke (conservative)"),
    "eps_basic": ("basic", "the per-query pure epsilons added (delta 0)"),
    "eps_adaptive": (
        "adaptive",
        "what the ledger's odometer reads if each query is chosen after seeing earlier results",
    ),
    "pure_epsilon": ("pure_epsilon", "the public's loss with delta 0, when one exists"),
    "per_query_epsilon": ("per_query_epsilon", "one query's pure epsilon (one device's report)"),
    "per_round_epsilon": (
        "per_round_epsilon",
        "one round's answers seen alone (a party that never links a device's two rounds)",
    ),
}
RHO_WORDS = {
    "rho": "total zCDP rho (what the zCDP budget filter charges)",
    "per_query_rho": "one query's zCDP rho from the reports' own Renyi curve",
    "noise_rho_per_query": "one query's zCDP rho from the release noise alone",
}


def presented(result: dict[str, Any]) -> dict[str, Any]:
    """The calculator's figures as every command shows them: `epsilon`, `delta`, `unbounded`
    and words first, every other figure under `details` with one sentence."""
    delta = float(result["delta"])
    out: dict[str, Any] = {}
    reveal = result.get("approx_delta")
    eps = result.get("eps")
    unbounded = eps is None or (reveal is not None and result["guarantee"] == "approximate")
    if unbounded or eps is None:
        why = (
            f"reveals a device's cell exactly with probability {reveal:.6g} over these "
            "queries (no finite epsilon at a smaller delta); add release noise"
            if reveal is not None and result["guarantee"] == "approximate"
            else "can reveal a device's answers with certainty: no guarantee"
        )
        out.update(epsilon=None, delta=delta, unbounded=True, words=why)
    else:
        out.update(
            epsilon=eps,
            delta=delta,
            unbounded=False,
            words=f"the public's tightest epsilon over {result['queries']} queries: "
            + bounded_words(eps, delta),
        )
    for key in ("mechanism", "params", "queries", "targets", "noise_sigma", "participants"):
        out[key] = result[key]
    out["guarantee"] = result["guarantee"]
    details: dict[str, dict[str, Any]] = {}
    for key, (name, sentence) in DETAIL_WORDS.items():
        if result.get(key) is not None:
            at = 0.0 if key in ("eps_basic", "pure_epsilon", "per_query_epsilon") else delta
            details[name] = {"epsilon": result[key], "delta": at, "sentence": sentence}
    for key, sentence in RHO_WORDS.items():
        if result.get(key) is not None:
            details[key] = {"rho": result[key], "sentence": sentence}
    aggregator = dict(result["aggregator"])
    aggregator["epsilon"] = aggregator.pop("eps")
    if "approx_delta" in aggregator:
        aggregator["reveal_probability"] = aggregator.pop("approx_delta")
    aggregator["unbounded"] = aggregator["epsilon"] is None or "reveal_probability" in aggregator
    details["aggregator"] = aggregator
    out["details"] = details
    out["notes"] = result["notes"]
    return out


def _noise_terms(
    queries: int, delta: float, n_targets: int, noise_sigma: Fraction | None
) -> dict[str, float] | None:
    if noise_sigma is None:
        return None
    rho = noise_rho(noise_sigma, n_targets)
    sigma_sq = float(noise_sigma * noise_sigma)
    try:
        exact = ShiftedGaussianProfile(sigma_sq, queries * sensitivity_squared(n_targets)).epsilon(
            delta
        )
    except ParameterError:
        exact = math.inf
    noise_only = Composition().compose(Zcdp(rho), queries)
    return {"rho": rho, "rho_total": queries * rho, "eps": min(exact, noise_only.epsilon(delta))}


def _zcdp_queries(rho: float, queries: int, delta: float) -> EpsilonReport | None:
    """`queries` releases of one rho-zCDP query at delta (None when rho is infinite)."""
    if math.isinf(rho):
        return None
    return Composition().compose(Zcdp(rho), queries).epsilon_report(delta)


def _rr_cost(
    mechanism: RandomizedResponse,
    queries: int,
    delta: float,
    n_targets: int,
    noise: dict[str, float] | None,
) -> dict[str, Any]:
    p, q = float(mechanism.flip1), float(mechanism.flip2)
    one = rr_pairs(p, q, n_targets)
    eps_q = worst_pure_epsilon(one)
    rho_q = zcdp_rho(one)
    notes: list[str] = []
    if queries <= MAX_EXACT_QUERIES or n_targets >= 2:
        local_exact = worst_epsilon(rr_pairs(p, q, n_targets, queries), delta)
    else:
        local_exact = math.inf
        notes.append("exact composition skipped for this many single-target queries")
    rho_n = noise["rho"] if noise else math.inf
    # Per query, the public view is bounded by the reports' own curve and by the noise's.
    per_query_curve = RenyiCurve(ORDERS, tuple(min(worst_renyi(one, a), a * rho_n) for a in ORDERS))
    renyi_eps = (
        math.inf
        if math.isinf(eps_q) and noise is None
        else Composition().compose(per_query_curve, queries).epsilon_report(delta).renyi
    )
    public = _zcdp_queries(min(rho_q, rho_n), queries, delta)
    basic = (
        Composition().compose(PureDp(eps_q), queries).pure_epsilon if eps_q < math.inf else eps_q
    )
    candidates = [local_exact, basic, renyi_eps]
    if noise:
        candidates.append(noise["eps"])
    eps = max(0.0, min(candidates))
    local_total = min(local_exact, basic)
    return {
        "eps": _out(eps),
        "guarantee": "pure" if math.isfinite(eps_q) else ("zcdp" if noise else "none"),
        "eps_cks": _out(public.zcdp_cks if public else None),
        "eps_bun_steinke": _out(public.zcdp_bun_steinke if public else None),
        "eps_renyi": _out(renyi_eps),
        "eps_basic": _out(basic),
        "rho": _out(queries * min(rho_q, rho_n)),
        "pure_epsilon": _out(basic),
        "per_query_epsilon": _out(eps_q),
        "per_query_rho": _out(rho_q),
        "noise_rho_per_query": _out(noise["rho"]) if noise else None,
        "aggregator": {
            "eps": _out(local_total),
            "pure_epsilon": _out(basic),
            "explanation": "the trusted aggregator sees every report: K-fold local loss",
        },
        "notes": notes,
    }


def _sp_cost(
    mechanism: SamplingPrivacy,
    queries: int,
    delta: float,
    n_targets: int,
    noise: dict[str, float] | None,
) -> dict[str, Any]:
    s = float(mechanism.sampling_rate)
    reveal = -math.expm1(queries * math.log1p(-s)) if s < 1 else 1.0  # 1 - (1-s)^K
    round_eps = sp_round_epsilon(mechanism.sampling_rate, n_targets)
    notes = [
        f"Without noise, K releases are (0, {reveal:.6g})-DP: with that probability at least one "
        "selection reveals a device's presence; no finite epsilon at a smaller delta."
    ]
    aggregator = {
        "eps": 0.0 if delta >= reveal else None,
        "approx_delta": reveal,
        "per_round_epsilon": _out(round_eps),
        "explanation": (
            "the trusted aggregator links both rounds of a device: (0, 1-(1-s)^K); a party that "
            "sees only one round of one query learns at most per_round_epsilon"
        ),
    }
    if noise is None:
        eps: float | None = 0.0 if delta >= reveal else None
        return {
            "eps": eps,
            "guarantee": "approximate",
            "approx_delta": reveal,
            "eps_cks": None,
            "eps_bun_steinke": None,
            "rho": None,
            "pure_epsilon": None,
            "per_round_epsilon": _out(round_eps),
            "aggregator": aggregator,
            "notes": notes,
        }
    total = noise["rho_total"]
    value = 0.0 if delta >= reveal else noise["eps"]
    public = _zcdp_queries(noise["rho"], queries, delta)
    return {
        "eps": _out(value),
        "guarantee": "zcdp",
        "approx_delta": reveal,
        "eps_cks": _out(public.zcdp_cks if public else None),
        "eps_bun_steinke": _out(public.zcdp_bun_steinke if public else None),
        "rho": total,
        "pure_epsilon": None,
        "per_round_epsilon": _out(round_eps),
        "noise_rho_per_query": noise["rho"],
        "aggregator": aggregator,
        "notes": notes[1:],
    }
