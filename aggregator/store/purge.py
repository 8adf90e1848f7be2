"""Deleting a released query's reports from the SQLite file, in steps, after the release.

A release commits its record and ledger at once and forgets the reports in memory; their rows
are deleted here, about `STEP_BYTES` per transaction, while the writer has nothing queued
(starting `PAUSE_S` after the release, so that its reply goes out first). Secure deletion
overwrites every deleted byte, so doing it inside the release would make a release as slow as
the reports it held are large. When a query's rows are all gone the write-ahead log, which
held them too, is checkpointed and truncated. A clean stop finishes the deletion; after a crash
the next start resumes it (the store never reads a released query's reports back).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)

STEP_BYTES = 8 << 20
PAUSE_S = 0.5


class ReleasedReports:
    """Released queries whose reports are still in the file, and the deletion of them."""

    def __init__(
        self, connection: Callable[[], sqlite3.Connection], checkpoint: Callable[[], None]
    ) -> None:
        self._connection = connection
        self._checkpoint = checkpoint
        self._queries: list[str] = []
        self._paused = False  # after a failed step, until the next commit succeeds
        self._start_at = 0.0  # time.monotonic() from which steps may run

    def pending(self) -> bool:
        return bool(self._queries) and not self._paused

    def wait_s(self) -> float:
        """Seconds until the next step may run (0 when it may run now)."""
        return max(0.0, self._start_at - time.monotonic())

    def released(self, query_ids: Iterable[str]) -> None:
        """Queries just released (their transaction committed)."""
        added = [q for q in query_ids if q not in self._queries]
        self._queries += added
        self._paused = False
        if added:
            self._start_at = time.monotonic() + PAUSE_S

    def found(self, query_id: str) -> None:
        """A released query whose reports a crash left in the file (seen at start)."""
        found = self._connection().execute(
            "SELECT 1 FROM reports WHERE query_id = ? LIMIT 1", (query_id,)
        )
        if query_id not in self._queries and found.fetchone() is not None:
            self._queries.append(query_id)

    def step(self) -> None:
        """Delete some of the first query's reports in one transaction, or, when none are
        left, checkpoint and truncate the write-ahead log and move on."""
        conn = self._connection()
        query_id = self._queries[0]
        try:
            rows = conn.execute(
                "SELECT seq, length(report_ids) + length(pseudonyms) + length(answers) "
                "FROM reports WHERE query_id = ? ORDER BY seq LIMIT 1024",
                (query_id,),
            ).fetchall()
            if not rows:
                self._queries.pop(0)
                self._checkpoint()
                return
            chosen: list[int] = []
            size = 0
            for seq, nbytes in rows:
                if chosen and size + nbytes > STEP_BYTES:
                    break
                chosen.append(seq)
                size += nbytes
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                f"DELETE FROM reports WHERE seq IN ({', '.join('?' * len(chosen))})", chosen
            )
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.error("could not delete released reports of %r: %s (retried later)", query_id, exc)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._paused = True

    def finish(self) -> None:
        """Every step now (a clean stop)."""
        while self.pending():
            self.step()
