"""The SQLite store's file: its schema scripts, creation with mode 0600, the conversion of
the older one-row-per-report layout, and the errors that name the file and what to do.
(`sqlite.py` keeps the writer thread and the SQL of every request.)"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
from importlib import resources

from aggregator.errors import ServiceError, StorageFailure, Unavailable
from aggregator.store.rows import LogRow

log = logging.getLogger(__name__)


def split_statements(script: str) -> list[str]:
    """The complete SQL statements of a script, in order (comments kept with their statement)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return statements


SCHEMA = [
    statement
    for name in ("sqlite_v2.sql", "sqlite_tokens.sql")
    for statement in split_statements(
        resources.files("aggregator.store").joinpath(f"schema/{name}").read_text("utf-8")
    )
]
INSERT_LOG = (
    f"INSERT INTO reports ({', '.join(LogRow._fields)}) "
    f"VALUES ({', '.join('?' * len(LogRow._fields))})"
)
# A row whose answers are in the query's answer file (`answer_files`), at `answers_at`.
INSERT_LOG_AT = (
    f"INSERT INTO reports ({', '.join(LogRow._fields)}, answers_at) "
    f"VALUES ({', '.join('?' * (len(LogRow._fields) + 1))})"
)


def add_report_columns(conn: sqlite3.Connection) -> None:
    """Give a report log made before rows were encrypted its `nonce` column (NULL: clear),
    and one made before answer files its `answers_at` column (NULL: answers in the row)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(reports)")}
    if "nonce" not in columns:
        conn.execute("ALTER TABLE reports ADD COLUMN nonce BLOB")
    if "answers_at" not in columns:
        conn.execute("ALTER TABLE reports ADD COLUMN answers_at INTEGER")


# Before the report log (schema version 1), reports were stored one row each; such a file is
# converted in place when opened.
LEGACY_REPORT_COLUMNS = {"query_id", "report_id", "pseudonym", "round", "answers"}


def migrate_legacy_reports(conn: sqlite3.Connection, path: str) -> None:
    """Convert a file from the one-row-per-report layout to the report log, atomically."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(reports)")}
    if columns != LEGACY_REPORT_COLUMNS:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("ALTER TABLE reports RENAME TO reports_legacy")
        for statement in SCHEMA:
            conn.execute(statement)
        groups: dict[tuple[str, int], tuple[list[bytes], list[bytes], list[bytes]]] = {}
        for qid, report_id, pseudonym, round_, answers in conn.execute(
            "SELECT query_id, report_id, pseudonym, round, answers FROM reports_legacy "
            "ORDER BY round"
        ):
            ids, pseudonyms, all_answers = groups.setdefault((qid, round_), ([], [], []))
            ids.append(report_id)
            pseudonyms.append(pseudonym)
            all_answers.append(answers)
        conn.executemany(
            INSERT_LOG,
            [
                LogRow(qid, round_, len(ids), b"".join(ids), b"".join(ps), b"".join(answers))
                for (qid, round_), (ids, ps, answers) in groups.items()
            ],
        )
        conn.execute("DROP TABLE reports_legacy")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    log.info("converted %s to the report log layout", path)


# SQLite's primary result codes that mean the file's contents are wrong (not its access):
# corrupt pages, not a database, an unsupported format, a schema that is not ours.
_DAMAGED_CODES = {
    sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_NOTADB,
    sqlite3.SQLITE_FORMAT,
    sqlite3.SQLITE_ERROR,
    sqlite3.SQLITE_SCHEMA,
    sqlite3.SQLITE_MISMATCH,
}


def is_damaged(cause: BaseException) -> bool:
    """Whether SQLite refused the file for what is in it (rather than for access to it). The
    result code decides, not the exception class: SQLite raises OperationalError for some
    damage ("unsupported file format") and for access problems alike."""
    if not isinstance(cause, sqlite3.DatabaseError):
        return False
    code = getattr(cause, "sqlite_errorcode", None)
    if code is None:
        return not isinstance(cause, sqlite3.OperationalError)
    return code & 0xFF in _DAMAGED_CODES


class DatabaseUnusable(OSError):
    """The database file cannot be opened or read; the message names it and what to do."""

    def __init__(self, path: str, cause: BaseException) -> None:
        if is_damaged(cause):
            what = (
                "it is damaged or not an ldpcollect database; restore it from a backup, or "
                "pass --db with a new file name to start an empty database"
            )
        elif isinstance(cause, sqlite3.OperationalError | PermissionError | FileNotFoundError):
            what = (
                "it cannot be opened; check that the file and its directory exist and that "
                "this user may read and write both"
            )
        else:
            what = (
                "its contents cannot be read back; restore it from a backup, or pass --db with "
                "a new file name to start an empty database"
            )
        super().__init__(f"cannot use the database {path}: {what} ({cause})")


def create_private(path: str) -> None:
    """Create the database file readable by this user only (SQLite gives its -wal and -shm
    files the same mode); an existing file is left as it is."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def storage_error(exc: sqlite3.Error | OSError) -> ServiceError:
    """What to tell the callers of a transaction that storage refused (SQLite's file, or an
    answer file)."""
    full = isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS
    if full or getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return Unavailable(
            "the aggregator's storage is full: nothing of this request was stored; retry later"
        )
    return StorageFailure(f"storage failure, nothing of this request was stored; retry: {exc}")
