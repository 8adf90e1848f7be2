"""Plain values the aggregator passes between its service, store and release layers."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from operator import itemgetter
from typing import Any, NamedTuple

from aggregator.errors import ServiceError
from ldpcollect.mechanisms import Mechanism


class QueryStatus(enum.IntEnum):
    """Lifecycle: OPEN (rounds 1..n in turn) -> CLOSED -> RELEASED. Values match the proto."""

    OPEN = 1
    CLOSED = 2
    RELEASED = 3


@dataclass(frozen=True)
class QuerySpec:
    """A validated CreateQuery request."""

    query_id: str
    description: str
    mechanism: Mechanism
    scheme: str
    targets: tuple[int, ...]
    min_reports: int
    noise_sigma: Fraction | None
    # Device admission: None, or the issuer name every report's token must be bound to.
    token_issuer: str | None = None


@dataclass(frozen=True)
class QueryInfo:
    """A committed snapshot of one query's public state (safe to read from any thread)."""

    spec: QuerySpec
    status: QueryStatus
    current_round: int
    reports_per_round: tuple[int, ...]
    completed_devices: int
    created_at: float

    @property
    def query_id(self) -> str:
        return self.spec.query_id


class ReportIn(NamedTuple):
    """One device report as received (not yet validated)."""

    query_id: str
    round: int
    pseudonym: bytes
    report_id: bytes
    answers: bytes


class Outcome(NamedTuple):
    """What happened to one report: accepted, duplicate (both durable) or refused (why)."""

    refusal: ServiceError | None = None
    duplicate: bool = False

    @property
    def ok(self) -> bool:
        return self.refusal is None

    @property
    def message(self) -> str:
        return "" if self.refusal is None else self.refusal.message


class Redemption(enum.Enum):
    """What the spent-token store says of one (nonce, report id) of a query."""

    NEW = "new"  # first time: now spent by this report
    SAME_REPORT = "same report"  # spent before by this same report id (a retry): acknowledge
    SPENT = "spent"  # spent by another report: a replay, refuse


ACCEPTED = Outcome()
DUPLICATE = Outcome(duplicate=True)


@dataclass
class SubmitResult:
    """What became of one submission's reports.

    `accepted` (new) and `duplicates` (acknowledged again, counted once) are durable when the
    result is returned; `rejected` lists (index in the submission, outcome) in order.
    """

    accepted: int = 0
    duplicates: int = 0
    rejected: list[tuple[int, Outcome]] = field(default_factory=list)


class TargetRelease(NamedTuple):
    """One target's released estimate (a tuple: a release builds one per target, tens of
    thousands at a time)."""

    location_id: int
    estimate: float
    std_error: float
    ci_low: float
    ci_high: float
    participants: int
    round_counts: tuple[int, ...]


def estimate_columns(estimates: Sequence[TargetRelease]) -> list[list[Any]]:
    """The estimates' fields as columns, in field order (`itemgetter` maps run in C; a
    `zip(*estimates)` over tens of thousands of rows costs several times more)."""
    return [list(map(itemgetter(k), estimates)) for k in range(len(TargetRelease._fields))]


@dataclass(frozen=True)
class ReleaseRecord:
    """A stored release: what the operator gets back, now and on every later request."""

    query_id: str
    participants: int
    released_at: float
    estimates: tuple[TargetRelease, ...]
    # Privacy claims as plain dicts (the PrivacyClaim proto's fields), from the ledger.
    claims: tuple[dict[str, object], ...]
