"""The store interface: what the services need from durable state.

SQLite (`SqliteStore`, the embedded default) and PostgreSQL (`PostgresStore`, several
replicas on one database) implement it (docs/design.md, "Storage"), reusing the rules
(`aggregator.lifecycle`, `aggregator.admission`), the row encoding (`rows`, `release_codec`)
and the published reads (`snapshots`). `tests/aggregator/store_contract.py` is the behaviour
every backend must show.

Every mutating method resolves only after its change is durable (committed), and raises a
refusal (`aggregator.errors`, changing nothing) when the request is refused. Reads return
committed snapshots and never block on the writer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from aggregator.model import QueryInfo, QuerySpec, Redemption, ReleaseRecord, SubmitResult
from aggregator.rounds import ReportColumns

# A release computation: (query, completed-device counts (rounds x targets), ledger JSON or
# None) -> (the release, the ledger JSON after charging it). Runs inside the store's
# transaction; raising a refusal refuses the release and changes nothing.
ReleaseFn = Callable[
    [QueryInfo, npt.NDArray[np.int64], str | None], tuple[ReleaseRecord, str | None]
]
# A ledger update (e.g. set the budget): ledger JSON or None -> new ledger JSON.
LedgerFn = Callable[[str | None], str]


__all__ = ["LedgerFn", "ReleaseFn", "Store", "SubmitResult"]


class Store(Protocol):
    async def open(self) -> None:
        """Load everything from durable state and start accepting work."""

    async def close(self) -> None:
        """Finish queued work, then release resources."""

    def queries(self) -> list[QueryInfo]: ...

    def query(self, query_id: str) -> QueryInfo | None: ...

    async def current_query(self, query_id: str) -> QueryInfo | None:
        """Like `query`, but showing every change committed before the call, whichever
        process made it (several replicas share a PostgreSQL store)."""

    async def current_queries(self) -> list[QueryInfo]:
        """Like `queries`, showing every change committed before the call."""

    def release_of(self, query_id: str) -> ReleaseRecord | None: ...

    def ledger(self) -> str | None: ...

    def stored_report_count(self, query_id: str) -> int:
        """Individual reports still held for a query (0 after its release)."""

    def counts(self, query_id: str) -> npt.NDArray[np.int64]:
        """Committed per-target counts (rounds x targets) over devices that completed every
        round; an unknown query raises `NotFound`."""

    async def submit(self, reports: ReportColumns) -> SubmitResult:
        """Validate, count and persist reports, each as if submitted alone, in order."""

    async def create_query(self, spec: QuerySpec, created_at: float) -> QueryInfo: ...

    async def advance_round(self, query_id: str) -> QueryInfo: ...

    async def close_query(self, query_id: str) -> QueryInfo: ...

    async def delete_query(self, query_id: str) -> tuple[QueryInfo, int]:
        """Delete a query not yet released with its reports (refused once released): the
        query as it was and the individual reports deleted. Its spent admission tokens are
        kept, so none of them counts again if the id is used for a new query."""

    async def release(self, query_id: str, compute: ReleaseFn) -> ReleaseRecord: ...

    async def update_ledger(self, update: LedgerFn) -> str: ...

    async def redeem_tokens(
        self, query_id: str, items: Sequence[tuple[bytes, bytes]]
    ) -> list[Redemption]:
        """Spend admission-token nonces of a query, durably, in order: each (nonce, report id)
        is NEW (now spent by this report), SAME_REPORT (spent before by this report id: a
        retry) or SPENT (by another report: a replay). Replays change nothing."""
