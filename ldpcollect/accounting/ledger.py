"""The aggregator's privacy ledger: a budget, a filter that refuses releases before they
happen, an odometer, and the record of every release in both views.

Budget modes (the operator's (epsilon, delta) budget covers the PUBLIC view):
- none (epsilon 0): releases are recorded and the odometer runs; nothing is refused.
- zcdp (delta in (0, 1)): a Feldman-Zrnic zCDP filter. The budget becomes rho_B, the largest
  rho whose CKS conversion at delta is <= epsilon; a release is refused if the released rhos,
  plus its own, would exceed rho_B. Adaptively chosen rhos are fine (Feldman & Zrnic 2021,
  Whitehouse et al. 2023); the whole interaction is rho_B-zCDP, hence (epsilon, delta)-DP.
  A release with no zCDP bound (Sampling Privacy without release noise, only (0, s)-DP) is
  REFUSED: its delta s is larger than any sensible budget delta, and charging it through
  approximate-DP basic composition would exhaust the budget at once anyway.
- pure (delta 0): basic composition of pure epsilons, valid adaptively; releases without a
  pure bound are refused.
Nothing is charged for a refused release, and the check runs before anything is computed.

Odometer (valid at any time, whatever the budget, when releases are chosen after seeing
earlier results): see `odometer`. The headline is the Renyi-tier odometer (or the sum of pure
epsilons when every release is pure); the zCDP tiers, basic composition and the PLD composition
of the releases (the last two valid for a plan fixed in advance) are shown beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ldpcollect.accounting import odometer
from ldpcollect.accounting.conversions import (
    bun_steinke_epsilon,
    cks_epsilon,
    rho_for_target,
)
from ldpcollect.accounting.odometer import rounded_up
from ldpcollect.accounting.release_cost import FILTER_ORDERS, PrivacyClaim
from ldpcollect.accounting.renyi_filter import admits, claim_curve, order_budgets, used_fraction
from ldpcollect.errors import ParameterError
from ldpcollect.privacy_headline import ledger_headline, release_headline

DEFAULT_ODOMETER_DELTA = 1e-6


class BudgetExceeded(Exception):
    """A release would exceed the budget; services map this to RESOURCE_EXHAUSTED."""

    def __init__(
        self, spent: float, requested: float, remaining: float, currency: str, message: str
    ) -> None:
        self.spent = spent
        self.requested = requested
        self.remaining = remaining
        self.currency = currency
        super().__init__(message)


@dataclass(frozen=True)
class Release:
    query_id: str
    released_at: str
    claims: tuple[PrivacyClaim, ...]

    def public(self) -> PrivacyClaim:
        return _view(self.claims, "public")


def _view(claims: tuple[PrivacyClaim, ...] | list[PrivacyClaim], view: str) -> PrivacyClaim:
    for claim in claims:
        if claim.view == view:
            return claim
    raise ParameterError("claims", [c.view for c in claims], f"a list holding a {view!r} claim")


def _num(value: float) -> float | None:
    """JSON numbers or null: an infinite figure (no bound) is null; `null_reasons` says why."""
    return None if math.isinf(value) else value


@dataclass
class PrivacyLedger:
    """Budget, filter, odometer and record of releases. Persist with to_json()/from_json()."""

    epsilon: float = 0.0
    delta: float = 0.0
    odometer_delta: float = DEFAULT_ODOMETER_DELTA
    releases: list[Release] = field(default_factory=list)
    # "zcdp": charge each release its zCDP rho (Feldman-Zrnic zCDP filter). "renyi": charge its
    # Renyi curve at several orders (`renyi_filter`), which lets count-level RR releases through.
    filter: str = "zcdp"
    # Releases before this index were charged under earlier filters: the budget (the current
    # filter's) limits the later ones only; the odometer covers every release.
    filter_start: int = 0
    # The operator explicitly chose to release without a budget (releases then say so).
    no_budget: bool = False

    def __post_init__(self) -> None:
        self.set_budget(self.epsilon, self.delta)
        if not 0 < self.odometer_delta < 1:
            raise ParameterError("odometer_delta", self.odometer_delta, "(0, 1)")
        if self.filter not in ("zcdp", "renyi"):
            raise ParameterError("filter", self.filter, "'zcdp' or 'renyi'")

    # -- budget -------------------------------------------------------------------------------
    def set_budget(self, epsilon: float, delta: float) -> None:
        """Set the population budget; epsilon 0 means none. Raising a budget later is only
        sound if the decision does not depend on released outputs (say so in the docs)."""
        if not (epsilon >= 0 and math.isfinite(epsilon)):
            raise ParameterError("epsilon", epsilon, "[0, inf); 0 means no budget")
        if not 0 <= delta < 1:
            raise ParameterError("delta", delta, "[0, 1); 0 means a pure-DP budget")
        self.epsilon, self.delta = float(epsilon), float(delta)

    @property
    def mode(self) -> str:
        if self.epsilon == 0:
            return "none"
        if self.delta == 0:
            return "pure"
        return "renyi" if self.filter == "renyi" else "zcdp"

    @property
    def currency(self) -> str:
        return {"pure": "epsilon", "renyi": "budget_fraction"}.get(self.mode, "rho")

    @property
    def budget_rho(self) -> float:
        return rho_for_target(self.epsilon, self.delta) if self.mode == "zcdp" else math.inf

    def budget_amount(self) -> float:
        if self.mode == "renyi":
            return 1.0
        return self.epsilon if self.mode == "pure" else self.budget_rho

    def cost(self, claims: list[PrivacyClaim] | tuple[PrivacyClaim, ...]) -> float:
        """The public claim's cost in the filter's currency (inf when it has no such bound);
        under the Renyi filter, the fraction of the budget it uses at its best order alone."""
        public = _view(claims, "public")
        if self.mode == "renyi":
            budgets = order_budgets(self.epsilon, self.delta)
            return used_fraction(claim_curve(public), budgets)
        value = public.pure_epsilon if self.mode == "pure" else public.rho
        return math.inf if value is None else value

    @property
    def filter_releases(self) -> list[Release]:
        """The releases charged under the current filter (its budget applies to them)."""
        return self.releases[self.filter_start :]

    def _spent_curve(self) -> np.ndarray:
        curves = [claim_curve(r.public()) for r in self.filter_releases]
        return np.sum(curves, axis=0) if curves else np.zeros(len(FILTER_ORDERS))

    def spent(self) -> float:
        if self.mode == "renyi":
            return used_fraction(self._spent_curve(), order_budgets(self.epsilon, self.delta))
        current = self.filter_releases
        return math.fsum(self.cost(r.claims) for r in current) if current else 0.0

    def spent_rho(self) -> float:
        rhos = [r.public().rho for r in self.filter_releases]
        return math.inf if None in rhos else math.fsum(x for x in rhos if x is not None)

    def remaining(self) -> float:
        return max(0.0, self.budget_amount() - self.spent())

    # -- filter -------------------------------------------------------------------------------
    def check(self, claims: list[PrivacyClaim] | tuple[PrivacyClaim, ...]) -> None:
        """Raise BudgetExceeded if a release with these claims would exceed the budget."""
        if self.mode == "none":
            return
        if self.mode == "renyi":
            self._check_renyi(claims)
            return
        requested = self.cost(claims)
        spent = self.spent()
        budget = self.budget_amount()
        if math.isfinite(requested) and math.fsum([spent, requested]) <= budget:
            return
        remaining = max(0.0, budget - spent)
        unit = self.currency
        public = _view(claims, "public")
        why = ""
        if math.isinf(requested):
            kind = "zCDP" if unit == "rho" else "pure-DP"
            why = (
                f" This release has no {kind} bound for the public ({public.guarantee}: epsilon "
                f"{public.epsilon:g} at delta {public.delta:g}); add release noise"
                + (" or set a (epsilon, delta) budget" if unit == "epsilon" else "")
                + "."
            )
        message = (
            f"privacy budget exceeded: spent {unit} {spent:.6g}, requested {unit} "
            f"{requested:.6g}, remaining {unit} {remaining:.6g} of the budget (epsilon "
            f"{self.epsilon:g}, delta {self.delta:g}"
            + (f" = rho {budget:.6g}" if unit == "rho" else "")
            + f"); as epsilon at delta {self.delta:g}: spent {self._as_eps(spent):.6g}, "
            f"requested {self._as_eps(requested):.6g}, remaining {self._as_eps(remaining):.6g}."
            + why
        )
        raise BudgetExceeded(spent, requested, remaining, unit, message)

    def _check_renyi(self, claims: list[PrivacyClaim] | tuple[PrivacyClaim, ...]) -> None:
        budgets = order_budgets(self.epsilon, self.delta)
        spent = self._spent_curve()
        request = claim_curve(_view(claims, "public"))
        if admits(spent, request, budgets):
            return
        used = used_fraction(spent, budgets)
        alone = used_fraction(request, budgets)
        raise BudgetExceeded(
            used,
            alone,
            max(0.0, 1.0 - used),
            "budget_fraction",
            f"privacy budget exceeded: with this release no Renyi order stays within its share "
            f"of the budget (epsilon {self.epsilon:g}, delta {self.delta:g}, {len(budgets)} "
            f"orders); used so far {used:.4g} of the budget at the best order, this release "
            f"alone {alone:.4g}.",
        )

    def _as_eps(self, amount: float) -> float:
        if self.currency != "rho" or math.isinf(amount):
            return amount
        return cks_epsilon(amount, self.delta)

    def charge(
        self, query_id: str, claims: list[PrivacyClaim], released_at: datetime | str
    ) -> Release:
        """Check, then record a release. Raises BudgetExceeded (nothing recorded) or
        ParameterError for a query already released."""
        if any(r.query_id == query_id for r in self.releases):
            raise ParameterError("query_id", query_id, "a query not yet in the ledger")
        _view(claims, "public")
        self.check(claims)
        stamp = released_at.isoformat() if isinstance(released_at, datetime) else released_at
        release = Release(query_id, stamp, tuple(claims))
        self.releases.append(release)
        return release

    # -- odometer -----------------------------------------------------------------------------
    def odometer(self) -> dict[str, Any]:
        """Realized public loss so far, valid at any time (`odometer` module): the headline
        pair, whether it holds under adaptive choice, and the other readings beside it."""
        publics = [r.public() for r in self.releases]
        if not publics:
            return {"epsilon": 0.0, "delta": 0.0, "method": "nothing released", "adaptive": True}
        if any(c.guarantee == "none" for c in publics):
            return {
                "epsilon": math.inf,
                "delta": self.odometer_delta,
                "method": "a release without any guarantee was recorded",
                "adaptive": True,
            }
        delta = self.odometer_delta
        readings = {
            "renyi_tier": odometer.renyi_tiers(publics, delta / 2),
            "scheduled_basic": odometer.scheduled_basic(publics, delta / 2),
            "zcdp_tier": odometer.zcdp_tiers(publics, delta),
            "pld_planned": odometer.planned_pld(publics, delta),
        }
        best = odometer.headline(publics, delta)
        result: dict[str, Any] = {
            "epsilon": best.epsilon,
            "delta": best.delta,
            "adaptive": best.adaptive,
        }
        beside = []
        for key, reading in readings.items():
            result[f"{key}_epsilon"] = reading.epsilon
            result[f"{key}_delta"] = reading.delta
            result[f"{key}_words"] = reading.words
            if reading.name != best.name:
                beside.append(f"{reading.name} {rounded_up(reading.epsilon)}")
        realized = "" if best.adaptive else " + realized deltas (valid if fixed in advance)"
        result["method"] = f"{best.name}{realized}; also " + ", ".join(beside)
        result["words"] = best.words
        return result

    # -- reporting and persistence --------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Everything `ldpcollect ledger --json` shows: numbers or null, with `null_reasons`."""
        mode = self.mode
        spent, remaining = self.spent(), self.remaining()
        spent_rho = self.spent_rho()
        odo = self.odometer()
        notes: list[str] = []
        if mode == "none":
            notes.append(
                "No budget is set: releases are recorded but none is refused"
                + (" (the operator opted out explicitly)." if self.no_budget else ".")
            )
        if self.filter_start:
            notes.append(
                f"The current filter started after {self.filter_start} release(s): its budget "
                "limits the releases since; the odometer (the headline) covers every release."
            )
        for r in self.releases:
            for c in r.claims:
                if c.guarantee in ("approximate", "none"):
                    notes.append(f"{r.query_id} ({c.view}): {c.explanation}")
        if not odo.get("adaptive", True):
            notes.append(
                "The odometer adds the deltas of releases without a Renyi curve (Sampling Privacy "
                "without noise) as realized: that reading is valid if those releases were fixed in "
                "advance; if their number was chosen after seeing results, it holds only against "
                "a delta fixed beforehand that is at least as large."
            )
        if mode == "zcdp":
            notes.append(
                "spent_epsilon converts the rho spent so far at the budget's delta; the filter "
                "guarantees the budget (epsilon, delta) for everything it lets through. The "
                "odometer is the figure valid at any time."
            )
        pure_sum = [r.public().pure_epsilon for r in self.releases]
        claims = [[c.to_json() for c in r.claims] for r in self.releases]
        headline = ledger_headline(
            _num(odo["epsilon"]),
            odo["delta"],
            str(odo["method"]),
            claims,
            self.claims_delta,
            (self.epsilon, self.delta) if self.mode != "none" and not self.filter_start else None,
        )
        summary: dict[str, Any] = {
            "epsilon": headline.epsilon,
            "delta": headline.delta,
            "unbounded": headline.unbounded,
            "privacy": headline.to_json(),
            "budget": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "mode": mode,
                "rho": _num(self.budget_rho) if mode == "zcdp" else None,
            },
            "budget_epsilon": self.epsilon if mode != "none" else None,
            "budget_delta": self.delta if mode != "none" else None,
            "currency": self.currency,
            "spent": _num(spent),
            "remaining": _num(remaining) if mode != "none" else None,
            "spent_rho": _num(spent_rho),
            "remaining_rho": _num(max(0.0, self.budget_rho - spent_rho))
            if mode == "zcdp"
            else None,
            "spent_epsilon": _num(self._spent_epsilon(spent, spent_rho)),
            "remaining_epsilon": _num(self._remaining_epsilon(remaining)),
            "spent_epsilon_bun_steinke": _num(
                bun_steinke_epsilon(spent_rho, self._delta_for_reading())
                if math.isfinite(spent_rho)
                else math.inf
            ),
            "spent_pure_epsilon": None
            if None in pure_sum
            else math.fsum(x for x in pure_sum if x is not None),
            "odometer": {k: _num(v) if isinstance(v, float) else v for k, v in odo.items()},
            "odometer_epsilon": _num(odo["epsilon"]),
            "odometer_delta": odo["delta"],
            "releases": [
                {
                    "query_id": r.query_id,
                    **release_headline(c).fields(),
                    "released_at": r.released_at,
                    "charged": _num(self.cost(r.claims)) if mode != "none" else None,
                    "claims": c,
                }
                for r, c in zip(self.releases, claims, strict=True)
            ],
            "notes": notes,
        }
        summary["null_reasons"] = {
            key: (
                "no budget is set"
                if mode == "none" and key.startswith(("budget", "remaining"))
                else "the Renyi filter has no single remaining epsilon: see remaining (the "
                "fraction of the budget used at the best order)"
                if mode == "renyi" and key == "remaining_epsilon"
                else "not applicable under this budget's currency"
                if key in ("remaining_rho", "spent_pure_epsilon")
                else "no finite bound: a release without a bound in this currency was recorded"
            )
            for key, value in summary.items()
            if value is None
        }
        return summary

    @property
    def claims_delta(self) -> float:
        """The delta new releases' claims are stated at: the budget's, else the reporting one."""
        return self.delta if self.mode in ("zcdp", "renyi") else DEFAULT_ODOMETER_DELTA

    def _delta_for_reading(self) -> float:
        return self.delta if self.mode == "zcdp" else self.odometer_delta

    def _spent_epsilon(self, spent: float, spent_rho: float) -> float:
        if self.mode == "pure":
            return spent
        if math.isinf(spent_rho):
            return math.inf
        return cks_epsilon(spent_rho, self._delta_for_reading())

    def _remaining_epsilon(self, remaining: float) -> float:
        if self.mode in ("none", "renyi"):  # renyi: no single epsilon left, see `remaining`
            return math.inf
        if self.mode == "pure":
            return remaining
        return cks_epsilon(remaining, self.delta)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "odometer_delta": self.odometer_delta,
            **({"filter": self.filter} if self.filter != "zcdp" else {}),
            **({"filter_start": self.filter_start} if self.filter_start else {}),
            **({"no_budget": True} if self.no_budget else {}),
            "releases": [
                {
                    "query_id": r.query_id,
                    "released_at": r.released_at,
                    "claims": [c.to_json() for c in r.claims],
                }
                for r in self.releases
            ],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> PrivacyLedger:
        if data.get("version") != 1:
            raise ParameterError("version", data.get("version"), "1")
        ledger = PrivacyLedger(
            float(data["epsilon"]),
            float(data["delta"]),
            float(data["odometer_delta"]),
            filter=str(data.get("filter", "zcdp")),
            filter_start=int(data.get("filter_start", 0)),
            no_budget=bool(data.get("no_budget", False)),
        )
        for item in data["releases"]:
            claims = tuple(PrivacyClaim.from_json(c) for c in item["claims"])
            ledger.releases.append(Release(str(item["query_id"]), str(item["released_at"]), claims))
        return ledger
