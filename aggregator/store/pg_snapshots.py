"""A PostgreSQL replica's published reads (`Snapshots`) and how they are kept current.

The replica publishes what its own transactions commit at once (`_add` for a submission's
deltas, `_replace` for a lifecycle change), and rereads every query's committed state in one
REPEATABLE READ transaction whenever another replica announces a change (LISTEN/NOTIFY) and
every `refresh_s` seconds (other replicas' report counts). A reread that overlapped a local
change is run again, so it never undoes one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg

from aggregator.model import QueryInfo, QueryStatus, ReleaseRecord
from aggregator.rounds import QueryState
from aggregator.store import pg_rows
from aggregator.store.snapshots import Snapshots

log = logging.getLogger(__name__)
Conn = Any  # psycopg.AsyncConnection[tuple[Any, ...]]
_ATTEMPTS = 8


class ReplicaSnapshots(Snapshots):
    def __init__(
        self, url: str, connect_kwargs: dict[str, Any], channel: str, refresh_s: float
    ) -> None:
        super().__init__()
        self._url = url
        self._connect_kwargs = connect_kwargs
        self._channel = channel
        self._refresh_s = refresh_s
        # Committed state as last read or written by this replica (published after changes).
        self._states: dict[str, QueryState] = {}
        self._release_records: dict[str, ReleaseRecord] = {}
        self._ledger_body: str | None = None
        self._generation = 0  # bumped by every local change, so a refresh never undoes one

    def _add(self, delta: QueryState) -> None:
        """Add a committed submission's deltas to the published state."""
        state = self._states.get(delta.spec.query_id)
        if state is None:
            return  # not seen yet: the next refresh brings it with these reports
        state.counts += delta.counts
        state.reports_per_round = [
            a + b for a, b in zip(state.reports_per_round, delta.reports_per_round, strict=True)
        ]
        state.completed_devices += delta.completed_devices
        self._generation += 1

    def _replace(self, state: QueryState) -> QueryInfo:
        self._states[state.spec.query_id] = state
        self._generation += 1
        self._publish()
        return state.snapshot()

    def _publish(self) -> None:
        held = {
            query_id: 0 if s.status == QueryStatus.RELEASED else sum(s.reports_per_round)
            for query_id, s in self._states.items()
        }
        gone = [query_id for query_id in self._queries if query_id not in self._states]
        self.publish(self._states.values(), self._release_records, self._ledger_body, held, gone)

    async def _refresh(self, conn: Conn) -> None:
        """Read every query's committed state and publish it (unless a local change
        landed meanwhile: then read again)."""
        for _ in range(_ATTEMPTS):
            generation = self._generation
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                states = await pg_rows.all_states(conn)
                releases = await pg_rows.new_releases(conn, list(self._release_records))
                ledger = await pg_rows.ledger_body(conn)
            if generation == self._generation:
                self._states = states
                self._release_records.update(releases)
                self._ledger_body = ledger
                self._publish()
                return

    async def _listen(self) -> None:
        """Refresh on every change another replica announces, and every `refresh_s`."""
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._url, **self._connect_kwargs
                ) as conn:
                    await conn.execute(f"LISTEN {self._channel}")
                    while True:
                        async for _ in conn.notifies(timeout=self._refresh_s, stop_after=1):
                            pass
                        await self._refresh(conn)
            except psycopg.Error as exc:
                log.warning("refreshing from the database failed (retrying): %s", exc)
                await asyncio.sleep(self._refresh_s)
