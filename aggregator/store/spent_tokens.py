"""SQL of device admission for SQL backends: which queries require tokens, and spent nonces.

A nonce is spent by the first report that redeems it; the same report (same report id) may
redeem it again, which is what a retry does, so the retry is acknowledged as the store
acknowledges any duplicate. Any other report with that nonce is a replay.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from aggregator.model import Redemption

_INSERT = "INSERT INTO spent_tokens (query_id, nonce, report_id) VALUES (?, ?, ?)"
_LOOKUP_CHUNK = 500  # nonces per SELECT (below SQLite's bound-parameter limit)


def _spent_before(
    conn: sqlite3.Connection, query_id: str, nonces: Sequence[bytes]
) -> dict[bytes, bytes]:
    """nonce -> report id of the nonces already spent for the query."""
    found: dict[bytes, bytes] = {}
    unique = list(dict.fromkeys(nonces))
    for start in range(0, len(unique), _LOOKUP_CHUNK):
        chunk = unique[start : start + _LOOKUP_CHUNK]
        rows = conn.execute(
            "SELECT nonce, report_id FROM spent_tokens WHERE query_id = ? AND nonce IN "
            f"({', '.join('?' * len(chunk))})",
            (query_id, *chunk),
        )
        found.update((bytes(nonce), bytes(report_id)) for nonce, report_id in rows)
    return found


def redeem(
    conn: sqlite3.Connection, query_id: str, items: Sequence[tuple[bytes, bytes]]
) -> list[Redemption]:
    """Spend each (nonce, report id) in order, inside the caller's transaction: one lookup
    per 500 nonces, one insert per new nonce."""
    spent = _spent_before(conn, query_id, [nonce for nonce, _ in items])
    outcomes: list[Redemption] = []
    new: list[tuple[str, bytes, bytes]] = []
    for nonce, report_id in items:
        holder = spent.get(nonce)
        if holder is None:
            spent[nonce] = report_id
            new.append((query_id, nonce, report_id))
            outcomes.append(Redemption.NEW)
        elif holder == report_id:
            outcomes.append(Redemption.SAME_REPORT)
        else:
            outcomes.append(Redemption.SPENT)
    conn.executemany(_INSERT, new)
    return outcomes


def forget(conn: sqlite3.Connection, query_id: str) -> None:
    """Drop a released query's spent nonces: it accepts no report any more, and its tokens
    answer its own challenge only, so they are worth nothing elsewhere."""
    conn.execute("DELETE FROM spent_tokens WHERE query_id = ?", (query_id,))


def record_token_issuer(conn: sqlite3.Connection, query_id: str, issuer: str | None) -> None:
    if issuer is not None:
        conn.execute(
            "INSERT INTO query_tokens (query_id, issuer_name) VALUES (?, ?)", (query_id, issuer)
        )


def token_issuers(conn: sqlite3.Connection) -> dict[str, str]:
    return {
        str(q): str(i) for q, i in conn.execute("SELECT query_id, issuer_name FROM query_tokens")
    }
