"""Releases: once per query, inside the store's transaction (DESIGN.md section 3).

Order (each step sees only what the previous one decided):
  1. check the ledger's budget: refuse with RESOURCE_EXHAUSTED before anything is computed;
  2. noise: exact discrete Gaussian noise on every released round count (when requested);
  3. estimate with the mechanism's own estimator (noise variance included in the error);
  4. charge the ledger;
  then the store persists the release, the ledger and deletes the individual reports in the
  same transaction.

Privacy accounting (steps 1, 2, 4) belongs to `ldpcollect.accounting` (engineer C);
`PrivacyAccounting` below is the seam. Step 2 (exact discrete Gaussian noise) is wired; steps 1
and 4 (budget filter and ledger charge) are NOT yet: see `NoiseOnlyAccounting`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import grpc
import numpy as np
import numpy.typing as npt

from aggregator.errors import ServiceError
from aggregator.model import QueryInfo, ReleaseRecord, TargetRelease
from aggregator.store.base import ReleaseFn
from ldpcollect.accounting.discrete_gaussian import (
    discrete_gaussian_variance,
    sample_discrete_gaussian,
)

Counts = npt.NDArray[np.int64]


@dataclass
class LedgerState:
    """The ledger as stored (JSON). `accounting` holds the accounting module's own state."""

    budget_epsilon: float = 0.0
    budget_delta: float = 0.0
    entries: list[dict[str, Any]] = field(default_factory=list)
    accounting: dict[str, Any] | None = None

    @classmethod
    def from_body(cls, body: str | None) -> LedgerState:
        if body is None:
            return cls()
        data = json.loads(body)
        return cls(
            budget_epsilon=float(data.get("budget_epsilon", 0.0)),
            budget_delta=float(data.get("budget_delta", 0.0)),
            entries=list(data.get("entries", [])),
            accounting=data.get("accounting"),
        )

    def to_body(self) -> str:
        return json.dumps(
            {
                "budget_epsilon": self.budget_epsilon,
                "budget_delta": self.budget_delta,
                "entries": self.entries,
                "accounting": self.accounting,
            },
            sort_keys=True,
        )


class PrivacyAccounting(Protocol):
    def check(self, ledger: LedgerState, query: QueryInfo) -> None:
        """Raise ServiceError(RESOURCE_EXHAUSTED) if releasing `query` would exceed the budget."""

    def noise(self, sigma: Fraction, shape: tuple[int, ...]) -> tuple[Counts, float]:
        """Integer noise of that shape and its per-count variance."""

    def charge(self, ledger: LedgerState, query: QueryInfo) -> list[dict[str, Any]]:
        """Record the release in the ledger; returns its privacy claims (PrivacyClaim fields)."""


class NoiseOnlyAccounting:
    """Release noise wired (exact discrete Gaussian, `ldpcollect.accounting.discrete_gaussian`);
    the budget check and the ledger charge are NOT wired yet (they wait for the accounting
    package's `release_cost` and `ledger` modules): no claims are recorded, and a release is
    refused while a budget is set, rather than released unaccounted."""

    NOTE = "privacy accounting is not wired into this aggregator yet: no claims recorded"

    def check(self, ledger: LedgerState, query: QueryInfo) -> None:
        # TODO(accounting): PrivacyLedger.check(release_claims(...)) -> RESOURCE_EXHAUSTED.
        if ledger.budget_epsilon > 0:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "a privacy budget is set but this aggregator cannot account for releases yet; "
                "refusing rather than releasing unaccounted",
            )

    def noise(self, sigma: Fraction, shape: tuple[int, ...]) -> tuple[Counts, float]:
        sigma_sq = sigma * sigma
        size = int(np.prod(shape))
        draws = sample_discrete_gaussian(sigma_sq, size)
        noise = np.asarray(draws, dtype=np.int64).reshape(shape)
        return noise, discrete_gaussian_variance(sigma_sq)

    def charge(self, ledger: LedgerState, query: QueryInfo) -> list[dict[str, Any]]:
        # TODO(accounting): PrivacyLedger.charge(release_claims(...)); claims as dicts.
        return []


def release_function(
    accounting: PrivacyAccounting | None = None,
    clock: Callable[[], float] = time.time,
) -> ReleaseFn:
    """The ReleaseFn the store runs inside its transaction."""
    acct: PrivacyAccounting = accounting if accounting is not None else NoiseOnlyAccounting()

    def compute(
        query: QueryInfo, counts: Counts, ledger_body: str | None
    ) -> tuple[ReleaseRecord, str | None]:
        ledger = LedgerState.from_body(ledger_body)
        # 1. Budget: refuse before anything is computed or noised.
        acct.check(ledger, query)
        # 2. Noise on every released round count.
        released = counts.astype(np.int64, copy=True)
        noise_variance = 0.0
        sigma = query.spec.noise_sigma
        if sigma is not None:
            noise, noise_variance = acct.noise(sigma, released.shape)
            released += noise
        # 3. Estimates from the (noised) counts of devices that completed every round.
        n = query.completed_devices
        est = query.spec.mechanism.estimate(released, n, noise_variance)
        # 4. Charge the ledger.
        released_at = clock()
        claims = acct.charge(ledger, query)
        ledger.entries.append(
            {"query_id": query.query_id, "released_at": released_at, "claims": claims}
        )
        record = ReleaseRecord(
            query_id=query.query_id,
            participants=n,
            released_at=released_at,
            estimates=tuple(
                TargetRelease(
                    location_id=target,
                    estimate=float(est.estimate[i]),
                    std_error=float(est.std_error[i]),
                    ci_low=float(est.ci_low[i]),
                    ci_high=float(est.ci_high[i]),
                    participants=n,
                    round_counts=tuple(int(c) for c in released[:, i]),
                )
                for i, target in enumerate(query.spec.targets)
            ),
            claims=tuple(claims),
        )
        return record, ledger.to_body()

    return compute


def set_budget_function(epsilon: float, delta: float) -> Callable[[str | None], str]:
    """A LedgerFn setting the budget; validates first (ParameterError-style ServiceError)."""
    if not (np.isfinite(epsilon) and epsilon >= 0):
        raise ServiceError(
            grpc.StatusCode.INVALID_ARGUMENT, f"epsilon must be in [0, inf), got {epsilon!r}"
        )
    if not (np.isfinite(delta) and 0 <= delta < 1):
        raise ServiceError(
            grpc.StatusCode.INVALID_ARGUMENT, f"delta must be in [0, 1), got {delta!r}"
        )

    def update(body: str | None) -> str:
        ledger = LedgerState.from_body(body)
        ledger.budget_epsilon = float(epsilon)
        ledger.budget_delta = float(delta)
        return ledger.to_body()

    return update
