"""SQL of device admission for SQL backends: which queries require tokens, and spent nonces.

A nonce is spent by the first report that redeems it; the same report (same report id) may
redeem it again, which is what a retry does, so the retry is acknowledged as the store
acknowledges any duplicate. Any other report with that nonce is a replay.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from aggregator.model import Redemption

_LOOKUP = "SELECT report_id FROM spent_tokens WHERE query_id = ? AND nonce = ?"
_INSERT = "INSERT INTO spent_tokens (query_id, nonce, report_id) VALUES (?, ?, ?)"


def redeem(
    conn: sqlite3.Connection, query_id: str, items: Sequence[tuple[bytes, bytes]]
) -> list[Redemption]:
    """Spend each (nonce, report id) in order, inside the caller's transaction."""
    outcomes: list[Redemption] = []
    for nonce, report_id in items:
        row = conn.execute(_LOOKUP, (query_id, nonce)).fetchone()
        if row is None:
            conn.execute(_INSERT, (query_id, nonce, report_id))
            outcomes.append(Redemption.NEW)
        elif bytes(row[0]) == report_id:
            outcomes.append(Redemption.SAME_REPORT)
        else:
            outcomes.append(Redemption.SPENT)
    return outcomes


def record_token_issuer(conn: sqlite3.Connection, query_id: str, issuer: str | None) -> None:
    if issuer is not None:
        conn.execute(
            "INSERT INTO query_tokens (query_id, issuer_name) VALUES (?, ?)", (query_id, issuer)
        )


def token_issuers(conn: sqlite3.Connection) -> dict[str, str]:
    return {
        str(q): str(i) for q, i in conn.execute("SELECT query_id, issuer_name FROM query_tokens")
    }
