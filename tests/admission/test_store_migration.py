"""A database written before admission existed opens, keeps its queries, and gains the token
tables (the schema's statements are idempotent: opening is the migration)."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path

from aggregator.model import QuerySpec, Redemption
from aggregator.store.sqlite import SqliteStore
from ldpcollect.mechanisms import RandomizedResponse

RR = RandomizedResponse("0.85", "0.3")


async def test_a_database_from_before_admission_gains_the_token_tables(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    store = SqliteStore(db)
    await store.open()
    await store.create_query(QuerySpec("old", "", RR, "grid", (1, 2), 1, None), 1.0)
    await store.close()
    with sqlite3.connect(db) as conn:  # as the store before admission left it
        conn.execute("DROP TABLE query_tokens")
        conn.execute("DROP TABLE spent_tokens")
    v2 = resources.files("aggregator.store").joinpath("schema/sqlite_v2.sql").read_text()
    assert "spent_tokens" not in v2
    store = SqliteStore(db)
    await store.open()
    try:
        old = store.query("old")
        assert old is not None and old.spec.token_issuer is None
        spec = QuerySpec("new", "", RR, "grid", (1, 2), 1, None, "issuer.test")
        assert (await store.create_query(spec, 2.0)).spec.token_issuer == "issuer.test"
        assert await store.redeem_tokens("new", [(b"n", b"r")]) == [Redemption.NEW]
    finally:
        await store.close()
