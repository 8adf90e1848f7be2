"""Upgrading a PostgreSQL database that an older ldpcollect wrote: its counts survive.

A schema is brought to version 2 (as the ldpcollect before counter rows per shard left it)
with counts in the version-2 layout written by hand: one row per (round, target, shard),
sparse, and a progress row per shard. Opening a store migrates it; the store must then show
the same totals and keep counting on top of them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import psycopg

from aggregator.rounds import QueryState, ReportColumns
from aggregator.store import pg_rows
from aggregator.store.pg_migrations import migrate
from aggregator.store.postgres import PostgresStore
from tests.aggregator.store_contract import N_TARGETS, RR, SP, bits_of, rr_run, spec


def schema_for(where: Path) -> str:
    return "m_" + hashlib.sha1(str(where).encode()).hexdigest()[:20]


async def write_version_2(url: str, schema: str) -> None:
    """A version-2 schema holding an RR query "q" counted in shards 0 and 5, and an SP query
    whose round-2 counts live in shard 3 only."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        assert await migrate(conn, schema, upto=2) == [1, 2]
        await conn.execute(f"SET search_path TO {schema}")
        for query_id, mechanism in (("q", RR), ("sp", SP)):
            state = QueryState.new(spec(query_id, mechanism), 0.0)
            await conn.execute(pg_rows.INSERT_QUERY, pg_rows.query_values(state))
        rows = [
            ("q", 1, 0, 0, 4), ("q", 1, 0, 5, 3), ("q", 1, 9, 5, 1),
            ("sp", 1, 1, 3, 2), ("sp", 2, 0, 3, 6),
        ]  # fmt: skip
        for row in rows:
            await conn.execute(
                "INSERT INTO target_counts (query_id, round, target, ord, n) "
                "VALUES (%s, %s, %s, %s, %s)",
                row,
            )
        for row in (("q", 0, 5, 0, 5), ("q", 5, 4, 0, 4), ("sp", 3, 9, 7, 6)):
            await conn.execute(
                "INSERT INTO progress_counts (query_id, ord, round1_reports, round2_reports, "
                "completed) VALUES (%s, %s, %s, %s, %s)",
                row,
            )


async def test_a_version_2_database_keeps_its_counts_and_goes_on_counting(
    postgres_url: str, tmp_path: Path
) -> None:
    schema = schema_for(tmp_path)
    await write_version_2(postgres_url, schema)
    store = PostgresStore(postgres_url, schema=schema)
    await store.open()
    try:
        rr, sp = store.query("q"), store.query("sp")
        assert rr is not None and sp is not None
        assert (rr.reports_per_round, rr.completed_devices) == ((9,), 9)
        assert (sp.reports_per_round, sp.completed_devices) == ((9, 7), 6)
        before = [7] + [0] * (N_TARGETS - 2) + [1]
        assert store.counts("q").tolist() == [before]
        assert store.counts("sp").tolist() == [
            [0, 2] + [0] * (N_TARGETS - 2),
            [6] + [0] * (N_TARGETS - 1),
        ]
        reports = rr_run(0, 20, seed=3)
        result = await store.submit(ReportColumns.of(reports))
        assert result.accepted == 20
        expected = np.array(before) + np.sum([bits_of(r.answers) for r in reports], axis=0)
        assert store.counts("q").tolist() == [expected.tolist()]
        assert store.query("q").reports_per_round == (29,)  # type: ignore[union-attr]
    finally:
        await store.close()
    reopened = PostgresStore(postgres_url, schema=schema)
    await reopened.open()
    try:
        assert reopened.counts("q").tolist() == [expected.tolist()]
        assert reopened.query("q").reports_per_round == (29,)  # type: ignore[union-attr]
    finally:
        await reopened.close()
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name IN ('target_counts', 'progress_counts')",
            (schema,),
        )
        assert await cursor.fetchall() == []
