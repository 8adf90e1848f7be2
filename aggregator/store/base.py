"""The store interface: what the services need from durable state.

SQLite (`SqliteStore`, the embedded default) implements it; a PostgreSQL store for several
replicas can implement the same methods later (DESIGN.md section 6).

Every mutating method resolves only after its change is durable (committed), and raises
`ServiceError` (changing nothing) when the request is refused. Reads return committed
snapshots and never block on the writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from aggregator.model import Outcome, QueryInfo, QuerySpec, ReleaseRecord
from aggregator.rounds import ReportColumns

# A release computation: (query, completed-device counts (rounds x targets), ledger JSON or
# None) -> (the release, the ledger JSON after charging it). Runs inside the store's
# transaction; raising ServiceError refuses the release and changes nothing.
ReleaseFn = Callable[
    [QueryInfo, npt.NDArray[np.int64], str | None], tuple[ReleaseRecord, str | None]
]
# A ledger update (e.g. set the budget): ledger JSON or None -> new ledger JSON.
LedgerFn = Callable[[str | None], str]


@dataclass
class SubmitResult:
    """What became of one submission's reports.

    `accepted` (new) and `duplicates` (acknowledged again, counted once) are durable when the
    result is returned; `rejected` lists (index in the submission, outcome) in order.
    """

    accepted: int = 0
    duplicates: int = 0
    rejected: list[tuple[int, Outcome]] = field(default_factory=list)


class Store(Protocol):
    async def open(self) -> None:
        """Load everything from durable state and start accepting work."""

    async def close(self) -> None:
        """Finish queued work, then release resources."""

    def queries(self) -> list[QueryInfo]: ...

    def query(self, query_id: str) -> QueryInfo | None: ...

    def release_of(self, query_id: str) -> ReleaseRecord | None: ...

    def ledger(self) -> str | None: ...

    def stored_report_count(self, query_id: str) -> int:
        """Individual reports still held for a query (0 after its release)."""

    async def submit(self, reports: ReportColumns) -> SubmitResult:
        """Validate, count and persist reports, each as if submitted alone, in order."""

    async def create_query(self, spec: QuerySpec, created_at: float) -> QueryInfo: ...

    async def advance_round(self, query_id: str) -> QueryInfo: ...

    async def close_query(self, query_id: str) -> QueryInfo: ...

    async def release(self, query_id: str, compute: ReleaseFn) -> ReleaseRecord: ...

    async def update_ledger(self, update: LedgerFn) -> str: ...
