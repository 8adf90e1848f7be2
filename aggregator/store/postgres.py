"""PostgreSQL store: any number of stateless `ldpcollect serve` replicas on one database.

Every decision that two replicas could make differently is made by the database:
- Exactly once: `reports` has UNIQUE (query, report id) and UNIQUE (query, device, round).
  A submission holds its queries' advisory locks shared, reads the stored reports with the
  same ids or devices, applies the one set of rules (`aggregator.admission`) to a
  `QueryState` holding only those, and inserts what it accepted with ON CONFLICT DO NOTHING.
  When fewer rows go in than were accepted, another replica committed one of them first: the
  whole transaction is rolled back and run again, and then sees that report (a duplicate, or
  ALREADY_EXISTS). The reply is sent only after COMMIT.
- No hot rows: counts and progress go to one of `SHARDS` counter rows per query (schema v3:
  one row per shard holding every count as an array), chosen at random, with INSERT ... ON
  CONFLICT DO UPDATE adding the arrays element by element; reads sum them.
- Group commit: groups of new reports that arrive while this replica's group transactions
  are busy share the next one (`GroupCommit`): one lock, one counter upsert and one commit
  for all of them.
- Single flight: advance, close and release take the query's advisory lock exclusively
  (waiting for the submissions in flight) and lock its row FOR UPDATE, then the ledger row;
  every ledger change locks the ledger row. Whichever replica receives a change, it happens
  once; a second release waits, then finds the query released.
- A release stores the result, charges the ledger, deletes the query's reports and merges
  its counter shards, in one transaction.
A replica holds no report: its memory is the published snapshots (`Snapshots`: O(targets)
per query), refreshed after its own transactions, whenever another replica announces a
lifecycle change (LISTEN/NOTIFY), and every `refresh_s` seconds (report counts of others).
`current_query`/`current_queries` (an operator's GetQuery and ListQueries) read the database
instead: every report committed before the call, on any replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from aggregator import lifecycle
from aggregator.admission import PendingChanges, admit
from aggregator.errors import StorageFailure, Unavailable
from aggregator.model import (
    QueryInfo,
    QuerySpec,
    QueryStatus,
    Redemption,
    ReleaseRecord,
    SubmitResult,
)
from aggregator.rounds import Accepted, QueryState, ReportColumns
from aggregator.store import pg_rows, pg_tokens
from aggregator.store.base import LedgerFn, ReleaseFn
from aggregator.store.pg_group_commit import GroupCommit
from aggregator.store.pg_migrations import SCHEMA_NAME, SchemaTooNew, migrate
from aggregator.store.pg_snapshots import ReplicaSnapshots
from aggregator.store.release_codec import release_to_json

log = logging.getLogger(__name__)
T = TypeVar("T")
Conn = Any  # psycopg.AsyncConnection[tuple[Any, ...]]

# A transaction that lost a race (another replica inserted one of its reports first, or a
# deadlock) is run again from the start, up to this many times.
_ATTEMPTS = 8


class CommitObserver(Protocol):
    def observe_commit(self, seconds: float, requests: int, reports: int) -> None: ...


class _Raced(Exception):
    """Another transaction committed a conflicting row first: run this one again."""


def shown_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", url)


class DatabaseUnreachable(OSError):
    """The PostgreSQL database cannot be used; the message names it and what to do."""

    def __init__(self, url: str, cause: BaseException) -> None:
        if isinstance(cause, SchemaTooNew):
            what = str(cause)
        else:
            what = (
                "check that PostgreSQL runs there, that the database exists and that this "
                "user may connect and create tables in it"
            )
        super().__init__(f"cannot use the PostgreSQL database {shown_url(url)}: {what} ({cause})")


# Group transactions a replica runs at once by default (see `PostgresStore`).
_GROUP_FLIGHTS = 2


class PostgresStore(ReplicaSnapshots):
    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int = 4,
        refresh_s: float = 1.0,
        connect_timeout_s: float = 10.0,
        observer: CommitObserver | None = None,
        group_flights: int | None = None,
    ) -> None:
        """`schema`: keep the tables in this schema (created if missing) instead of the
        user's default one; several independent stores can then share one database.
        `group_flights`: transactions of new reports running at once (default: two, or the
        pool's size if smaller); groups arriving meanwhile wait and share the next one
        (`GroupCommit`). Two keep one group's statement running while the other commits;
        more split the waiting reports into smaller transactions, each costing both sides
        their fixed share again (`python -m bench.stores`: 4 flights gave 0.43-0.45 of the
        SQLite process where 2 gave 0.45-0.53, in the same hour)."""
        if schema is not None and not SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema must match {SCHEMA_NAME.pattern}, got {schema!r}")
        connect_kwargs: dict[str, Any] = {"autocommit": True}
        if schema is not None:
            connect_kwargs["options"] = f"-c search_path={schema}"
        super().__init__(url, connect_kwargs, f"ldpcollect_{schema or 'changes'}", refresh_s)
        self._schema = schema
        self._pool_size = pool_size
        self._connect_timeout_s = connect_timeout_s
        self._observer = observer
        self._pool: AsyncConnectionPool[Any] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._group_commit = GroupCommit(
            self._write_groups, _Raced, flights=group_flights or min(pool_size, _GROUP_FLIGHTS)
        )

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self._url,
            min_size=1,
            max_size=self._pool_size,
            kwargs=self._connect_kwargs,
            open=False,
            timeout=self._connect_timeout_s,
        )
        try:
            await pool.open(wait=True, timeout=self._connect_timeout_s)
            async with pool.connection() as conn:
                applied = await migrate(conn, self._schema)
                await self._refresh(conn)
        except (psycopg.Error, PoolTimeout, SchemaTooNew) as exc:
            await pool.close()
            raise DatabaseUnreachable(self._url, exc) from exc
        if applied:
            log.info("applied schema version(s) %s to %s", applied, shown_url(self._url))
        self._pool = pool
        self._listener = asyncio.create_task(self._listen(), name="postgres-refresh")

    async def close(self) -> None:
        await self._group_commit.finish()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    # ------------------------------------------------------------------ writes

    async def submit(self, reports: ReportColumns) -> SubmitResult:
        if len(reports) == 0:
            return SubmitResult()
        started = time.perf_counter()
        done = await self._submit_new_group(reports)
        if done is None:
            done = await self._run(lambda conn: self._admit(conn, reports))
        result, deltas = done
        for delta in deltas:
            self._add(delta)
        self._publish()
        if self._observer is not None:
            self._observer.observe_commit(time.perf_counter() - started, 1, len(reports))
        return result

    async def _submit_new_group(
        self, reports: ReportColumns
    ) -> tuple[SubmitResult, list[QueryState]] | None:
        """The usual case in one round trip: a group of new, valid round-1 reports for one
        query this replica knows to be open. The rules run knowing no stored report; when
        they accept every report and every row is new, that is also the answer knowing all
        of them. None (nothing changed) when any of that does not hold: then `_admit`."""
        query_id = reports.query_ids[0]
        known = self._states.get(query_id)
        if (
            known is None
            or known.status != QueryStatus.OPEN
            or known.current_round != 1
            or reports.query_ids.count(query_id) != len(reports)
        ):
            return None
        state = QueryState.new(known.spec, known.created_at)  # round 1, nothing stored
        changes = PendingChanges()
        result = admit(changes, {query_id: state}, reports)
        if result.accepted != len(reports):
            return None
        accepted = changes.accepted[query_id]
        state.add_completed(accepted)
        stored = await self._group_commit.store(state, accepted)
        return (result, [state]) if stored else None

    async def _write_groups(self, groups: Sequence[tuple[QueryState, Accepted]]) -> bool:
        async with self._connection() as conn:
            return await pg_rows.add_new_group(conn, groups)

    async def _admit(
        self, conn: Conn, reports: ReportColumns
    ) -> tuple[SubmitResult, list[QueryState]]:
        """Admit `reports` in this transaction, knowing the stored reports they concern."""
        query_ids = sorted(set(reports.query_ids))
        await pg_rows.lock_shared(conn, query_ids)
        states = await pg_rows.states_of(conn, query_ids)
        for query_id, state in states.items():
            mine = [i for i, q in enumerate(reports.query_ids) if q == query_id]
            await pg_rows.restore_known(
                conn,
                state,
                [reports.report_ids[i] for i in mine],
                [reports.pseudonyms[i] for i in mine],
            )
        return await self._admit_knowing(conn, states, reports)

    async def _admit_knowing(
        self, conn: Conn, states: dict[str, QueryState], reports: ReportColumns
    ) -> tuple[SubmitResult, list[QueryState]]:
        """Apply the rules to `states` (holding the stored reports they know of) and insert
        what they accept; `_Raced` when a report they did not know was stored already."""
        changes = PendingChanges()
        result = admit(changes, states, reports)
        deltas: list[QueryState] = []
        for query_id, accepted in changes.accepted.items():
            if accepted.count == 0:
                continue
            state = states[query_id]  # its progress and counts start at zero: deltas
            if await pg_rows.insert_accepted(conn, state, accepted) != accepted.count:
                raise _Raced
            state.add_completed(accepted)
            await pg_rows.add_counts(conn, state)
            deltas.append(state)
        return result, deltas

    async def create_query(self, spec: QuerySpec, created_at: float) -> QueryInfo:
        state = QueryState.new(spec, created_at)

        async def work(conn: Conn) -> None:
            cursor = await conn.execute(pg_rows.INSERT_QUERY, pg_rows.query_values(state))
            if cursor.rowcount == 0:
                raise lifecycle.duplicate_query(spec.query_id)
            await self._notify(conn, spec.query_id)

        await self._run(work)
        return self._replace(state)

    async def advance_round(self, query_id: str) -> QueryInfo:
        async def work(conn: Conn) -> QueryState:
            state = await self._locked(conn, query_id)
            lifecycle.advance_round(state)
            await conn.execute(
                "UPDATE queries SET current_round = %s WHERE query_id = %s",
                (state.current_round, query_id),
            )
            await self._notify(conn, query_id)
            return state

        return self._replace(await self._run(work))

    async def close_query(self, query_id: str) -> QueryInfo:
        async def work(conn: Conn) -> QueryState:
            state = await self._locked(conn, query_id)
            lifecycle.close(state)
            await self._set_status(conn, state)
            return state

        return self._replace(await self._run(work))

    async def delete_query(self, query_id: str) -> tuple[QueryInfo, int]:
        async def work(conn: Conn) -> tuple[QueryState, int]:
            state = await self._locked(conn, query_id)
            lifecycle.check_deletable(state)
            cursor = await conn.execute(
                f"DELETE FROM reports WHERE query_no = {pg_rows.QUERY_NO.format('%s')}",
                (query_id,),
            )
            await conn.execute("DELETE FROM count_shards WHERE query_id = %s", (query_id,))
            await conn.execute("DELETE FROM queries WHERE query_id = %s", (query_id,))
            await self._notify(conn, query_id)
            return state, max(int(cursor.rowcount), 0)

        state, deleted = await self._run(work)
        self._states.pop(query_id, None)
        self._generation += 1
        self._publish()
        return state.snapshot(), deleted

    async def release(self, query_id: str, compute: ReleaseFn) -> ReleaseRecord:
        async def work(conn: Conn) -> tuple[QueryState, ReleaseRecord, str | None]:
            state = await self._locked(conn, query_id)
            lifecycle.check_releasable(state)
            ledger = await pg_rows.ledger_body(conn, "FOR UPDATE")
            record, ledger_after = await asyncio.to_thread(
                compute, state.snapshot(), state.counts.copy(), ledger
            )
            await conn.execute(
                "INSERT INTO releases (query_id, released_at, body) VALUES (%s, %s, %s)",
                (query_id, record.released_at, release_to_json(record)),
            )
            if ledger_after is not None:
                await conn.execute("UPDATE ledger SET body = %s WHERE id = 1", (ledger_after,))
            await conn.execute(
                f"DELETE FROM reports WHERE query_no = {pg_rows.QUERY_NO.format('%s')}",
                (query_id,),
            )
            await pg_tokens.forget(conn, query_id)
            await pg_rows.merge_shards(conn, state)
            lifecycle.mark_released(state)
            await self._set_status(conn, state)
            return state, record, ledger_after

        state, record, ledger_after = await self._run(work)
        self._release_records[query_id] = record
        if ledger_after is not None:
            self._ledger_body = ledger_after
        self._replace(state)
        return record

    async def update_ledger(self, update: LedgerFn) -> str:
        async def work(conn: Conn) -> str:
            body = update(await pg_rows.ledger_body(conn, "FOR UPDATE"))
            await conn.execute("UPDATE ledger SET body = %s WHERE id = 1", (body,))
            await self._notify(conn, "")
            return body

        body = await self._run(work)
        self._ledger_body = body
        self._generation += 1
        self._publish()
        return body

    async def redeem_tokens(
        self, query_id: str, items: Sequence[tuple[bytes, bytes]]
    ) -> list[Redemption]:
        if not items:
            return []
        return await self._run(lambda conn: pg_tokens.redeem(conn, query_id, items))

    # ------------------------------------------------------------------ current reads

    async def current_query(self, query_id: str) -> QueryInfo | None:
        """The query as committed now, other replicas' reports included (one statement)."""
        return (await self._current([query_id])).get(query_id)

    async def current_queries(self) -> list[QueryInfo]:
        found = await self._current(None)
        return sorted(found.values(), key=lambda q: (q.created_at, q.query_id))

    async def _current(self, query_ids: list[str] | None) -> dict[str, QueryInfo]:
        if self._pool is None:
            raise Unavailable("the store is not open")
        async with self._connection() as conn:  # one statement, autocommit: one round trip
            return await pg_rows.current(conn, query_ids)

    # ------------------------------------------------------------------ transactions

    async def _run(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """`work` in one transaction, run again when it lost a race; database failures
        become refusals saying that nothing was stored."""
        if self._pool is None:
            raise Unavailable("the store is not open")
        for _ in range(_ATTEMPTS):
            try:
                async with self._transaction() as conn:
                    return await work(conn)
            except _Raced:
                continue
        raise Unavailable("the request kept racing other replicas' changes; retry")

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Conn]:
        async with self._connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Conn]:
        """A pooled connection (autocommit); database failures become refusals saying that
        nothing was stored, and lost races `_Raced`."""
        assert self._pool is not None
        try:
            async with self._pool.connection() as conn:
                yield conn
        except (
            pg_errors.DeadlockDetected,
            pg_errors.SerializationFailure,
            pg_errors.UniqueViolation,
        ) as exc:
            raise _Raced from exc
        except PoolTimeout as exc:
            raise Unavailable(
                "the aggregator cannot reach its database; nothing was stored; retry"
            ) from exc
        except psycopg.OperationalError as exc:
            log.error("database connection failed: %s", exc)
            raise Unavailable(
                f"the aggregator lost its database connection; retry (a retry with the same "
                f"report ids is counted once): {exc}"
            ) from exc
        except psycopg.Error as exc:
            log.error("transaction failed: %s", exc)
            raise StorageFailure(
                f"storage failure, nothing of this request was stored; retry: {exc}"
            ) from exc

    async def _locked(self, conn: Conn, query_id: str) -> QueryState:
        """The query's committed state with its totals, locked for a lifecycle change."""
        state = await pg_rows.locked_state(conn, query_id)
        if state is None:
            raise lifecycle.unknown_query(query_id)
        await pg_rows.add_totals(conn, {query_id: state})
        return state

    async def _set_status(self, conn: Conn, state: QueryState) -> None:
        await conn.execute(
            "UPDATE queries SET status = %s WHERE query_id = %s",
            (int(state.status), state.spec.query_id),
        )
        await self._notify(conn, state.spec.query_id)

    async def _notify(self, conn: Conn, query_id: str) -> None:
        """Tell the other replicas (at commit) that a query or the ledger changed."""
        await conn.execute("SELECT pg_notify(%s, %s)", (self._channel, query_id))
