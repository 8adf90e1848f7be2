"""Device admission in the PostgreSQL store: spent token nonces shared by every replica.

The same rule as the SQLite store (`spent_tokens.py`): the first report to redeem a nonce
spends it, a retry of that report (same report id) may redeem it again, any other report
with it is a replay. Across replicas the primary key decides: `INSERT ... ON CONFLICT DO
NOTHING` waits for a concurrent insert of the same nonce to commit or abort, so exactly one
report ever holds a nonce.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aggregator.model import Redemption

Conn = Any  # psycopg.AsyncConnection[tuple[Any, ...]]

_INSERT = (
    "INSERT INTO spent_tokens (query_id, nonce, report_id) "
    "SELECT %s, n, r FROM unnest(%s::bytea[], %s::bytea[]) AS u(n, r) "
    "ON CONFLICT DO NOTHING RETURNING nonce"
)
_HOLDERS = "SELECT nonce, report_id FROM spent_tokens WHERE query_id = %s AND nonce = ANY(%s)"


async def redeem(
    conn: Conn, query_id: str, items: Sequence[tuple[bytes, bytes]]
) -> list[Redemption]:
    """Spend each (nonce, report id) in order, in the caller's transaction: one insert for
    the batch's distinct nonces, one read of the holders of those already spent."""
    first: dict[bytes, bytes] = {}
    for nonce, report_id in items:
        first.setdefault(nonce, report_id)
    cursor = await conn.execute(_INSERT, (query_id, list(first), list(first.values())))
    inserted = {bytes(row[0]) for row in await cursor.fetchall()}
    holders = {nonce: first[nonce] for nonce in inserted}
    taken = [nonce for nonce in first if nonce not in inserted]
    if taken:
        cursor = await conn.execute(_HOLDERS, (query_id, taken))
        holders.update((bytes(n), bytes(r)) for n, r in await cursor.fetchall())
    outcomes: list[Redemption] = []
    seen: set[bytes] = set()
    for nonce, report_id in items:
        if nonce in inserted and nonce not in seen:
            outcomes.append(Redemption.NEW)
        elif holders.get(nonce) == report_id:
            outcomes.append(Redemption.SAME_REPORT)
        else:
            outcomes.append(Redemption.SPENT)
        seen.add(nonce)
    return outcomes


async def forget(conn: Conn, query_id: str) -> None:
    """Drop a released query's spent nonces (its tokens answer its own challenge only)."""
    await conn.execute("DELETE FROM spent_tokens WHERE query_id = %s", (query_id,))
