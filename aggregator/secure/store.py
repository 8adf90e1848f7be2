"""Secure mode's durable state, for either role: queries with this aggregator's aggregate
share, the leader's held reports and aggregation jobs, the helper's finished jobs and seen
report ids (schema in `schema/secure_v2.sql`, `store_migrate`).

One SQLite file per aggregator, beside its main database, WAL with synchronous=FULL: every
mutating method returns only after its transaction is committed, so what it acknowledges
survives SIGKILL and power loss. Calls run in one worker thread (`asyncio.to_thread` under a
lock); the leader's driver is the only writer of aggregates on the leader, the handler on
the helper.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from aggregator.errors import AlreadyExists, FailedPrecondition
from aggregator.secure import spent_tokens
from aggregator.secure.helper_store import HelperStore
from aggregator.secure.multirow import insert_rows
from aggregator.secure.store_core import (
    CLOSED,
    OPEN,
    RELEASED,
    STATE_NAMES,
    HeldReport,
    StoredQuery,
    UploadOutcome,
    secure_db_path,
    select_in,
)

__all__ = [
    "CLOSED",
    "OPEN",
    "RELEASED",
    "STATE_NAMES",
    "HeldReport",
    "SecureStore",
    "StoredQuery",
    "UploadOutcome",
    "secure_db_path",
]


class SecureStore(HelperStore):
    """Both roles' store: queries, release and the ledger here, the leader's held reports
    and jobs below, the helper's jobs in `HelperStore`."""

    # -- queries ----------------------------------------------------------------------------
    def create_query(
        self, query_id: str, params: dict[str, Any], verify_key: bytes, aggregate: bytes
    ) -> StoredQuery:
        def work(db: sqlite3.Connection) -> StoredQuery:
            if db.execute(
                "SELECT 1 FROM secure_queries WHERE query_id = ?", (query_id,)
            ).fetchone():
                raise AlreadyExists(f"secure query {query_id!r} already exists")
            db.execute(
                "INSERT INTO secure_queries (query_id, body, verify_key, state, aggregate) "
                "VALUES (?, ?, ?, ?, ?)",
                (query_id, json.dumps(params, sort_keys=True), verify_key, OPEN, aggregate),
            )
            return self._query(db, query_id)

        return self._locked(lambda: self._transaction(work))

    def provision_query(
        self, query_id: str, params: dict[str, Any], verify_key: bytes, aggregate: bytes
    ) -> None:
        """The helper's copy: the same provisioning again is accepted (the leader retries),
        a different one refused."""

        def work(db: sqlite3.Connection) -> None:
            row = db.execute(
                "SELECT body, verify_key FROM secure_queries WHERE query_id = ?", (query_id,)
            ).fetchone()
            body = json.dumps(params, sort_keys=True)
            if row is None:
                db.execute(
                    "INSERT INTO secure_queries (query_id, body, verify_key, state, aggregate) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (query_id, body, verify_key, OPEN, aggregate),
                )
            elif (row[0], bytes(row[1])) != (body, verify_key):
                raise AlreadyExists(f"secure query {query_id!r} is provisioned differently")

        self._locked(lambda: self._transaction(work))

    def has_query(self, query_id: str) -> bool:
        def work() -> bool:
            found = self.db.execute("SELECT 1 FROM secure_queries WHERE query_id = ?", (query_id,))
            return found.fetchone() is not None

        return self._locked(work)

    def query(self, query_id: str) -> StoredQuery:
        return self._locked(lambda: self._query(self.db, query_id))

    def progress(self, query_id: str) -> tuple[StoredQuery, int]:
        """The query and its count of held reports not yet aggregated or refused, read in one
        transaction: a job that commits meanwhile is either wholly in both or in neither, so
        aggregated + refused + pending never drops below what was acknowledged."""

        def work(db: sqlite3.Connection) -> tuple[StoredQuery, int]:
            query = self._query(db, query_id)
            (pending,) = db.execute(
                "SELECT COUNT(*) FROM secure_held WHERE query_id = ?", (query_id,)
            ).fetchone()
            return query, int(pending)

        return self._locked(lambda: self._snapshot(work))

    def all_progress(self) -> list[tuple[StoredQuery, int]]:
        """`progress` of every query, all in one transaction."""

        def work(db: sqlite3.Connection) -> list[tuple[StoredQuery, int]]:
            sql = "SELECT query_id, COUNT(*) FROM secure_held GROUP BY query_id"
            pending = dict(db.execute(sql).fetchall())
            ids = [r[0] for r in db.execute("SELECT query_id FROM secure_queries ORDER BY 1")]
            return [(self._query(db, i), int(pending.get(i, 0))) for i in ids]

        return self._locked(lambda: self._snapshot(work))

    def queries(self) -> list[StoredQuery]:
        def work(db: sqlite3.Connection) -> list[StoredQuery]:
            ids = [r[0] for r in db.execute("SELECT query_id FROM secure_queries ORDER BY 1")]
            return [self._query(db, i) for i in ids]

        return self._locked(lambda: self._snapshot(work))

    def close_query(self, query_id: str) -> StoredQuery:
        def work(db: sqlite3.Connection) -> StoredQuery:
            query = self._query(db, query_id)
            if query.state == OPEN:
                db.execute(
                    "UPDATE secure_queries SET state = ? WHERE query_id = ?", (CLOSED, query_id)
                )
            return self._query(db, query_id)

        return self._locked(lambda: self._transaction(work))

    def release(
        self,
        query_id: str,
        seal: Callable[[StoredQuery], bytes],
        charge: Callable[[str | None], str] | None = None,
    ) -> bytes:
        """Seal this aggregator's noised share once (and charge the ledger with `charge`, in
        the same transaction); a retry gets the same bytes back and charges nothing."""

        def work(db: sqlite3.Connection) -> bytes:
            query = self._query(db, query_id)
            if query.sealed_share is not None:
                return query.sealed_share
            if charge is not None:
                self._put_ledger(db, charge(self._ledger(db)))
            sealed = seal(query)
            spent_tokens.forget(db, query_id)
            db.execute(
                "UPDATE secure_queries SET state = ?, sealed_share = ? WHERE query_id = ?",
                (RELEASED, sealed, query_id),
            )
            return sealed

        return self._locked(lambda: self._transaction(work))

    # -- leader: the secure ledger -----------------------------------------------------------
    def ledger(self) -> str | None:
        return self._locked(lambda: self._ledger(self.db))

    def update_ledger(self, update: Callable[[str | None], str]) -> str:
        def work(db: sqlite3.Connection) -> str:
            body = update(self._ledger(db))
            self._put_ledger(db, body)
            return body

        return self._locked(lambda: self._transaction(work))

    @staticmethod
    def _ledger(db: sqlite3.Connection) -> str | None:
        row = db.execute("SELECT body FROM secure_ledger WHERE id = 1").fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _put_ledger(db: sqlite3.Connection, body: str) -> None:
        db.execute("INSERT OR REPLACE INTO secure_ledger (id, body) VALUES (1, ?)", (body,))

    # -- leader: held reports and jobs -------------------------------------------------------
    def hold_reports(
        self, query_id: str, reports: Sequence[tuple[bytes, bytes, bytes, bytes]]
    ) -> list[str]:
        """Durably hold (report id, encoded report, opened leader share, checked token or
        b"") for a query that must be open; per report NEW, DUPLICATE (same bytes again),
        CONFLICT (same id, other bytes: refused) or TOKEN_SPENT (its token's nonce spent by
        another report: refused). A NEW report's nonce is spent in the same transaction.

        A NEW report is written once: its id and digest to `secure_reports` (kept), its bytes
        to `secure_held` (until its job is finished)."""

        def work(db: sqlite3.Connection) -> list[str]:
            if self._query(db, query_id).state != OPEN:
                raise FailedPrecondition(f"secure query {query_id!r} is not open")
            known: dict[bytes, bytes] = {
                bytes(rid): bytes(digest)
                for rid, digest in select_in(
                    db,
                    "SELECT report_id, digest FROM secure_reports WHERE query_id = ? "
                    "AND report_id IN ({})",
                    (query_id,),
                    [r[0] for r in reports],
                )
            }
            spent_here: dict[bytes, bytes] = {}  # nonce -> report id, spent by this call

            def spender(nonce: bytes) -> bytes | None:
                if nonce in spent_here:
                    return spent_here[nonce]
                return spent_tokens.spender(db, query_id, nonce)

            outcomes = []
            digests, held = [], []
            for report_id, body, share, token in reports:
                nonce = spent_tokens.nonce_of(token) if token else b""
                spent_by = spender(nonce) if nonce else None
                if spent_by not in (None, report_id):
                    outcomes.append(UploadOutcome.TOKEN_SPENT)
                    continue
                digest = hashlib.sha256(body).digest()
                earlier = known.get(report_id)
                if earlier is not None:
                    same = earlier == digest
                    outcomes.append(UploadOutcome.DUPLICATE if same else UploadOutcome.CONFLICT)
                    continue
                known[report_id] = digest
                digests.append((query_id, report_id, digest))
                held.append((query_id, report_id, body, share, token or None))
                if nonce and spent_by is None:
                    spent_here[nonce] = report_id
                outcomes.append(UploadOutcome.NEW)
            insert_rows(
                db, "INSERT INTO secure_reports (query_id, report_id, digest) VALUES", digests
            )
            insert_rows(
                db,
                "INSERT INTO secure_held (query_id, report_id, body, leader_share, token) VALUES",
                held,
            )
            spent_tokens.spend(db, query_id, [(n, rid) for n, rid in spent_here.items()])
            return outcomes

        return self._locked(lambda: self._transaction(work))

    def claim_job(
        self, query_id: str, limit: int, new_job_id: bytes, busy: frozenset[bytes] = frozenset()
    ) -> tuple[bytes, list[HeldReport]] | None:
        """An unfinished job of the query not in `busy` (after a restart: the same job id and
        reports as before), else a new job of up to `limit` held reports (one statement: a
        job is a range of the query's held reports, which are not rewritten); None when
        nothing is pending outside `busy`."""

        def work(db: sqlite3.Connection) -> tuple[bytes, list[HeldReport]] | None:
            free = [
                (bytes(job), lo, hi)
                for job, lo, hi in db.execute(
                    "SELECT job_id, lo, hi FROM secure_jobs WHERE query_id = ? ORDER BY hi",
                    (query_id,),
                )
                if bytes(job) not in busy
            ]
            if free:
                job_id, lo, hi = free[0]
            else:
                row = db.execute(
                    "INSERT INTO secure_jobs (job_id, query_id, lo, hi) "
                    "SELECT ?, ?, MIN(seq), MAX(seq) FROM (SELECT seq FROM secure_held "
                    "WHERE query_id = ? AND seq > (SELECT COALESCE(MAX(hi), 0) FROM secure_jobs "
                    "WHERE query_id = ?) ORDER BY seq LIMIT ?) HAVING COUNT(*) > 0 "
                    "RETURNING lo, hi",
                    (new_job_id, query_id, query_id, query_id, limit),
                ).fetchone()
                if row is None:
                    return None
                job_id, (lo, hi) = new_job_id, row
            held = [
                HeldReport(bytes(r[0]), bytes(r[1]), bytes(r[2]), bytes(r[3] or b""))
                for r in db.execute(
                    "SELECT report_id, body, leader_share, token FROM secure_held "
                    "WHERE query_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                    (query_id, lo, hi),
                )
            ]
            return (job_id, held) if held else None

        return self._locked(lambda: self._transaction(work))

    def finish_job(
        self,
        query_id: str,
        job_id: bytes,
        outcomes: Sequence[tuple[bytes, str]],
        merge: Callable[[bytes], bytes],
    ) -> None:
        """In one transaction: the job's reports dropped (one statement), the job with them,
        and the aggregate share replaced by `merge(old)` with the counts of `outcomes` ('' for
        aggregated, else the refusal). A job finished before changes nothing (idempotent)."""

        def work(db: sqlite3.Connection) -> None:
            query = self._query(db, query_id)
            job = db.execute(
                "SELECT lo, hi FROM secure_jobs WHERE job_id = ? AND query_id = ?",
                (job_id, query_id),
            ).fetchone()
            if job is None:
                return  # finished before (a job is counted once, whoever finishes it again)
            dropped = db.execute(
                "DELETE FROM secure_held WHERE query_id = ? AND seq BETWEEN ? AND ?",
                (query_id, *job),
            ).rowcount
            if dropped != len(outcomes):
                raise RuntimeError(
                    f"job holds {dropped} open reports but {len(outcomes)} outcomes came"
                )
            db.execute("DELETE FROM secure_jobs WHERE job_id = ?", (job_id,))
            accepted = sum(1 for _, outcome in outcomes if not outcome)
            db.execute(
                "UPDATE secure_queries SET aggregate = ?, aggregated = aggregated + ?, "
                "refused = refused + ? WHERE query_id = ?",
                (merge(query.aggregate), accepted, len(outcomes) - accepted, query_id),
            )

        self._locked(lambda: self._transaction(work))

    def let_go(self, job_id: bytes) -> None:
        """Nothing to do: one process drives this file's jobs (its driver's busy set)."""

    def pending(self, query_id: str | None = None) -> dict[str, int]:
        """Held reports not yet aggregated or refused, per query."""

        def work() -> dict[str, int]:
            sql = "SELECT query_id, COUNT(*) FROM secure_held"
            args: tuple[str, ...] = ()
            if query_id is not None:
                sql += " WHERE query_id = ?"
                args = (query_id,)
            return {r[0]: int(r[1]) for r in self.db.execute(sql + " GROUP BY query_id", args)}

        return self._locked(work)
