"""The SQLite `report_keys` table: each query's report log key, and the release's erasure.

See `aggregator.store.report_cipher` for why the rows are encrypted. The connection runs with
`secure_delete` on, so deleting a key overwrites it.
"""

from __future__ import annotations

import sqlite3

from aggregator.store.report_cipher import ReportCipher


def record_key(conn: sqlite3.Connection, query_id: str, cipher: ReportCipher) -> None:
    conn.execute("INSERT INTO report_keys (query_id, key) VALUES (?, ?)", (query_id, cipher.key))


def load_keys(conn: sqlite3.Connection) -> dict[str, ReportCipher]:
    return {
        str(query_id): ReportCipher(bytes(key))
        for query_id, key in conn.execute("SELECT query_id, key FROM report_keys")
    }


def erase_reports(conn: sqlite3.Connection, query_id: str, *, encrypted: bool) -> None:
    """Make a query's held reports unreadable and delete them, inside the caller's transaction.

    Rows in clear (a query created before rows were encrypted) are overwritten where they lie,
    which costs time in proportion to their bytes. An encrypted query's rows only need its key
    overwritten (32 bytes); the rows are then deleted without overwriting, so the release no
    longer grows with the report bytes it held (their pages are only freed).
    """
    if not encrypted:
        conn.execute("DELETE FROM reports WHERE query_id = ?", (query_id,))
        return
    conn.execute("DELETE FROM report_keys WHERE query_id = ?", (query_id,))
    conn.execute("PRAGMA secure_delete=OFF")
    try:
        conn.execute("DELETE FROM reports WHERE query_id = ?", (query_id,))
    finally:
        conn.execute("PRAGMA secure_delete=ON")
