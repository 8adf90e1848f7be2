"""One headline privacy figure per release, and the details under it (docs/privacy.md, "How to
read a figure").

The headline is the public view's tightest sound epsilon at the delta the claims are stated at
(the ledger's delta): the figure to publish. Every other figure (other methods, pure epsilon,
zCDP rho, Bun-Steinke, the other views) goes in `details`, one sentence each. A view with no
finite epsilon at that delta is `epsilon: None, unbounded: True` with words, never 0.

Works on claims as JSON objects (`PrivacyClaim.to_json()` or the CLI's `claim_json`), without
SciPy, so tables, maps and exports can call it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# One sentence per method that can give a public epsilon (`PrivacyClaim.headline`, `figures`).
METHOD_WORDS = {
    "local_exact": "each device's own report bounds what the public learns (exact for one report)",
    "count_level": (
        "the public sees only counts over at least min_reports participants, whose random "
        "answers hide each device's (exact privacy-loss distribution of the count)"
    ),
    "noise_exact": "the release noise alone (exact discrete Gaussian profile)",
    "renyi_cks": "the reports' and the noise's combined Renyi curve, converted by CKS",
    "gaussian_sensitivity": "the release noise alone, from the counts' sensitivity",
    "sp_exact_pair": (
        "one device's selection coin, both rounds and the noise, exactly (the other devices "
        "only shift the counts)"
    ),
    "zero_at_this_delta": "the delta is at least the sampling rate: nothing to bound",
    "secret_sharing": "one aggregator alone sees only random secret shares",
    "selection_revealed": "the released rounds show how many devices were selected",
    "linked_rounds": "both rounds of a device, linked, show whether it was selected",
}

VIEW_WORDS = {
    "aggregator": "what the aggregator sees (in the trusted model: every individual report)",
    "collector+aggregator": "the collector colluding with one aggregator",
}

HONEST_PARTICIPANTS = (
    "Count-level figures assume at least min_reports of the participants are honest devices "
    "answering at random; reports from fake devices do not hide anyone (n - 1 of them reduce "
    "the figure to the local one). Require admission tokens (--require-tokens) to bound how "
    "many reports one party can make."
)

NO_BUDGET_NOTE = (
    "Released WITHOUT a privacy budget: nothing limited the total loss; the ledger's odometer "
    "shows it."
)


def round_up(value: float, digits: int = 3) -> str:
    """A loss in words, rounded UP to `digits` significant digits (never below the bound)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    exponent = math.floor(math.log10(abs(value))) - digits + 1
    scaled = math.ceil(value / 10.0**exponent - 1e-9)
    return f"{scaled * 10.0**exponent:.{digits}g}"


@dataclass(frozen=True)
class Detail:
    """One figure under the headline, with its sentence."""

    name: str
    epsilon: float | None
    delta: float | None
    sentence: str

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "sentence": self.sentence,
        }


@dataclass(frozen=True)
class Headline:
    """The figure to publish for a release (or a ledger) and what lies under it."""

    epsilon: float | None  # None: no finite bound (see `unbounded` and `words`)
    delta: float | None
    unbounded: bool
    words: str
    method: str = ""
    details: tuple[Detail, ...] = field(default_factory=tuple)

    def short(self) -> str:
        """For titles: "epsilon 0.137 at delta 1e-06" or "NO finite epsilon: ..."."""
        if self.epsilon is None:
            return f"NO finite epsilon: {self.words}" if self.unbounded else self.words
        return f"epsilon {round_up(self.epsilon)} at delta {self.delta:g}"

    def fields(self) -> dict[str, object]:
        """The three numbers and the words, for an entry of a list (a ledger's releases)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "unbounded": self.unbounded,
            "privacy": self.words,
        }

    def to_json(self) -> dict[str, object]:
        """The JSON names every command uses: `epsilon`, `delta`, `unbounded`, then words."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "unbounded": self.unbounded,
            "words": self.words,
            "method": self.method,
            "details": [d.to_json() for d in self.details],
        }


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def claim_unbounded(claim: Mapping[str, object]) -> bool:
    """No finite epsilon at the claim's delta."""
    return bool(claim.get("unbounded")) or _number(claim.get("epsilon")) is None


def unbounded_words(claim: Mapping[str, object]) -> str:
    reveal = _number(claim.get("reveal_probability"))
    if reveal is not None:
        return (
            f"reveals a device's cell exactly with probability {reveal:g} (no finite epsilon "
            f"at any delta below {reveal:g})"
        )
    return "can reveal a device's answers with certainty: no guarantee"


def bounded_words(epsilon: float, delta: float) -> str:
    return (
        f"one device moving makes no released outcome more than e^{round_up(epsilon)} = "
        f"{round_up(math.exp(epsilon))} times more likely"
        + ("" if delta == 0 else f", except with probability {delta:g}")
    )


def release_headline(claims: Sequence[Mapping[str, object]]) -> Headline:
    """The public view's headline and the details under it."""
    public = next((c for c in claims if c.get("view") == "public"), None)
    if public is None:
        return Headline(None, None, False, "no privacy claim recorded")
    delta = _number(public.get("delta"))
    method = str(public.get("headline") or "")
    details = _details(public, claims)
    if claim_unbounded(public):
        words = unbounded_words(public)
        if public.get("reveal_probability") is not None:
            words += "; release noise (--noise-sigma) bounds it"
        if NO_BUDGET_NOTE in str(public.get("explanation", "")):
            words += ". " + NO_BUDGET_NOTE
        return Headline(None, delta, True, words, method, details)
    epsilon = _number(public.get("epsilon"))
    assert epsilon is not None
    words = bounded_words(epsilon, delta or 0.0)
    if method in METHOD_WORDS:
        words += f" ({METHOD_WORDS[method]})"
    if NO_BUDGET_NOTE in str(public.get("explanation", "")):
        words += ". " + NO_BUDGET_NOTE
    return Headline(epsilon, delta, False, words, method, details)


def _details(
    public: Mapping[str, object], claims: Sequence[Mapping[str, object]]
) -> tuple[Detail, ...]:
    delta = _number(public.get("delta"))
    method = str(public.get("headline") or "")
    found: list[Detail] = []
    figures = public.get("figures")
    if isinstance(figures, Mapping):
        for name, value in sorted(figures.items()):
            if name == method:
                continue
            found.append(
                Detail(
                    str(name),
                    _number(value),
                    delta,
                    METHOD_WORDS.get(str(name), "another valid bound") + " (not the tightest)",
                )
            )
    pure = _number(public.get("pure_epsilon"))
    if pure is not None:
        found.append(Detail("pure_epsilon", pure, 0.0, "the same view with delta 0 (pure DP)"))
    rho = _number(public.get("rho"))
    if rho is not None:
        found.append(
            Detail("rho", None, None, f"zCDP rho {rho:.6g}: what the zCDP budget filter charges")
        )
    bun = _number(public.get("epsilon_bun_steinke"))
    if bun is not None and rho is not None:
        found.append(
            Detail("bun_steinke", bun, delta, "the conservative conversion of rho (Bun-Steinke)")
        )
    names = [str(k) for k in figures] if isinstance(figures, Mapping) else []
    if "count_level" in (method, *names):
        found.append(Detail("honest_participants", None, None, HONEST_PARTICIPANTS))
    public_eps = None if claim_unbounded(public) else _number(public.get("epsilon"))
    for claim in claims:
        view = str(claim.get("view"))
        if view == "public":
            continue
        found.append(_view_detail(claim, public_eps, claim_unbounded(public)))
    return tuple(found)


def _view_detail(
    claim: Mapping[str, object], public_eps: float | None, public_open: bool
) -> Detail:
    """Another view's figure; never below the public's (every party sees the release too)."""
    view = str(claim.get("view"))
    about = VIEW_WORDS.get(view, view)
    delta = _number(claim.get("delta"))
    if claim_unbounded(claim):
        return Detail(view, None, delta, f"{about}: {unbounded_words(claim)}")
    own = _number(claim.get("epsilon"))
    assert own is not None
    if public_open:
        return Detail(
            view,
            None,
            delta,
            f"{about}: epsilon {round_up(own)} before the release; once released it also sees "
            "what the public sees, which has no finite bound",
        )
    if public_eps is not None and own < public_eps:
        return Detail(
            view,
            public_eps,
            delta,
            f"{about}: epsilon {round_up(own)} about the answers before the release; once "
            "released it also sees what the public sees",
        )
    return Detail(view, own, delta, about)


def ledger_headline(
    odometer_epsilon: float | None,
    odometer_delta: float,
    odometer_method: str,
    releases: Sequence[Sequence[Mapping[str, object]]],
    delta: float,
    budget: tuple[float, float] | None = None,
) -> Headline:
    """Everything released so far, for the public: the odometer's reading (valid at any time,
    also when releases were chosen after seeing earlier ones), or the budget (epsilon, delta)
    when one filter admitted every release and that is smaller (a filter's budget holds for
    everything it admits, chosen adaptively or not), or, while there is one release, that
    release's own headline when smaller (nothing was chosen after seeing a result, so its own
    bound is the whole loss; the ledger then says what the release said). Unbounded when some
    release has no finite epsilon at the ledger's `delta`."""
    if not releases:
        return Headline(0.0, 0.0, False, "nothing released yet", "nothing released")
    publics = [next((c for c in r if c.get("view") == "public"), None) for r in releases]
    open_claims = [c for c in publics if c is not None and claim_unbounded(c)]
    if open_claims or odometer_epsilon is None or not math.isfinite(odometer_epsilon):
        words = (
            f"{len(open_claims)} release(s) without a finite bound: one "
            + unbounded_words(open_claims[0])
            if open_claims
            else "a release without any guarantee was recorded"
        )
        details: tuple[Detail, ...] = ()
        if odometer_epsilon is not None and math.isfinite(odometer_epsilon):
            details = (
                Detail(
                    "odometer",
                    odometer_epsilon,
                    odometer_delta,
                    f"the odometer's reading, whose delta includes those releases' reveal "
                    f"probabilities ({odometer_method})",
                ),
            )
        return Headline(None, delta, True, words, "odometer", details)
    method = Detail("odometer_method", None, None, odometer_method) if odometer_method else None
    details = (method,) if method else ()
    only = release_headline(releases[0]) if len(releases) == 1 else None
    if (
        only is not None
        and only.epsilon is not None
        and only.delta is not None
        and only.delta <= odometer_delta
        and only.epsilon < odometer_epsilon
        and (budget is None or only.epsilon <= budget[0])
    ):
        words = (
            f"for everything released so far, {bounded_words(only.epsilon, only.delta)} (the "
            "one release's own bound: with a single release nothing was chosen after seeing "
            "a result)"
        )
        odometer = Detail(
            "odometer",
            odometer_epsilon,
            odometer_delta,
            "the odometer's reading (valid however later releases are chosen; looser for one)",
        )
        return Headline(
            only.epsilon, only.delta, False, words, "single_release", (odometer, *details)
        )
    if budget is not None and budget[0] < odometer_epsilon and budget[1] <= odometer_delta:
        words = (
            f"for everything released so far, {bounded_words(budget[0], budget[1])} (the "
            "budget: one filter admitted every release, and its budget holds for all of them)"
        )
        odometer = Detail(
            "odometer",
            odometer_epsilon,
            odometer_delta,
            "the odometer's reading (valid without a budget; looser than the filter's)",
        )
        return Headline(budget[0], budget[1], False, words, "budget_filter", (odometer, *details))
    words = (
        f"for everything released so far, {bounded_words(odometer_epsilon, odometer_delta)} "
        "(the odometer: valid at any time, also when releases were chosen after seeing "
        "earlier results)"
    )
    return Headline(odometer_epsilon, odometer_delta, False, words, "odometer", details)
