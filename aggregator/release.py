"""Releases and the privacy ledger, inside the store's transaction (docs/design.md, "The ledger").

Order of a release (each step sees only what the previous one decided):
  1. claims: the release's privacy cost for the public and the aggregator
     (`ldpcollect.accounting.release_cost.release_claims`, from the query's mechanism, target
     count, noise sigma and min_reports (the participants floor of the count-level view), at
     the ledger's reporting delta);
  2. filter: `PrivacyLedger.check` refuses a release that would exceed the budget with
     `Exhausted` (spent, requested, remaining) BEFORE anything is computed or noised;
  3. noise: exact discrete Gaussian noise on every released round count (when requested);
  4. estimate with the mechanism's own estimator (noise variance included in the error), and
     exact 95% intervals from the estimator's law (`ldpcollect.intervals`);
  5. charge the ledger;
  then the store persists the release and the ledger, and deletes the individual reports, in
  the same transaction. A refused release changes nothing.

The stored ledger body is `PrivacyLedger.to_json()` plus the history of budget changes.
Reporting delta: claims are stated at the budget's delta when an (epsilon, delta) budget is set,
else at `DEFAULT_REPORTING_DELTA` (1e-6). The filter charges rho or pure epsilon, which do not
depend on that delta.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from aggregator.errors import Exhausted, FailedPrecondition, Invalid, ServiceError
from aggregator.model import QueryInfo, ReleaseRecord, TargetRelease
from aggregator.store.base import LedgerFn
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms.no_privacy import gives_no_privacy
from ldpcollect.privacy_headline import NO_BUDGET_NOTE

if TYPE_CHECKING:
    from ldpcollect.accounting.ledger import BudgetExceeded, PrivacyLedger
    from ldpcollect.accounting.release_cost import PrivacyClaim

# `ldpcollect.accounting` (and the SciPy it needs) is imported on first use, not at start:
# it is most of a server's start-up time, and a restart should not wait for it.


def accounting_loaded() -> bool:
    """Whether the claims code is imported already (computing claims is then about 0.2 s)."""
    return "ldpcollect.accounting.release_cost" in sys.modules


def _new_ledger() -> PrivacyLedger:
    from ldpcollect.accounting.ledger import PrivacyLedger

    return PrivacyLedger()


def _budget_exceeded() -> type[BudgetExceeded]:
    from ldpcollect.accounting.ledger import BudgetExceeded

    return BudgetExceeded


log = logging.getLogger(__name__)

Counts = npt.NDArray[np.int64]

# The delta at which claims are stated when no (epsilon, delta) budget fixes one.
DEFAULT_REPORTING_DELTA = 1e-6

_ClaimKey = tuple[str, tuple[tuple[str, str], ...], int, Fraction | None, float, int]


def iso_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def epoch_seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


@dataclass
class StoredLedger:
    """The ledger as stored: C's `PrivacyLedger` and every budget change (an audit trail)."""

    ledger: PrivacyLedger = field(default_factory=_new_ledger)
    budget_changes: list[dict[str, Any]] = field(default_factory=list)
    # Releases recorded by an aggregator version without accounting (no claims): listed, not
    # counted; GetLedger says so.
    unaccounted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reporting_delta(self) -> float:
        return (
            self.ledger.delta if self.ledger.mode in ("zcdp", "renyi") else DEFAULT_REPORTING_DELTA
        )

    @classmethod
    def from_body(cls, body: str | None) -> StoredLedger:
        from ldpcollect.accounting.ledger import PrivacyLedger

        if body is None:
            return cls()
        data = json.loads(body)
        if "version" not in data:  # the pre-accounting format: budget and claim-less entries
            legacy = PrivacyLedger()
            legacy.set_budget(
                float(data.get("budget_epsilon", 0.0)), float(data.get("budget_delta", 0.0))
            )
            return cls(legacy, [], list(data.get("entries", [])))
        return cls(
            PrivacyLedger.from_json(data),
            list(data.get("budget_changes", [])),
            list(data.get("unaccounted", [])),
        )

    def to_body(self) -> str:
        data = self.ledger.to_json()
        data["budget_changes"] = self.budget_changes
        if self.unaccounted:
            data["unaccounted"] = self.unaccounted
        return json.dumps(data, sort_keys=True)


NO_PRIVACY_NOTE = (
    "The operator created this query with --allow-no-privacy: no privacy was promised to its "
    "devices."
)


NO_BUDGET_REFUSAL = (
    "release of {query_id!r} refused, nothing was computed or changed: no privacy budget is "
    "set. Fix one before the first release (`ldpcollect ledger set-budget --epsilon E --delta "
    "D`, or `ldpcollect serve --budget E,D`; `ldpcollect privacy plan` helps choose), or opt "
    "out explicitly (`ldpcollect ledger set-budget --no-budget`)."
)


def unbudgeted(claims: list[PrivacyClaim]) -> list[PrivacyClaim]:
    """The claims of a release no budget limits (the operator opted out), each saying so."""
    return [replace(c, explanation=f"{c.explanation} {NO_BUDGET_NOTE}") for c in claims]


class ReleaseAccounting:
    """Claims for a query (cached: they depend only on the query and the delta) and noise.

    Claims of one key are computed once even when asked for by several threads at a time (a
    release arriving while `Releaser.prepare` runs in the background waits for it).
    """

    def __init__(self) -> None:
        self._cache: dict[_ClaimKey, tuple[PrivacyClaim, ...]] = {}
        self._computing: dict[_ClaimKey, threading.Lock] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(query: QueryInfo, delta: float) -> _ClaimKey:
        spec = query.spec
        return (
            spec.mechanism.name,
            tuple(sorted(spec.mechanism.params().items())),
            len(spec.targets),
            spec.noise_sigma,
            delta,
            spec.min_reports,
        )

    def cached(self, query: QueryInfo, delta: float) -> bool:
        """Whether the claims of `query` at `delta` are ready."""
        with self._lock:
            return self._key(query, delta) in self._cache

    def claims(self, query: QueryInfo, delta: float) -> list[PrivacyClaim]:
        key = self._key(query, delta)
        with self._lock:
            cached = self._cache.get(key)
            computing = self._computing.setdefault(key, threading.Lock())
        if cached is None:
            with computing:
                cached = self._computed(query, delta, key)
        return list(cached)

    def _computed(self, query: QueryInfo, delta: float, key: _ClaimKey) -> tuple[PrivacyClaim, ...]:
        """The claims of `key`: cached by another thread meanwhile, or computed now."""
        spec = query.spec
        with self._lock:
            cached = self._cache.get(key)
        if cached is None:
            from ldpcollect.accounting.release_cost import release_claims

            try:
                cached = tuple(
                    release_claims(
                        spec.mechanism,
                        len(spec.targets),
                        spec.noise_sigma,
                        delta,
                        participants=spec.min_reports,  # nothing is released below it
                    )
                )
                if gives_no_privacy(spec.mechanism):
                    cached = tuple(
                        replace(claim, explanation=f"{claim.explanation} {NO_PRIVACY_NOTE}")
                        for claim in cached
                    )
            except ParameterError as exc:
                raise FailedPrecondition(
                    f"cannot account for releasing {query.query_id!r}: {exc}",
                ) from exc
            with self._lock:
                if len(self._cache) > 256:
                    self._cache.clear()
                    self._computing.clear()  # a computation under way just ends uncached
                self._cache[key] = cached
        return cached

    def noise(self, sigma: Fraction, shape: tuple[int, ...]) -> tuple[Counts, float]:
        """Exact discrete Gaussian integers of that shape and their per-count variance."""
        from ldpcollect.accounting.discrete_gaussian import (
            discrete_gaussian_variance,
            sample_discrete_gaussian,
        )

        sigma_sq = sigma * sigma
        size = int(np.prod(shape))
        draws = sample_discrete_gaussian(sigma_sq, size)
        noise = np.asarray(draws, dtype=np.int64).reshape(shape)
        return noise, discrete_gaussian_variance(sigma_sq)


def refusal(query_id: str, exc: BudgetExceeded) -> Exhausted:
    return Exhausted(
        f"release of {query_id!r} refused, nothing was computed or changed: {exc} "
        "The budget of a filter cannot be raised; a new filter (`ldpcollect ledger set-budget "
        "--new-filter ...`) limits later releases, and the odometer covers all of them.",
    )


@contextmanager
def _failures_refused(query_id: str) -> Iterator[None]:
    """A computation that fails unexpectedly refuses the release (FailedPrecondition, nothing
    changed) instead of escaping as an unknown error; the details go to the log."""
    try:
        yield
    except ServiceError:
        raise
    except Exception as exc:
        log.exception("computing the release of %r failed", query_id)
        raise FailedPrecondition(
            f"cannot release {query_id!r}: computing the release failed, so nothing was "
            "released or charged; the aggregator's log has the details"
        ) from exc


class Releaser:
    """The ReleaseFn the store runs inside its transaction (callable), plus `prepare`, which
    computes the claims outside the store's writer so the transaction stays short."""

    def __init__(
        self,
        accounting: ReleaseAccounting | None = None,
        clock: Callable[[], float] = time.time,
        require_budget: bool = False,
    ) -> None:
        self._acct = accounting if accounting is not None else ReleaseAccounting()
        self._clock = clock
        # Refuse releases while no budget is set, unless the ledger records an explicit
        # opt-out (`serve` requires a budget unless started with --no-budget).
        self._require_budget = require_budget

    def prepare(self, query: QueryInfo, ledger_body: str | None) -> None:
        """Warm the claims cache at the current ledger's delta (optional; any thread)."""
        with _failures_refused(query.query_id):
            self._acct.claims(query, StoredLedger.from_body(ledger_body).reporting_delta)

    def __call__(
        self, query: QueryInfo, counts: Counts, ledger_body: str | None
    ) -> tuple[ReleaseRecord, str | None]:
        with _failures_refused(query.query_id):
            return self._release(query, counts, ledger_body)

    def _release(
        self, query: QueryInfo, counts: Counts, ledger_body: str | None
    ) -> tuple[ReleaseRecord, str | None]:
        budget_exceeded = _budget_exceeded()
        stored = StoredLedger.from_body(ledger_body)
        ledger = stored.ledger
        # 1-2. Claims, then the filter: refuse before anything is computed or noised.
        claims = self._acct.claims(query, stored.reporting_delta)
        if ledger.mode == "none":
            if self._require_budget and not ledger.no_budget:
                raise FailedPrecondition(NO_BUDGET_REFUSAL.format(query_id=query.query_id))
            claims = unbudgeted(claims)
        try:
            ledger.check(claims)
        except budget_exceeded as exc:
            raise refusal(query.query_id, exc) from exc
        # 3. Noise on every released round count.
        released = counts.astype(np.int64, copy=True)
        noise_variance = 0.0
        sigma = query.spec.noise_sigma
        if sigma is not None:
            noise, noise_variance = self._acct.noise(sigma, released.shape)
            released += noise
        # 4. Estimates from the (noised) counts of devices that completed every round.
        n = query.completed_devices
        est = query.spec.mechanism.estimate(released, n, noise_variance)
        # 4b. Exact 95% intervals (the plug-in one undercovers small cells).
        from ldpcollect.intervals import release_intervals

        ci_low, ci_high = release_intervals(query.spec.mechanism, released, n, sigma)
        est = replace(est, ci_low=ci_low, ci_high=ci_high)
        # 5. Charge the ledger.
        released_at = self._clock()
        try:
            ledger.charge(query.query_id, claims, iso_time(released_at))
        except budget_exceeded as exc:  # cannot happen after check; kept for safety
            raise refusal(query.query_id, exc) from exc
        except ParameterError as exc:
            raise FailedPrecondition(str(exc)) from exc
        # Columns to Python numbers once (`tolist`), not one numpy scalar at a time: a
        # release of 65,536 targets builds that many records.
        columns = zip(
            query.spec.targets,
            np.asarray(est.estimate, dtype=np.float64).tolist(),
            np.asarray(est.std_error, dtype=np.float64).tolist(),
            np.asarray(est.ci_low, dtype=np.float64).tolist(),
            np.asarray(est.ci_high, dtype=np.float64).tolist(),
            [n] * len(query.spec.targets),
            map(tuple, released.T.tolist()),
            strict=True,
        )
        record = ReleaseRecord(
            query_id=query.query_id,
            participants=n,
            released_at=released_at,
            estimates=tuple(map(TargetRelease._make, columns)),
            claims=tuple(c.to_json() for c in claims),
        )
        return record, stored.to_body()


def release_function(
    accounting: ReleaseAccounting | None = None,
    clock: Callable[[], float] = time.time,
    require_budget: bool = False,
) -> Releaser:
    """The ReleaseFn the store runs inside its transaction."""
    return Releaser(accounting, clock, require_budget)


def _validated_budget(epsilon: float, delta: float) -> PrivacyLedger:
    from ldpcollect.accounting.ledger import PrivacyLedger

    try:
        return PrivacyLedger(epsilon, delta)
    except ParameterError as exc:
        raise Invalid(str(exc)) from exc


LEDGER_FILTERS = ("zcdp", "renyi")


def set_budget_function(
    epsilon: float,
    delta: float,
    clock: Callable[[], float] = time.time,
    filter: str = "",
    new_filter: bool = False,
    no_budget: bool = False,
) -> LedgerFn:
    """A LedgerFn setting the budget (docs/privacy.md, "The ledger").

    The budget of a filter is fixed once a release was charged under it: changing it then
    (raising it above all) would void the filter's guarantee, so it is refused
    (`FailedPrecondition`) unless `new_filter` starts a new filter, an explicit recorded act:
    the new budget limits the releases after it, and the odometer keeps covering every
    release. Setting a budget where none was set starts the first filter. `no_budget` is the
    explicit opt-out (epsilon and delta 0): releases then go out unbudgeted and say so. The
    same budget again changes nothing (a restart with `serve --budget`)."""
    if no_budget and (epsilon != 0 or delta != 0):
        raise Invalid("--no-budget takes no epsilon or delta (it records that none is wanted)")
    _validated_budget(epsilon, delta)
    if filter not in ("", *LEDGER_FILTERS):
        raise Invalid(f"filter must be one of {', '.join(LEDGER_FILTERS)} (or empty to keep it)")

    def update(body: str | None) -> str:
        from ldpcollect.accounting.ledger import PrivacyLedger

        stored = StoredLedger.from_body(body)
        old = stored.ledger
        chosen = filter or old.filter
        in_filter = len(old.filter_releases)
        same = (old.epsilon, old.delta, old.no_budget, old.filter) == (
            float(epsilon),
            float(delta),
            no_budget,
            chosen,
        )
        if same and not new_filter:
            return stored.to_body()
        starts = new_filter or (old.mode == "none" and not no_budget and in_filter > 0)
        if in_filter and not starts and old.mode != "none":
            raise FailedPrecondition(
                f"the budget is fixed once a release was charged under it: {in_filter} "
                f"release(s) were charged under (epsilon {old.epsilon:g}, delta {old.delta:g}"
                + ("" if old.mode != "none" else ", no budget")
                + "); changing it now, raising it above all, would void the filter's "
                "guarantee. To limit later releases by another budget, start a new filter "
                "(`ldpcollect ledger set-budget --new-filter --epsilon E --delta D`): it is "
                "recorded, and the ledger's odometer keeps covering every release."
            )
        start = len(old.releases) if starts else old.filter_start
        new = PrivacyLedger(
            float(epsilon),
            float(delta),
            old.odometer_delta,
            list(old.releases),
            filter=chosen,
            filter_start=start,
            no_budget=no_budget,
        )
        stored.ledger = new
        stored.budget_changes.append(
            {
                "epsilon": float(epsilon),
                "delta": float(delta),
                "filter": chosen,
                "changed_at": iso_time(clock()),
                "releases_before": len(new.releases),
                "new_filter": starts,
                "no_budget": no_budget,
            }
        )
        return stored.to_body()

    return update
