"""Committed views a store publishes after each transaction, for reads from any thread.

Each publish replaces whole dictionaries, never mutates a published one, so a reader sees one
commit's state or the next, never part of a transaction, and never waits for the writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from aggregator.lifecycle import unknown_query
from aggregator.model import QueryInfo, ReleaseRecord
from aggregator.rounds import QueryState


class Snapshots:
    """The read half of the `Store` interface, over published snapshots."""

    def __init__(self) -> None:
        self._queries: dict[str, QueryInfo] = {}
        self._counts: dict[str, npt.NDArray[np.int64]] = {}
        self._releases: dict[str, ReleaseRecord] = {}
        self._report_counts: dict[str, int] = {}
        self._ledger: str | None = None

    def publish(
        self,
        states: Iterable[QueryState],
        releases: Mapping[str, ReleaseRecord],
        ledger: str | None,
        report_counts: Mapping[str, int],
        gone: Iterable[str] = (),
    ) -> None:
        """Publish the committed state of `states` (the queries a transaction touched), and
        that the queries in `gone` no longer exist (deleted)."""
        queries = dict(self._queries)
        counts = dict(self._counts)
        for state in states:
            queries[state.spec.query_id] = state.snapshot()
            counts[state.spec.query_id] = state.counts.copy()
        for query_id in gone:
            queries.pop(query_id, None)
            counts.pop(query_id, None)
        self._queries = queries
        self._counts = counts
        self._releases = dict(releases)
        self._report_counts = dict(report_counts)
        self._ledger = ledger

    def queries(self) -> list[QueryInfo]:
        return sorted(self._queries.values(), key=lambda q: (q.created_at, q.query_id))

    def query(self, query_id: str) -> QueryInfo | None:
        return self._queries.get(query_id)

    async def current_query(self, query_id: str) -> QueryInfo | None:
        """`query`: a store whose process makes every change publishes each at its commit."""
        return self.query(query_id)

    async def current_queries(self) -> list[QueryInfo]:
        return self.queries()

    def release_of(self, query_id: str) -> ReleaseRecord | None:
        return self._releases.get(query_id)

    def ledger(self) -> str | None:
        return self._ledger

    def stored_report_count(self, query_id: str) -> int:
        return self._report_counts.get(query_id, 0)

    def counts(self, query_id: str) -> npt.NDArray[np.int64]:
        """Committed per-target counts (rounds x targets) over devices that completed."""
        counts = self._counts.get(query_id)
        if counts is None:
            raise unknown_query(query_id)
        return counts.copy()
