"""Group commit for the PostgreSQL store: concurrent groups of new reports for one query
share one transaction.

A group (one SubmitBatch's new round-1 reports, already checked by the rules as if nothing
were stored) starts a transaction at once when fewer than `flights` of this replica's group
transactions are running; otherwise it waits, and the next transaction to start takes the
waiting groups of the same query (up to `max_reports`: a cap keeps every flight busy instead
of one taking all, measured with `bench.pg_store_costs`) and writes them with ONE statement:
one lock, one counter upsert, one commit and one round trip for all of them instead of one
each (the database's cost per transaction, and the replica's, are shared).

All or nothing, as for one group: when any row of the combined write is stored already
(another replica, a retry, or two waiting groups sharing a report id or a device) the
transaction changes nothing and every group in it is answered `None`, so that its caller
runs the full rules knowing the stored reports. Each caller is answered after COMMIT.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from aggregator.rounds import Accepted, QueryState

# (group deltas, accepted reports) pairs of one query -> stored (False: the query was not
# open in that round; nothing stored). Raises `raced` when a row was stored already.
Group = tuple[QueryState, Accepted]
WriteFn = Callable[[Sequence[Group]], Awaitable[bool]]


@dataclass
class _Waiting:
    group: Group
    done: asyncio.Future[bool | None]


class GroupCommit:
    def __init__(
        self,
        write: WriteFn,
        raced: type[Exception],
        flights: int,
        max_reports: int = 4_000,
    ) -> None:
        self._write = write
        self._raced = raced
        self._flights = flights
        self._max_reports = max_reports
        self._running = 0
        self.transactions = 0  # written so far, each with one or more groups
        self._waiting: list[_Waiting] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def store(self, state: QueryState, accepted: Accepted) -> bool | None:
        """Write one group (with whatever waits alongside): True stored, False the query was
        not open in that round, None a row was stored already (nothing of it stored)."""
        done: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting((state, accepted), done))
        if self._running < self._flights:
            self._running += 1
            task = asyncio.create_task(self._drain(), name="postgres-group-commit")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await done

    async def finish(self) -> None:
        """Wait until every group handed over so far is answered."""
        while self._tasks:
            await asyncio.gather(*self._tasks)

    async def _drain(self) -> None:
        """Write waiting groups, one transaction at a time, until none waits."""
        try:
            while self._waiting:
                await self._write_some(self._take())
        finally:
            self._running -= 1

    def _take(self) -> list[_Waiting]:
        """The oldest waiting group and those of the same query after it, up to
        `max_reports` reports (the others keep their order)."""
        query_id = self._waiting[0].group[0].spec.query_id
        taken: list[_Waiting] = []
        kept: list[_Waiting] = []
        reports = 0
        for waiting in self._waiting:
            state, accepted = waiting.group
            if state.spec.query_id == query_id and (
                not taken or reports + accepted.count <= self._max_reports
            ):
                taken.append(waiting)
                reports += accepted.count
            else:
                kept.append(waiting)
        self._waiting = kept
        return taken

    async def _write_some(self, taken: list[_Waiting]) -> None:
        outcome: bool | None
        self.transactions += 1
        try:
            outcome = await self._write([w.group for w in taken])
        except asyncio.CancelledError:
            for waiting in taken:  # stopped mid-write: its outcome is unknown to the callers
                waiting.done.cancel()
            raise
        except Exception as exc:
            if not isinstance(exc, self._raced):
                for waiting in taken:
                    if not waiting.done.done():
                        waiting.done.set_exception(exc)
                return
            outcome = None
        for waiting in taken:
            if not waiting.done.done():
                waiting.done.set_result(outcome)
