"""Secure mode's durable state in PostgreSQL: any number of replicas of one role (leaders, or
helpers) on one database, with the same methods and semantics as the SQLite
`store.SecureStore` (`store_api.SecureStoreApi`).

The tables are in a schema of the role's own (`ldpcollect_secure_leader` or
`ldpcollect_secure_helper`, `schema/secure_pg_v*.sql`, applied once under an advisory lock),
so they sit beside the trusted mode's tables, and a leader and a helper may even share a
database (two operators would not). Every mutating method is one transaction, committed
before it returns; one that loses a deadlock or serialization race runs again from the start.

What several replicas could decide differently is decided by the database:
- Held reports: (query, report id) is the primary key and a nonce's (query, nonce) too;
  INSERT ... ON CONFLICT DO NOTHING makes a report new at exactly one replica, and the others
  compare digests (duplicate or conflict) after it commits. Uploads hold the query row
  FOR SHARE, so a close waits for them and none is held after it.
- Aggregation jobs: a replica claims a job by holding a session-level advisory lock on its
  id on a connection of its own, taken before the job's reports are assigned (new job) or
  before its reports are read back (a job left unfinished). The lock lasts until the job is
  finished or the replica's connection ends: a SIGKILLed replica's jobs are free at once,
  and another replica resumes them with the same id and reports (the helper answers a
  retried id from its record). Finishing locks the query row and finishes only reports still
  open in the job, so a job is counted once even if two replicas ever finished it.
- The helper's job record is inserted once (ON CONFLICT DO NOTHING); a replica that verified
  the same job meanwhile returns the stored answer. A report id or nonce another job recorded
  meanwhile rolls the record back (UNAVAILABLE: the leader retries and the ids are REPLAY).
- Release locks the query row: the share is sealed once, a concurrent or retried release
  gets the same bytes; ledger changes hold the ledger's advisory lock.
- `progress` and `all_progress` read in one REPEATABLE READ transaction.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import threading
import zlib
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from importlib import resources
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from aggregator.errors import AlreadyExists, FailedPrecondition, Unavailable
from aggregator.secure import spent_tokens
from aggregator.secure.store_core import (
    CLOSED,
    OPEN,
    QUERY_COLUMNS,
    RELEASED,
    HeldReport,
    StoredQuery,
    UploadOutcome,
)
from aggregator.store.pg_migrations import SchemaTooNew
from aggregator.store.postgres import DatabaseUnreachable, shown_url
from ldpcollect.secure.sealing import HpkeKeyPair, generate_key_pair

log = logging.getLogger(__name__)
T = TypeVar("T")
Conn = psycopg.Connection[tuple[Any, ...]]

# Advisory lock keys (two-key form): the first names the lock's kind ("ldps" + a letter).
_MIGRATION_LOCK = 0x6C647073
_JOB_LOCKS = 0x6C64704A  # "ldpJ": a claimed aggregation job (session level)
_LEDGER_LOCK = 0x6C64704C  # "ldpL": the secure ledger (transaction level)
_ATTEMPTS = 8
_RACES = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
ROLE_SCHEMAS = {"leader": "ldpcollect_secure_leader", "helper": "ldpcollect_secure_helper"}


def schema_for(role: str) -> str:
    if role not in ROLE_SCHEMAS:
        raise ValueError(f"role must be one of {sorted(ROLE_SCHEMAS)}, got {role!r}")
    return ROLE_SCHEMAS[role]


def _job_key(job_id: bytes) -> int:
    """The job's advisory lock key: 32 bits of its id (two jobs sharing one only wait)."""
    return zlib.crc32(job_id) - (1 << 31)


def _scripts() -> list[tuple[int, str]]:
    files = resources.files("aggregator.secure").joinpath("schema")
    return sorted(
        (int(entry.name[len("secure_pg_v") : -len(".sql")]), entry.read_text("utf-8"))
        for entry in files.iterdir()
        if entry.name.startswith("secure_pg_v") and entry.name.endswith(".sql")
    )


def schema_versions() -> list[int]:
    """The secure schema versions this ldpcollect ships."""
    return [version for version, _ in _scripts()]


def migrate(conn: Conn, schema: str) -> list[int]:
    """Create or upgrade `schema`'s secure tables (replicas starting together: one applies
    each version, the others wait, then find it done); the versions applied now."""
    known = _scripts()
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_MIGRATION_LOCK, schema))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS secure_migrations (version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        applied = {int(r[0]) for r in conn.execute("SELECT version FROM secure_migrations")}
        newest = max(version for version, _ in known)
        if applied and max(applied) > newest:
            raise SchemaTooNew(
                f"the database's {schema} has secure schema version {max(applied)}, newer "
                f"than this ldpcollect knows ({newest}): upgrade ldpcollect on this replica"
            )
        for version, script in known:
            if version not in applied:
                conn.execute(script.encode())
                conn.execute("INSERT INTO secure_migrations (version) VALUES (%s)", (version,))
                applied_now.append(version)
    return applied_now


class PostgresSecureStore:
    def __init__(self, url: str, role: str, pool_size: int = 4, connect_timeout_s: float = 10.0):
        self.url, self.role, self.schema = url, role, schema_for(role)
        self.pool_size, self.connect_timeout_s = pool_size, connect_timeout_s
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "options": f"-c search_path={self.schema}",
            "connect_timeout": max(1, int(connect_timeout_s)),
        }
        self._pool: ConnectionPool[Conn] | None = None
        # Claimed jobs' advisory locks live on a connection of their own (session level).
        self._locks_lock = threading.Lock()
        self._locks: Conn | None = None
        self._held: set[bytes] = set()

    @property
    def name(self) -> str:
        return shown_url(self.url)

    # -- connections --------------------------------------------------------------------------
    def open(self) -> None:
        """Migrate and connect; an unusable database raises `DatabaseUnreachable` naming it."""
        pool: ConnectionPool[Conn] = ConnectionPool(
            self.url,
            min_size=1,
            max_size=self.pool_size,
            kwargs=self._kwargs,
            timeout=self.connect_timeout_s,
            open=False,
        )
        try:
            with psycopg.connect(self.url, **self._kwargs) as conn:
                migrate(conn, self.schema)
            pool.open(wait=True, timeout=self.connect_timeout_s)
        except (psycopg.Error, PoolTimeout, SchemaTooNew) as exc:
            pool.close()
            raise DatabaseUnreachable(self.url, exc) from None
        self._pool = pool

    def close(self) -> None:
        with self._locks_lock:
            if self._locks is not None:
                self._locks.close()  # the claimed jobs' locks go with the session
                self._locks = None
            self._held.clear()
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        if self._pool is None:
            raise RuntimeError("the secure store is not open")
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise Unavailable(f"no connection to {self.name} is free: retry shortly") from exc
        except _RACES:
            raise  # a deadlock or serialization race: `_transaction` runs it again
        except psycopg.OperationalError as exc:
            raise Unavailable(f"the database {self.name} failed ({exc}): retry shortly") from exc

    def _transaction(self, work: Callable[[Conn], T]) -> T:
        """`work` in one transaction, run again when it lost a deadlock or serialization."""
        for attempt in range(_ATTEMPTS):
            try:
                with self._connection() as conn, conn.transaction():
                    return work(conn)
            except _RACES:
                if attempt == _ATTEMPTS - 1:
                    raise
                log.debug("secure store transaction raced; running it again")
        raise AssertionError("unreachable")

    def _snapshot(self, work: Callable[[Conn], T]) -> T:
        """`work`'s reads in one REPEATABLE READ transaction: one consistent state."""
        with self._connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return work(conn)

    def _read(self, work: Callable[[Conn], T]) -> T:
        with self._connection() as conn:
            return work(conn)

    # -- the key pair ---------------------------------------------------------------------------
    def load_key_pair(self, role: str, main_db: str) -> HpkeKeyPair:
        """The role's key pair in the database: the first replica creates it, every replica
        reads the same one (`main_db` is not used: the key is not kept in a file)."""
        fresh = generate_key_pair(secrets.randbelow(256))

        def work(conn: Conn) -> HpkeKeyPair:
            conn.execute(
                "INSERT INTO secure_hpke_key (id, config_id, private_key) VALUES (1, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (fresh.config.config_id, fresh.private_bytes()),
            )
            row = conn.execute("SELECT config_id, private_key FROM secure_hpke_key").fetchone()
            assert row is not None
            return HpkeKeyPair.from_private_bytes(int(row[0]), bytes(row[1]))

        return self._transaction(work)

    # -- queries --------------------------------------------------------------------------------
    @staticmethod
    def _query(conn: Conn, query_id: str, lock: str = "") -> StoredQuery:
        row = conn.execute(
            f"SELECT {QUERY_COLUMNS} FROM secure_queries WHERE query_id = %s {lock}",
            (query_id,),
        ).fetchone()
        return StoredQuery.from_row(query_id, row)

    def create_query(
        self, query_id: str, params: dict[str, Any], verify_key: bytes, aggregate: bytes
    ) -> StoredQuery:
        def work(conn: Conn) -> StoredQuery:
            created = conn.execute(
                "INSERT INTO secure_queries (query_id, body, verify_key, state, aggregate) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (query_id) DO NOTHING RETURNING 1",
                (query_id, json.dumps(params, sort_keys=True), verify_key, OPEN, aggregate),
            ).fetchone()
            if created is None:
                raise AlreadyExists(f"secure query {query_id!r} already exists")
            return self._query(conn, query_id)

        return self._transaction(work)

    def provision_query(
        self, query_id: str, params: dict[str, Any], verify_key: bytes, aggregate: bytes
    ) -> None:
        body = json.dumps(params, sort_keys=True)

        def work(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO secure_queries (query_id, body, verify_key, state, aggregate) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (query_id) DO NOTHING",
                (query_id, body, verify_key, OPEN, aggregate),
            )
            row = conn.execute(
                "SELECT body, verify_key FROM secure_queries WHERE query_id = %s", (query_id,)
            ).fetchone()
            assert row is not None
            if (row[0], bytes(row[1])) != (body, verify_key):
                raise AlreadyExists(f"secure query {query_id!r} is provisioned differently")

        self._transaction(work)

    def has_query(self, query_id: str) -> bool:
        return self._read(
            lambda conn: (
                conn.execute(
                    "SELECT 1 FROM secure_queries WHERE query_id = %s", (query_id,)
                ).fetchone()
                is not None
            )
        )

    def query(self, query_id: str) -> StoredQuery:
        return self._read(lambda conn: self._query(conn, query_id))

    def progress(self, query_id: str) -> tuple[StoredQuery, int]:
        def work(conn: Conn) -> tuple[StoredQuery, int]:
            query = self._query(conn, query_id)
            row = conn.execute(
                "SELECT COUNT(*) FROM secure_reports WHERE query_id = %s AND outcome IS NULL",
                (query_id,),
            ).fetchone()
            assert row is not None
            return query, int(row[0])

        return self._snapshot(work)

    def all_progress(self) -> list[tuple[StoredQuery, int]]:
        def work(conn: Conn) -> list[tuple[StoredQuery, int]]:
            pending = {
                str(r[0]): int(r[1])
                for r in conn.execute(
                    "SELECT query_id, COUNT(*) FROM secure_reports WHERE outcome IS NULL "
                    "GROUP BY query_id"
                )
            }
            return [(q, pending.get(q.query_id, 0)) for q in self._all(conn)]

        return self._snapshot(work)

    def _all(self, conn: Conn) -> list[StoredQuery]:
        ids = [str(r[0]) for r in conn.execute("SELECT query_id FROM secure_queries ORDER BY 1")]
        return [self._query(conn, i) for i in ids]

    def queries(self) -> list[StoredQuery]:
        return self._snapshot(self._all)

    def close_query(self, query_id: str) -> StoredQuery:
        """Waits for uploads in flight (they hold the row FOR SHARE): none is held after."""

        def work(conn: Conn) -> StoredQuery:
            conn.execute(
                "UPDATE secure_queries SET state = %s WHERE query_id = %s AND state = %s",
                (CLOSED, query_id, OPEN),
            )
            return self._query(conn, query_id)

        return self._transaction(work)

    def release(
        self,
        query_id: str,
        seal: Callable[[StoredQuery], bytes],
        charge: Callable[[str | None], str] | None = None,
    ) -> bytes:
        def work(conn: Conn) -> bytes:
            query = self._query(conn, query_id, "FOR UPDATE")
            if query.sealed_share is not None:
                return query.sealed_share
            if charge is not None:
                self._put_ledger(conn, charge(self._ledger(conn, lock=True)))
            sealed = seal(query)
            conn.execute("DELETE FROM secure_spent_tokens WHERE query_id = %s", (query_id,))
            conn.execute(
                "UPDATE secure_queries SET state = %s, sealed_share = %s WHERE query_id = %s",
                (RELEASED, sealed, query_id),
            )
            return sealed

        return self._transaction(work)

    # -- the ledger -----------------------------------------------------------------------------
    def ledger(self) -> str | None:
        return self._read(lambda conn: self._ledger(conn))

    def update_ledger(self, update: Callable[[str | None], str]) -> str:
        def work(conn: Conn) -> str:
            body = update(self._ledger(conn, lock=True))
            self._put_ledger(conn, body)
            return body

        return self._transaction(work)

    @staticmethod
    def _ledger(conn: Conn, lock: bool = False) -> str | None:
        if lock:  # every change of the ledger holds this, so no two replicas interleave
            conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LEDGER_LOCK,))
        row = conn.execute("SELECT body FROM secure_ledger WHERE id = 1").fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _put_ledger(conn: Conn, body: str) -> None:
        conn.execute(
            "INSERT INTO secure_ledger (id, body) VALUES (1, %s) "
            "ON CONFLICT (id) DO UPDATE SET body = excluded.body",
            (body,),
        )

    # -- leader: held reports ---------------------------------------------------------------------
    def hold_reports(
        self, query_id: str, reports: Sequence[tuple[bytes, bytes, bytes, bytes]]
    ) -> list[str]:
        # In report id order (stable: a repeated id's first copy comes first), so two
        # replicas holding overlapping batches wait for each other rather than deadlock.
        order = sorted(range(len(reports)), key=lambda i: reports[i][0])

        def work(conn: Conn) -> list[str]:
            if self._query(conn, query_id, "FOR SHARE").state != OPEN:
                raise FailedPrecondition(f"secure query {query_id!r} is not open")
            outcomes = [""] * len(reports)
            for i in order:
                outcomes[i] = self._hold_one(conn, query_id, *reports[i])
            return outcomes

        return self._transaction(work)

    @staticmethod
    def _hold_one(
        conn: Conn, query_id: str, report_id: bytes, body: bytes, share: bytes, token: bytes
    ) -> str:
        nonce = spent_tokens.nonce_of(token) if token else b""
        spent_now = False
        if nonce:
            spent_now = (
                conn.execute(
                    "INSERT INTO secure_spent_tokens (query_id, nonce, report_id) "
                    "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                    (query_id, nonce, report_id),
                ).fetchone()
                is not None
            )
            if not spent_now:
                row = conn.execute(
                    "SELECT report_id FROM secure_spent_tokens WHERE query_id = %s AND nonce = %s",
                    (query_id, nonce),
                ).fetchone()
                if row is not None and bytes(row[0]) != report_id:
                    return UploadOutcome.TOKEN_SPENT
        digest = hashlib.sha256(body).digest()
        inserted = conn.execute(
            "INSERT INTO secure_reports (query_id, report_id, digest, body, leader_share, token)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
            (query_id, report_id, digest, body, share, token or None),
        ).fetchone()
        if inserted is not None:
            return UploadOutcome.NEW
        if spent_now:  # the report was held before: as in SQLite, this upload spends nothing
            conn.execute(
                "DELETE FROM secure_spent_tokens WHERE query_id = %s AND nonce = %s",
                (query_id, nonce),
            )
        row = conn.execute(
            "SELECT digest FROM secure_reports WHERE query_id = %s AND report_id = %s",
            (query_id, report_id),
        ).fetchone()
        assert row is not None
        return UploadOutcome.DUPLICATE if bytes(row[0]) == digest else UploadOutcome.CONFLICT

    def pending(self, query_id: str | None = None) -> dict[str, int]:
        text = "SELECT query_id, COUNT(*) FROM secure_reports WHERE outcome IS NULL"
        args: tuple[str, ...] = ()
        if query_id is not None:
            text += " AND query_id = %s"
            args = (query_id,)
        return self._read(
            lambda conn: {
                str(r[0]): int(r[1]) for r in conn.execute(text + " GROUP BY query_id", args)
            }
        )

    # -- leader: jobs -----------------------------------------------------------------------------
    def _lock_connection(self) -> Conn:
        """The claims' connection (under `_locks_lock`), opened again after it broke."""
        if self._locks is not None and self._locks.broken:
            self._locks.close()
            self._locks, self._held = None, set()
        if self._locks is None:
            self._locks = psycopg.connect(self.url, **self._claims_kwargs())
        return self._locks

    def _claims_kwargs(self) -> dict[str, Any]:
        """TCP keepalives both ways on the claims' connection: its session, and the jobs'
        locks with it, must end within about 25 s when this replica's host dies or is cut off
        (the server would otherwise notice only after the kernel's 2-hour default)."""
        probes = "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"
        return {
            **self._kwargs,
            "options": f"{self._kwargs['options']} {probes}",
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
        }

    def _try_lock(self, job_id: bytes) -> bool:
        """Claim `job_id` for this store (True also when it holds it already)."""
        with self._locks_lock:
            if job_id in self._held:
                return True
            try:
                row = (
                    self._lock_connection()
                    .execute("SELECT pg_try_advisory_lock(%s, %s)", (_JOB_LOCKS, _job_key(job_id)))
                    .fetchone()
                )
            except psycopg.OperationalError as exc:
                raise Unavailable(f"the database {self.name} failed ({exc})") from exc
            if row is None or not row[0]:
                return False
            self._held.add(job_id)
            return True

    def _unlock(self, job_id: bytes) -> None:
        with self._locks_lock:
            if job_id not in self._held:
                return
            self._held.discard(job_id)
            if self._locks is not None and not self._locks.broken:
                # (a session that is gone took its locks with it)
                with contextlib.suppress(psycopg.OperationalError):
                    self._locks.execute(
                        "SELECT pg_advisory_unlock(%s, %s)", (_JOB_LOCKS, _job_key(job_id))
                    )

    def let_go(self, job_id: bytes) -> None:
        """Release the job's claim (its attempt failed, e.g. no helper answered): any
        replica, this one included, may claim it again with the same id and reports."""
        self._unlock(job_id)

    @staticmethod
    def _job_reports(conn: Conn, query_id: str, job_id: bytes) -> list[HeldReport]:
        return [
            HeldReport(bytes(r[0]), bytes(r[1]), bytes(r[2]), bytes(r[3] or b""))
            for r in conn.execute(
                "SELECT report_id, body, leader_share, token FROM secure_reports "
                "WHERE query_id = %s AND job_id = %s AND outcome IS NULL ORDER BY report_id",
                (query_id, job_id),
            )
        ]

    def claim_job(
        self, query_id: str, limit: int, new_job_id: bytes, busy: frozenset[bytes] = frozenset()
    ) -> tuple[bytes, list[HeldReport]] | None:
        """An unfinished job not in `busy` that no other replica holds (one this store
        claimed before, or one a dead replica left: the same id and reports), else a new job
        of up to `limit` held reports no job holds; None when there is neither. The job's
        lock is held until `finish_job` (or the store's session ends)."""
        unfinished = self._read(
            lambda conn: [
                bytes(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT job_id FROM secure_reports WHERE query_id = %s "
                    "AND outcome IS NULL AND job_id IS NOT NULL",
                    (query_id,),
                )
            ]
        )
        for job_id in unfinished:
            if job_id in busy or not self._try_lock(job_id):
                continue
            held = self._read(partial(self._job_reports, query_id=query_id, job_id=job_id))
            if held:
                return job_id, held
            self._unlock(job_id)  # finished by its owner since the list was read
        if not self._try_lock(new_job_id):
            return None

        def assign(conn: Conn) -> list[HeldReport]:
            # Materialized: the LIMIT applies once (a subquery under IN may be run again).
            conn.execute(
                "WITH picked AS MATERIALIZED (SELECT report_id FROM secure_reports "
                "WHERE query_id = %s AND outcome IS NULL AND job_id IS NULL "
                "ORDER BY report_id LIMIT %s FOR UPDATE SKIP LOCKED) "
                "UPDATE secure_reports AS r SET job_id = %s FROM picked "
                "WHERE r.query_id = %s AND r.report_id = picked.report_id",
                (query_id, limit, new_job_id, query_id),
            )
            return self._job_reports(conn, query_id, new_job_id)

        try:
            held = self._transaction(assign)
        except BaseException:
            self._unlock(new_job_id)
            raise
        if not held:
            self._unlock(new_job_id)
            return None
        return new_job_id, held

    def finish_job(
        self,
        query_id: str,
        job_id: bytes,
        outcomes: Sequence[tuple[bytes, str]],
        merge: Callable[[bytes], bytes],
    ) -> None:
        def work(conn: Conn) -> None:
            query = self._query(conn, query_id, "FOR UPDATE")
            row = conn.execute(
                "SELECT COUNT(*) FROM secure_reports WHERE query_id = %s AND job_id = %s "
                "AND outcome IS NULL",
                (query_id, job_id),
            ).fetchone()
            assert row is not None
            open_reports = int(row[0])
            if open_reports == 0:
                return  # finished before: a job is counted once
            if open_reports != len(outcomes):
                raise RuntimeError(
                    f"job holds {open_reports} open reports but {len(outcomes)} outcomes came"
                )
            accepted = sum(1 for _, outcome in outcomes if not outcome)
            with conn.cursor() as cursor:
                cursor.executemany(
                    "UPDATE secure_reports SET outcome = %s, body = NULL, leader_share = NULL, "
                    "token = NULL, job_id = NULL WHERE query_id = %s AND report_id = %s "
                    "AND job_id = %s",
                    [(outcome, query_id, rid, job_id) for rid, outcome in outcomes],
                )
            conn.execute(
                "UPDATE secure_queries SET aggregate = %s, aggregated = aggregated + %s, "
                "refused = refused + %s WHERE query_id = %s",
                (merge(query.aggregate), accepted, len(outcomes) - accepted, query_id),
            )

        try:
            self._transaction(work)
        finally:
            self._unlock(job_id)

    # -- helper -----------------------------------------------------------------------------------
    def job_response(self, job_id: bytes) -> bytes | None:
        row = self._read(
            lambda conn: conn.execute(
                "SELECT response FROM helper_jobs WHERE job_id = %s", (job_id,)
            ).fetchone()
        )
        return None if row is None else bytes(row[0])

    def seen_reports(self, query_id: str, report_ids: Sequence[bytes]) -> set[bytes]:
        return self._read(
            lambda conn: {
                bytes(r[0])
                for r in conn.execute(
                    "SELECT report_id FROM helper_reports WHERE query_id = %s "
                    "AND report_id = ANY(%s)",
                    (query_id, list(report_ids)),
                )
            }
        )

    def spent_nonces(self, query_id: str, nonces: Sequence[bytes]) -> set[bytes]:
        return self._read(
            lambda conn: {
                bytes(r[0])
                for r in conn.execute(
                    "SELECT nonce FROM secure_spent_tokens WHERE query_id = %s AND nonce = ANY(%s)",
                    (query_id, list(nonces)),
                )
            }
        )

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
        """`replayed`: the ids the handler found seen before (refused as REPLAY); any other
        id of `seen` recorded by another job meanwhile rolls this record back."""

        def work(conn: Conn) -> bytes:
            recorded = conn.execute(
                "INSERT INTO helper_jobs (job_id, query_id, response) VALUES (%s, %s, %s) "
                "ON CONFLICT (job_id) DO NOTHING RETURNING 1",
                (job_id, query_id, response),
            ).fetchone()
            if recorded is None:  # another replica recorded this job first: its answer
                row = conn.execute(
                    "SELECT response FROM helper_jobs WHERE job_id = %s", (job_id,)
                ).fetchone()
                assert row is not None
                return bytes(row[0])
            query = self._query(conn, query_id, "FOR UPDATE")
            if query.state == RELEASED:
                raise FailedPrecondition(f"secure query {query_id!r} is already released")
            ids = list(dict.fromkeys(seen))
            taken = {
                bytes(r[0])
                for r in conn.execute(
                    "INSERT INTO helper_reports (query_id, report_id, job_id) "
                    "SELECT %s, r, %s FROM unnest(%s::bytea[]) AS r ON CONFLICT DO NOTHING "
                    "RETURNING report_id",
                    (query_id, job_id, ids),
                )
            }
            spent = conn.execute(
                "INSERT INTO secure_spent_tokens (query_id, nonce, report_id) "
                "SELECT %s, n, r FROM unnest(%s::bytea[], %s::bytea[]) AS t(n, r) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (query_id, [n for n, _ in spend], [r for _, r in spend]),
            ).fetchall()
            if set(ids) - taken - set(replayed) or len(spent) != len(spend):
                raise Unavailable(
                    f"job {job_id.hex()}: another job recorded some of its report ids or "
                    "token nonces meanwhile; retry it (they are then refused as replays)"
                )
            conn.execute(
                "UPDATE secure_queries SET aggregate = %s, aggregated = aggregated + %s, "
                "refused = refused + %s WHERE query_id = %s",
                (merge(query.aggregate), accepted, refused, query_id),
            )
            return response

        return self._transaction(work)
