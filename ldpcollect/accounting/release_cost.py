"""What one release costs in privacy, for the public and for the aggregator.

Model (docs/design.md, "Trust models and views" and "The ledger"): bounded neighbours, one
device changes its location; the number of devices is public. A query has `n_targets`
targets; a device answers one bit per target.

Sensitivity of the released counts. Fix every device's coins (RR: its two coins per target;
SP: its selection coin and its uniform bit per target). A device that moves from target t1 to
target t2 then changes at most one released count of t1 and one of t2 by 1 each: for RR the bits
of t1 and t2; for SP, for each of t1 and t2, exactly one of the two rounds (the selected
pattern 0-then-1 against a repeated bit b differs in round 2 if b = 0, in round 1 if b = 1).
So the vector of released counts (T counts for RR, 2T for SP) has L2 sensitivity sqrt(2) given
the coins (1 with a single target), and because Renyi and hockey-stick divergences are jointly
convex, the mixture over coins is no worse: discrete Gaussian noise of variance sigma^2 on every
count gives rho = 2 / (2 sigma^2) = 1 / sigma^2 (1 / (2 sigma^2) with one target).

Every claim below is an upper bound; where several valid bounds exist the tightest is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache

# Re-exported: callers import the claim and the orders from here.
from ldpcollect.accounting.claim import FILTER_ORDERS as FILTER_ORDERS
from ldpcollect.accounting.claim import MAX_TARGETS as MAX_TARGETS
from ldpcollect.accounting.claim import ORDERS as ORDERS
from ldpcollect.accounting.claim import PrivacyClaim as PrivacyClaim
from ldpcollect.accounting.conversions import (
    bun_steinke_epsilon,
    cks_epsilon,
    cks_term,
)
from ldpcollect.accounting.count_level import RELEASE_FLOOR_CAP, rr_count_pairs, rr_count_renyi
from ldpcollect.accounting.discrete_gaussian import ShiftedGaussianProfile
from ldpcollect.accounting.local_pairs import (
    Pair,
    rr_pairs,
    sp_round_pairs,
    worst_epsilon,
    worst_pure_epsilon,
    worst_renyi,
    zcdp_rho,
)
from ldpcollect.accounting.pld import epsilon_with_precision
from ldpcollect.accounting.sp_pair import sp_release_pairs, sp_release_renyi
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy


def sensitivity_squared(n_targets: int) -> int:
    """Squared L2 sensitivity of a release's count vector given the coins (see module doc)."""
    return 2 if n_targets >= 2 else 1


def noise_rho(noise_sigma: Fraction, n_targets: int) -> float:
    """zCDP of discrete Gaussian release noise: rho = sensitivity^2 / (2 sigma^2)."""
    return sensitivity_squared(n_targets) / (2.0 * float(noise_sigma * noise_sigma))


def _validate(n_targets: int, noise_sigma: Fraction | None, delta: float) -> None:
    if not 1 <= n_targets <= MAX_TARGETS:
        raise ParameterError("n_targets", n_targets, f"[1, {MAX_TARGETS}]")
    if noise_sigma is not None and not noise_sigma > 0:
        raise ParameterError("noise_sigma", noise_sigma, "(0, inf) or none")
    if not 0 < delta < 1:
        raise ParameterError("delta", delta, "(0, 1)")


def _moves(n_targets: int) -> str:
    if n_targets >= 2:
        return (
            "a device moving between two of the query's targets changes two of its answers "
            "(the old target's and the new one's)"
        )
    return "with a single target, a device moving on or off it changes its one answer"


def release_claims(
    mechanism: Mechanism,
    n_targets: int,
    noise_sigma: Fraction | None,
    delta: float,
    participants: int | None = None,
) -> list[PrivacyClaim]:
    """The public's and the aggregator's claims for one release of `mechanism`, at `delta`.

    `participants`: the floor below which nothing is released (the query's min_reports); with
    it, randomized response's public view is also bounded at the count level (`count_level`).
    Floors above `RELEASE_FLOOR_CAP` are accounted as that cap (still a valid floor).
    """
    _validate(n_targets, noise_sigma, delta)
    if participants is not None:
        if isinstance(participants, bool) or participants < 1:
            raise ParameterError("participants", participants, "[1, inf)")
        participants = min(participants, RELEASE_FLOOR_CAP)
    if isinstance(mechanism, RandomizedResponse):
        claims = _rr_claims(mechanism, n_targets, noise_sigma, delta, participants)
    elif isinstance(mechanism, SamplingPrivacy):
        claims = _sp_claims(mechanism, n_targets, noise_sigma, delta)
    else:
        raise ParameterError("mechanism", mechanism, "RandomizedResponse or SamplingPrivacy")
    source = release_source(mechanism, n_targets, noise_sigma, participants)
    return [replace(claim, source=source) for claim in claims]


def release_source(
    mechanism: Mechanism, n_targets: int, noise_sigma: Fraction | None, participants: int | None
) -> dict[str, str]:
    """A claim's `source`: enough to rebuild the release's pair (`release_pld`)."""
    source = {"mechanism": mechanism.name, **mechanism.params(), "targets": str(n_targets)}
    if noise_sigma is not None:
        source["noise_sigma"] = str(noise_sigma)
    if participants is not None:
        source["participants"] = str(participants)
    return source


# -- randomized response ------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalRR:
    pairs: list[Pair]
    pure: float
    rho: float
    eps_at_delta: float


def _local_rr(mechanism: RandomizedResponse, n_targets: int, delta: float) -> LocalRR:
    pairs = rr_pairs(float(mechanism.flip1), float(mechanism.flip2), n_targets)
    pure = worst_pure_epsilon(pairs)
    rho = zcdp_rho(pairs)
    return LocalRR(pairs, pure, rho, worst_epsilon(pairs, delta))


def _local_rr_claim(view: str, local: LocalRR, delta: float, explanation: str) -> PrivacyClaim:
    """A view bounded by each device's own report: pure, exact epsilon at delta, its Renyi rho."""
    return PrivacyClaim(
        view=view,
        guarantee="pure",
        epsilon=local.eps_at_delta,
        delta=delta,
        epsilon_bun_steinke=bun_steinke_epsilon(local.rho, delta),
        rho=local.rho,
        pure_epsilon=local.pure,
        explanation=explanation,
        figures={"local_exact": local.eps_at_delta},
    )


def _rr_claims(
    mechanism: RandomizedResponse,
    n_targets: int,
    noise_sigma: Fraction | None,
    delta: float,
    participants: int | None,
) -> list[PrivacyClaim]:
    local = _local_rr(mechanism, n_targets, delta)
    p, q = mechanism.params()["flip1"], mechanism.params()["flip2"]
    local_words = (
        f"Randomized response (flip1 {p}, flip2 {q}): {_moves(n_targets)}, so one device's "
        f"report for this query is {local.pure:.6g}-DP (pure)"
    )
    if math.isinf(local.pure):
        aggregator = _none_claim(
            "aggregator",
            delta,
            f"Randomized response (flip1 {p}, flip2 {q}) can report a device's true answer with "
            "certainty: the aggregator, which sees every report, gets no privacy guarantee.",
        )
    else:
        aggregator = _local_rr_claim(
            "aggregator",
            local,
            delta,
            f"{local_words}. The aggregator (trusted model) sees every individual report, so "
            f"each device's loss to it is that: exactly epsilon {local.eps_at_delta:.6g} at "
            f"delta {delta:g}, zCDP rho {local.rho:.6g} (the report's own Renyi curve).",
        )
    if noise_sigma is None:
        if math.isinf(local.pure):
            public = _none_claim(
                "public",
                delta,
                f"Randomized response (flip1 {p}, flip2 {q}) without release noise: a released "
                "count can reveal answers with certainty; no guarantee.",
            )
        else:
            public = _local_rr_claim(
                "public",
                local,
                delta,
                f"{local_words}. The released counts are computed from those reports alone, "
                "so the public's loss is at most each device's local loss (the true figure "
                "for large populations is usually far smaller; this is the bound we can "
                f"prove for every population). Epsilon {local.eps_at_delta:.6g} at delta "
                f"{delta:g} is exact for one report.",
            )
        return [_with_count_level(public, mechanism, n_targets, participants), aggregator]
    public = _rr_public_with_noise(local, local_words, n_targets, noise_sigma, delta)
    return [_with_count_level(public, mechanism, n_targets, participants), aggregator]


@lru_cache(maxsize=256)
def rr_count_level_epsilon(
    mechanism: RandomizedResponse,
    n_targets: int,
    participants: int,
    delta: float,
    queries: int = 1,
) -> float:
    """Epsilon at delta of `queries` releases as counts over at least `participants` devices."""
    return epsilon_with_precision(
        lambda: rr_count_pairs(
            float(mechanism.flip1), float(mechanism.flip2), n_targets, participants, delta, queries
        ),
        delta,
    )


def _with_count_level(
    public: PrivacyClaim, mechanism: RandomizedResponse, n_targets: int, participants: int | None
) -> PrivacyClaim:
    """The public claim, tightened by the count-level bound when a participants floor is set
    (a floor of 1 leaves the device alone: the local figure, already exact, stands)."""
    if participants is None or participants < 2:
        return public
    count_eps = rr_count_level_epsilon(mechanism, n_targets, participants, public.delta)
    figures = {**public.figures, "count_level": count_eps}
    divergences = rr_count_renyi(
        float(mechanism.flip1),
        float(mechanism.flip2),
        n_targets,
        participants,
        public.delta,
        FILTER_ORDERS,
    )
    renyi = {f"{a:g}": d for a, d in zip(FILTER_ORDERS, divergences, strict=True)}
    words = (
        f" Count level: the public sees only counts over at least {participants} participants "
        "(nothing is released below that floor, min_reports), and the other participants' "
        "random answers hide each device's: exact privacy-loss distributions of the count, "
        "bounding every arrangement of the others, give epsilon "
        f"{count_eps:.6g} at delta {public.delta:g}."
    )
    if not count_eps < public.epsilon:
        return replace(public, figures=figures, renyi=renyi, explanation=public.explanation + words)
    return replace(
        public,
        renyi=renyi,
        epsilon=count_eps,
        headline="count_level",
        figures=figures,
        explanation=public.explanation + words + " That is the headline figure.",
    )


def _rr_public_with_noise(
    local: LocalRR, local_words: str, n_targets: int, noise_sigma: Fraction, delta: float
) -> PrivacyClaim:
    sens_sq = sensitivity_squared(n_targets)
    rho_n = noise_rho(noise_sigma, n_targets)
    sigma_sq = float(noise_sigma * noise_sigma)
    noise_eps = _noise_epsilon(sigma_sq, sens_sq, rho_n, delta)

    def curve(alpha: float) -> float:
        return min(worst_renyi(local.pairs, alpha), alpha * rho_n)

    curve_eps = max(0.0, min(curve(a) + cks_term(a, delta) for a in ORDERS))
    figures = {"local_exact": local.eps_at_delta, "noise_exact": noise_eps, "renyi_cks": curve_eps}
    headline = min(figures, key=lambda k: figures[k])
    epsilon = max(0.0, figures[headline])
    rho = min(local.rho, rho_n)
    pure = None if math.isinf(local.pure) else local.pure
    return PrivacyClaim(
        view="public",
        guarantee="pure" if pure is not None else "zcdp",
        epsilon=epsilon,
        delta=delta,
        epsilon_bun_steinke=bun_steinke_epsilon(rho, delta),
        rho=rho,
        pure_epsilon=pure,
        explanation=(
            f"{local_words}. Each released count also carries discrete Gaussian noise of sigma "
            f"{_frac(noise_sigma)}; {_sensitivity_words(n_targets)}, so the noise alone gives "
            f"zCDP rho {rho_n:.6g}. Both bounds hold; the public's loss is the better of them "
            f"(and of their combined Renyi curve): epsilon {epsilon:.6g} at delta {delta:g}, "
            f"rho {rho:.6g}."
        ),
        headline=headline,
        figures=figures,
    )


def _noise_epsilon(sigma_sq: float, sens_sq: int, rho_n: float, delta: float) -> float:
    """Epsilon at delta of the noise alone: the exact discrete Gaussian profile, or CKS."""
    try:
        exact = ShiftedGaussianProfile(sigma_sq, sens_sq).epsilon(delta)
    except ParameterError:  # support too large for exact summation
        exact = math.inf
    return min(exact, cks_epsilon(rho_n, delta))


def _sensitivity_words(n_targets: int) -> str:
    if n_targets >= 2:
        return (
            "a device moving between two targets changes at most two released counts by 1 each "
            "(L2 sensitivity sqrt(2))"
        )
    return "a device changes the one released count by at most 1 (L2 sensitivity 1)"


def _frac(value: Fraction) -> str:
    return str(value) if value.denominator == 1 else f"{value} (= {float(value):.6g})"


def _none_claim(view: str, delta: float, explanation: str) -> PrivacyClaim:
    return PrivacyClaim(
        view=view,
        guarantee="none",
        epsilon=math.inf,
        delta=delta,
        epsilon_bun_steinke=math.inf,
        rho=None,
        pure_epsilon=None,
        explanation=explanation,
        headline="none",
    )


# -- Sampling Privacy ---------------------------------------------------------------------------


def sp_round_epsilon(sampling_rate: Fraction, n_targets: int) -> float:
    """Pure epsilon of ONE round's answers seen alone: -ln(1-s) with a single target,
    ln((1+s)/(1-s)) with two or more (two answers change)."""
    return worst_pure_epsilon(sp_round_pairs(float(sampling_rate), n_targets))


def _sp_claims(
    mechanism: SamplingPrivacy, n_targets: int, noise_sigma: Fraction | None, delta: float
) -> list[PrivacyClaim]:
    s = mechanism.sampling_rate
    s_float = float(s)
    round_eps = sp_round_epsilon(s, n_targets)
    linked = (
        f"Sampling Privacy (s = {s}): a device at a target is selected with probability {s} and "
        "then answers No in round 1 and Yes in round 2 for it; every other answer is a coin flip "
        "repeated in both rounds. Whoever links a device's two rounds sees the selection "
        f"exactly: with probability {s} the device's location is revealed, otherwise nothing "
        f"is. That is (0, {s})-DP and no better: at any delta below {s} no finite epsilon holds."
    )
    aggregator = PrivacyClaim(
        view="aggregator",
        guarantee="approximate" if s < 1 else "none",
        epsilon=math.inf,
        delta=delta,
        epsilon_bun_steinke=math.inf,
        rho=None,
        pure_epsilon=None,
        reveal_probability=s_float if s < 1 else None,
        explanation=(
            f"{linked} In the trusted model the aggregator receives both rounds of each device "
            "under one pseudonym, so this is its view. A party that sees only one round of a "
            f"device's answers learns at most epsilon {round_eps:.6g} (pure; {_moves(n_targets)})."
        ),
        headline="linked_rounds",
    )
    if noise_sigma is None:
        public = PrivacyClaim(
            view="public",
            guarantee="approximate" if s < 1 else "none",
            epsilon=math.inf,
            delta=delta,
            epsilon_bun_steinke=math.inf,
            rho=None,
            pure_epsilon=None,
            reveal_probability=s_float if s < 1 else None,
            explanation=(
                "Sampling Privacy without release noise: the released pair (Y1, Y2) per target "
                "reveals the number selected there exactly (Y2 - Y1). If a target has no other "
                f"device, a device's presence shows with probability {s}: the release is only "
                f"(0, {s})-DP in the worst case, with no finite epsilon at any smaller delta. "
                "Add release noise for a worst-case bound."
            ),
            headline="selection_revealed",
        )
        return [public, aggregator]
    rho_n = noise_rho(noise_sigma, n_targets)
    sigma_sq = float(noise_sigma * noise_sigma)
    gaussian = _noise_epsilon(sigma_sq, sensitivity_squared(n_targets), rho_n, delta)
    exact = sp_noised_epsilon(s, noise_sigma, n_targets, delta)
    figures = {"gaussian_sensitivity": gaussian, "sp_exact_pair": exact}
    headline = "sp_exact_pair" if exact <= gaussian else "gaussian_sensitivity"
    divergences = sp_release_renyi(s, noise_sigma, n_targets, FILTER_ORDERS)
    renyi = (
        {}
        if divergences is None
        else {f"{a:g}": d for a, d in zip(FILTER_ORDERS, divergences, strict=True)}
    )
    epsilon = 0.0 if delta >= s_float else min(exact, gaussian)
    public = PrivacyClaim(
        view="public",
        guarantee="zcdp",
        epsilon=epsilon,
        delta=delta,
        epsilon_bun_steinke=bun_steinke_epsilon(rho_n, delta),
        rho=rho_n,
        pure_epsilon=None,
        explanation=(
            f"Sampling Privacy (s = {s}) with discrete Gaussian noise of sigma "
            f"{_frac(noise_sigma)} on each released count (rounds 1 and 2 of every target). "
            "Fixing a device's coins, "
            "moving it changes one round's count of the old target and one of the new by 1 "
            f"({_sensitivity_words(n_targets)}), so the release is rho = {rho_n:.6g} zCDP "
            f"(epsilon {gaussian:.6g} at delta {delta:g} from the noise alone). The other "
            "devices' answers only shift the counts, so the worst case is one device alone: its "
            "selection coin and uniform bits, both rounds, and the noise, whose exact "
            f"privacy-loss distribution gives epsilon {exact:.6g} at delta {delta:g}"
            + (" (the headline figure)." if headline == "sp_exact_pair" else ".")
        ),
        headline="zero_at_this_delta" if delta >= s_float else headline,
        figures=figures,
        renyi=renyi,
    )
    return [public, aggregator]


@lru_cache(maxsize=256)
def sp_noised_epsilon(
    sampling_rate: Fraction, noise_sigma: Fraction, n_targets: int, delta: float, queries: int = 1
) -> float:
    """Epsilon at delta of `queries` noisy SP releases from the exact single-device pair
    (inf when sigma is too large for the exact grid: the Gaussian bound is then used)."""
    return epsilon_with_precision(
        lambda: sp_release_pairs(sampling_rate, noise_sigma, n_targets, queries), delta
    )
