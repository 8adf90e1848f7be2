"""The secure store's admission-token state (SQL only; `SecureStore` calls these inside its
transactions): each role's spent nonces per query (`secure_spent_tokens`) and, at the
leader, the token held with each report until its job is finished (`secure_held.token`).
Spent nonces are kept until the query is released (uploads and jobs are refused after)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from aggregator.secure.multirow import insert_rows
from ldpcollect.admission.tokens import NONCE_LENGTH


def migrate(db: sqlite3.Connection) -> None:
    """Give a version 1 store created before tokens its `token` column, before it is migrated
    to version 2 (`store_migrate`)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(secure_reports)")}
    if "token" not in columns:
        db.execute("ALTER TABLE secure_reports ADD COLUMN token BLOB")


def spender(db: sqlite3.Connection, query_id: str, nonce: bytes) -> bytes | None:
    """The report id that spent `nonce` in this query, or None."""
    row = db.execute(
        "SELECT report_id FROM secure_spent_tokens WHERE query_id = ? AND nonce = ?",
        (query_id, nonce),
    ).fetchone()
    return None if row is None else bytes(row[0])


def spent_among(db: sqlite3.Connection, query_id: str, nonces: Sequence[bytes]) -> set[bytes]:
    """Which of `nonces` are spent in this query (one statement per 500)."""
    spent: set[bytes] = set()
    for start in range(0, len(nonces), 500):
        chunk = list(nonces[start : start + 500])
        marks = ", ".join("?" * len(chunk))
        rows = db.execute(
            f"SELECT nonce FROM secure_spent_tokens WHERE query_id = ? AND nonce IN ({marks})",
            (query_id, *chunk),
        )
        spent.update(bytes(row[0]) for row in rows)
    return spent


def spend(db: sqlite3.Connection, query_id: str, items: Iterable[tuple[bytes, bytes]]) -> None:
    """Spend (nonce, report id) pairs; a nonce spent before raises (callers check first, as
    the store's single writer)."""
    insert_rows(
        db,
        "INSERT INTO secure_spent_tokens (query_id, nonce, report_id) VALUES",
        [(query_id, nonce, report_id) for nonce, report_id in items],
    )


def forget(db: sqlite3.Connection, query_id: str) -> None:
    """At release: the query takes no report any more, so its nonces need not be kept."""
    db.execute("DELETE FROM secure_spent_tokens WHERE query_id = ?", (query_id,))


def nonce_of(token: bytes) -> bytes:
    """A type-2 token's nonce: the bytes after its 2-byte type (the token was checked)."""
    return bytes(token[2 : 2 + NONCE_LENGTH])
