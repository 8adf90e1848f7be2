"""The secure store's core (`store.SecureStore` is built on it): the SQLite file, its lock and
transactions, and the stored query and report types both roles share."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aggregator.errors import NotFound
from aggregator.secure.keys import key_path, load_or_create_key_pair
from aggregator.secure.store_migrate import apply_schema
from aggregator.store.sqlite_file import DatabaseUnusable, create_private
from ldpcollect.secure.sealing import HpkeKeyPair

T = TypeVar("T")

OPEN, CLOSED, RELEASED = 1, 2, 3
CACHE_KIB = 64 * 1024
"""SQLite's page cache (default 2 MiB): held reports read back by their job are still in it,
not read from the file again."""
PAGE_SIZE = 16 * 1024
"""A new file's page size (SQLite's default is 4 KiB, where a held report of 2.5 KB or more
takes a page of its own): a job's reports are written and freed in a quarter of the pages
(bench: the leader's storage steps 42 -> 30 us a report in uploads of 500, one-report uploads
about 10 us more; 64 KiB pages cost those 70 us more). A file created before keeps its own
(changing it would rewrite the whole file)."""
STATE_NAMES = {OPEN: "open", CLOSED: "closed", RELEASED: "released"}


@dataclass(frozen=True)
class StoredQuery:
    query_id: str
    params: dict[str, Any]
    verify_key: bytes
    state: int
    aggregate: bytes
    aggregated: int
    refused: int
    sealed_share: bytes | None

    @classmethod
    def from_row(cls, query_id: str, row: Sequence[Any] | None) -> StoredQuery:
        """The query from its row's `QUERY_COLUMNS` (either store's); NotFound for none."""
        if row is None:
            raise NotFound(f"no secure query {query_id!r}")
        body, key, state, aggregate, aggregated, refused, sealed = row
        return cls(
            query_id,
            json.loads(body),
            bytes(key),
            int(state),
            bytes(aggregate),
            int(aggregated),
            int(refused),
            None if sealed is None else bytes(sealed),
        )


QUERY_COLUMNS = "body, verify_key, state, aggregate, aggregated, refused, sealed_share"
"""What `StoredQuery.from_row` reads, in its order."""


@dataclass(frozen=True)
class HeldReport:
    report_id: bytes
    body: bytes
    leader_share: bytes
    token: bytes = b""


class UploadOutcome:
    NEW = "new"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"
    TOKEN_SPENT = "token spent"  # its token's nonce was spent by another report


IN_CHUNK = 500
"""Values bound per `IN (...)` list by `select_in` (SQLite takes up to 32,766 a statement)."""


def select_in(
    db: sqlite3.Connection, sql: str, args: Sequence[Any], values: Sequence[Any]
) -> list[Any]:
    """The rows of `sql` (whose one `{}` is the `IN` list) for `values`, in chunks, after the
    leading `args`: one statement per chunk instead of one per value."""
    rows: list[Any] = []
    for start in range(0, len(values), IN_CHUNK):
        chunk = values[start : start + IN_CHUNK]
        marks = ", ".join("?" * len(chunk))
        rows.extend(db.execute(sql.format(marks), (*args, *chunk)).fetchall())
    return rows


def secure_db_path(main_db: str | Path) -> Path:
    """The secure store's file beside the aggregator's main database."""
    path = Path(main_db)
    return path.with_name(path.name + ".secure")


class StoreCore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    @property
    def name(self) -> str:
        return str(self.path)

    def load_key_pair(self, role: str, main_db: str) -> HpkeKeyPair:
        """The key pair in its 0600 file beside the main database (`keys.key_path`)."""
        return load_or_create_key_pair(key_path(main_db, role))

    def open(self) -> None:
        """Open (or create) the file; one that cannot be used raises `DatabaseUnusable` naming
        it and what to do (a damaged file is called damaged)."""
        # It holds each query's verify key: readable by this user only, like its -wal and -shm
        # (SQLite gives them the database file's mode).
        db: sqlite3.Connection | None = None
        try:
            create_private(str(self.path))
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # no effect on an existing file
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = FULL")
            db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            apply_schema(db)
        except (sqlite3.Error, OSError) as exc:
            if db is not None:
                db.close()
            raise DatabaseUnusable(str(self.path), exc) from exc
        self._db = db

    def close(self) -> None:
        """Close the file once the call that holds the connection is done: a worker thread
        still running a read when the server stops (`asyncio.to_thread` is not cancelled with
        its task) must never find the connection closed under it (that crashed the process)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _locked(self, work: Callable[[], T]) -> T:
        with self._lock:
            return work()

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the secure store is not open")
        return self._db

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    def _snapshot(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work`'s reads in one read transaction: one consistent state of the file."""
        db = self.db
        db.execute("BEGIN DEFERRED")
        try:
            return work(db)
        finally:
            db.execute("COMMIT")

    @staticmethod
    def _query(db: sqlite3.Connection, query_id: str) -> StoredQuery:
        row = db.execute(
            f"SELECT {QUERY_COLUMNS} FROM secure_queries WHERE query_id = ?", (query_id,)
        ).fetchone()
        return StoredQuery.from_row(query_id, row)
