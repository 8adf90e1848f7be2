"""The helper's part of the secure store: finished jobs (a retried job gets its answer), the
report ids it has seen, and its spent token nonces."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Sequence

from aggregator.errors import FailedPrecondition
from aggregator.secure import spent_tokens
from aggregator.secure.multirow import insert_rows
from aggregator.secure.store_core import RELEASED, StoreCore, select_in


class HelperStore(StoreCore):
    def job_response(self, job_id: bytes) -> bytes | None:
        def work() -> bytes | None:
            row = self.db.execute(
                "SELECT response FROM helper_jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
            return None if row is None else bytes(row[0])

        return self._locked(work)

    def seen_reports(self, query_id: str, report_ids: Sequence[bytes]) -> set[bytes]:
        """Which of `report_ids` a job of the query recorded before (one statement per
        `select_in` chunk, not one per report)."""

        def work() -> set[bytes]:
            rows = select_in(
                self.db,
                "SELECT report_id FROM helper_reports WHERE query_id = ? AND report_id IN ({})",
                (query_id,),
                list(report_ids),
            )
            return {bytes(row[0]) for row in rows}

        return self._locked(work)

    def spent_nonces(self, query_id: str, nonces: Sequence[bytes]) -> set[bytes]:
        """Which of `nonces` this aggregator has spent for the query."""
        return self._locked(lambda: spent_tokens.spent_among(self.db, query_id, nonces))

    def record_job(
        self,
        query_id: str,
        job_id: bytes,
        response: bytes,
        seen: Sequence[bytes],
        accepted: int,
        refused: int,
        merge: Callable[[bytes], bytes],
        spend: Sequence[tuple[bytes, bytes]] = (),
        replayed: Collection[bytes] = frozenset(),
    ) -> bytes:
        """The helper's commit: the answer, the report ids, the aggregate and the spent token
        nonces (nonce, report id); returns the stored answer (an earlier one when the same job
        was recorded meanwhile). `replayed` (the ids found seen before) matters only where
        several helper replicas record at once (`pg_store`); here the handler is alone."""

        def work(db: sqlite3.Connection) -> bytes:
            row = db.execute("SELECT response FROM helper_jobs WHERE job_id = ?", (job_id,))
            earlier = row.fetchone()
            if earlier is not None:
                return bytes(earlier[0])
            query = self._query(db, query_id)
            if query.state == RELEASED:
                raise FailedPrecondition(f"secure query {query_id!r} is already released")
            db.execute(
                "INSERT INTO helper_jobs (job_id, query_id, response) VALUES (?, ?, ?)",
                (job_id, query_id, response),
            )
            insert_rows(
                db,
                "INSERT OR IGNORE INTO helper_reports (query_id, report_id, job_id) VALUES",
                [(query_id, rid, job_id) for rid in seen],
            )
            spent_tokens.spend(db, query_id, spend)
            db.execute(
                "UPDATE secure_queries SET aggregate = ?, aggregated = aggregated + ?, "
                "refused = refused + ? WHERE query_id = ?",
                (merge(query.aggregate), accepted, refused, query_id),
            )
            return response

        return self._locked(lambda: self._transaction(work))
