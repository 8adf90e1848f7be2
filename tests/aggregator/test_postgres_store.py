"""The PostgreSQL store: the shared behaviour suite, plus what only several replicas show.

`TestPostgresStore` runs `StoreContract` with each location as a schema of its own in the
test run's database. The tests below it open two stores on the same schema (two replicas in
one process) and race them: the same reports at the same moment, a release on both.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

from aggregator.errors import AlreadyExists, FailedPrecondition, Unavailable
from aggregator.model import QueryInfo, QueryStatus, Redemption, ReleaseRecord
from aggregator.rounds import ReportColumns
from aggregator.store.pg_migrations import migrations
from aggregator.store.postgres import DatabaseUnreachable, PostgresStore
from tests.aggregator.store_contract import RR, SP, StoreContract, key, rr_run, spec, summary


def schema_for(where: Path) -> str:
    return "s_" + hashlib.sha1(str(where).encode()).hexdigest()[:20]


class TestPostgresStore(StoreContract):
    url: ClassVar[str] = ""

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _database(cls, postgres_url: str) -> None:
        cls.url = postgres_url

    def make_store(self, where: Path) -> PostgresStore:
        return PostgresStore(self.url, schema=schema_for(where), refresh_s=0.2)


@pytest.fixture
async def two_replicas(postgres_url: str, tmp_path: Path) -> AsyncIterator[list[PostgresStore]]:
    schema = schema_for(tmp_path)
    stores = [PostgresStore(postgres_url, schema=schema, refresh_s=0.2) for _ in range(2)]
    for store in stores:
        await store.open()
    try:
        yield stores
    finally:
        for store in stores:
            await store.close()


async def test_the_same_reports_sent_to_two_replicas_at_once_are_counted_once(
    two_replicas: list[PostgresStore],
) -> None:
    a, b = two_replicas
    await a.create_query(spec("q", RR), 0.0)
    run = rr_run(0, 200, 7)
    # Both replicas admit every group at the same moment, many times over.
    results = await asyncio.gather(
        *(
            store.submit(ReportColumns.of(run[i : i + 20]))
            for i in range(0, 200, 20)
            for store in (a, b)
        )
    )
    assert sum(r.accepted for r in results) == 200
    assert sum(r.duplicates for r in results) == 200
    assert not any(r.rejected for r in results)
    # A different report from a device that already reported is refused on both replicas.
    other = run[0]._replace(report_id=key(10**9))
    for store in (a, b):
        got = await store.submit(ReportColumns.of([other]))
        assert summary(got) == (0, 0, [(0, AlreadyExists)])
    await a.close_query("q")
    record = await b.release("q", _release_counting)
    assert record.participants == 200


async def test_a_release_requested_on_two_replicas_at_once_is_charged_once(
    two_replicas: list[PostgresStore],
) -> None:
    a, b = two_replicas
    await a.create_query(spec("q", RR), 0.0)
    await a.submit(ReportColumns.of(rr_run(0, 30, 8)))
    await b.close_query("q")
    await a.update_ledger(lambda body: "0")
    outcomes = await asyncio.gather(
        a.release("q", _release_counting), b.release("q", _release_counting), return_exceptions=True
    )
    records = [o for o in outcomes if isinstance(o, ReleaseRecord)]
    refused = [o for o in outcomes if isinstance(o, FailedPrecondition)]
    assert len(records) == 1 and len(refused) == 1, outcomes
    assert "already released" in refused[0].message
    for store in (a, b):
        assert await store.update_ledger(lambda body: body or "") == "1"
    # The reports are gone from the database; the counts stay, merged into one shard.
    async with await psycopg.AsyncConnection.connect(a._url) as conn:
        await conn.execute(f"SET search_path TO {a._schema}")
        reports = await (await conn.execute("SELECT count(*) FROM reports")).fetchone()
        shards = await (await conn.execute("SELECT DISTINCT ord FROM count_shards")).fetchall()
    assert reports == (0,) and shards == [(0,)]


async def test_a_token_nonce_redeemed_on_two_replicas_at_once_is_spent_by_one_report(
    two_replicas: list[PostgresStore],
) -> None:
    a, b = two_replicas
    await a.create_query(replace(spec("q", RR), token_issuer="issuer.example"), 0.0)
    nonces = [bytes([i]) * 32 for i in range(50)]
    # Each nonce is offered by two different reports, one on each replica, at the same moment.
    outcomes = await asyncio.gather(
        *(
            store.redeem_tokens("q", [(nonce, key(1000 * side + i))])
            for i, nonce in enumerate(nonces)
            for side, store in enumerate((a, b))
        )
    )
    per_nonce = [outcomes[2 * i] + outcomes[2 * i + 1] for i in range(len(nonces))]
    assert all(sorted(o.name for o in pair) == ["NEW", "SPENT"] for pair in per_nonce)
    # The winner's retry (same report id) is acknowledged on either replica; the loser's not.
    for i, pair in enumerate(per_nonce):
        winner = key(i) if pair[0] is Redemption.NEW else key(1000 + i)
        loser = key(1000 + i) if winner == key(i) else key(i)
        assert await b.redeem_tokens("q", [(nonces[i], winner)]) == [Redemption.SAME_REPORT]
        assert await a.redeem_tokens("q", [(nonces[i], loser)]) == [Redemption.SPENT]
    # The query's token issuer reaches the other replica through the database.
    for _ in range(500):
        if (info := b.query("q")) is not None:
            break
        await asyncio.sleep(0.01)
    assert info is not None and info.spec.token_issuer == "issuer.example"


def sp_run(first: int, n: int, seed: int) -> ReportColumns:
    return ReportColumns.of(r._replace(query_id="sp") for r in rr_run(first, n, seed))


async def test_a_lifecycle_change_on_one_replica_reaches_the_other(
    two_replicas: list[PostgresStore],
) -> None:
    a, b = two_replicas
    await a.create_query(spec("sp", SP), 0.0)
    await a.submit(sp_run(0, 5, 9))
    await b.advance_round("sp")
    info = await _until(a, lambda q: q is not None and q.current_round == 2)
    assert list(info.reports_per_round) == [5, 0]
    # Either replica refuses round 1 now: the database decides, not a snapshot.
    for store in (a, b):
        got = await store.submit(sp_run(100, 1, 10))
        assert summary(got) == (0, 0, [(0, FailedPrecondition)])


async def _until(store: PostgresStore, ok: Any) -> QueryInfo:
    """The store's snapshot of 'sp' once `ok` holds (the refresh is asynchronous)."""
    for _ in range(500):
        info = store.query("sp")
        if ok(info):
            assert info is not None
            return info
        await asyncio.sleep(0.01)
    raise AssertionError(f"the replica never saw the change: {store.query('sp')}")


def _release_counting(
    query: QueryInfo, counts: Any, ledger: str | None
) -> tuple[ReleaseRecord, str | None]:
    spent = int(ledger or "0") + 1
    return ReleaseRecord(query.query_id, query.completed_devices, 1.0, (), ()), str(spent)


async def test_migrations_are_applied_once_and_recorded(postgres_url: str, tmp_path: Path) -> None:
    schema = schema_for(tmp_path)
    stores = [PostgresStore(postgres_url, schema=schema) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    for store in stores:
        await store.close()
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute(
            f"SELECT version FROM {schema}.ldpcollect_migrations ORDER BY version"
        )
        versions = [row[0] for row in await cursor.fetchall()]
    assert versions == [m.version for m in migrations()]


async def test_a_database_with_a_newer_schema_is_refused_and_left_alone(
    postgres_url: str, tmp_path: Path
) -> None:
    schema = schema_for(tmp_path)
    store = PostgresStore(postgres_url, schema=schema)
    await store.open()
    await store.create_query(spec("q", RR), 0.0)
    await store.close()
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await conn.execute(
            f"INSERT INTO {schema}.ldpcollect_migrations (version, name) VALUES (999, 'future')"
        )
    with pytest.raises(DatabaseUnreachable, match="schema version 999, newer than this"):
        await PostgresStore(postgres_url, schema=schema).open()
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute(f"SELECT query_id FROM {schema}.queries")
        assert await cursor.fetchall() == [("q",)]


async def test_an_unreachable_database_names_itself_without_its_password() -> None:
    store = PostgresStore("postgresql://someone:secret@127.0.0.1:1/none", connect_timeout_s=2)
    with pytest.raises(DatabaseUnreachable) as refused:
        await store.open()
    assert "postgresql://someone:***@127.0.0.1:1/none" in str(refused.value)
    assert "secret" not in str(refused.value)


async def test_dropped_database_connections_are_unavailable_then_a_retry_counts_once(
    fresh_postgres_url: str,
) -> None:
    store = PostgresStore(fresh_postgres_url, refresh_s=0.2)
    await store.open()
    try:
        await store.create_query(spec("q", RR), 0.0)
        run = rr_run(0, 100, 5)
        first = await store.submit(ReportColumns.of(run[:50]))
        assert first.accepted == 50
        # The database ends every connection of the store (as a restart or failover would).
        async with await psycopg.AsyncConnection.connect(fresh_postgres_url) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        refusals = 0
        for _ in range(10):  # a device's retries: the same reports each time
            try:
                again = await store.submit(ReportColumns.of(run))
                break
            except Unavailable as exc:
                assert "retry" in exc.message
                refusals += 1
        else:
            raise AssertionError("the store never recovered its connections")
        assert (again.accepted, again.duplicates) == (50, 50), refusals
        await store.close_query("q")
        assert (await store.release("q", _release_counting)).participants == 100
    finally:
        await store.close()


async def test_current_reads_show_another_replicas_reports_at_once(
    postgres_url: str, tmp_path: Path
) -> None:
    schema = schema_for(tmp_path)
    # Refreshing once a minute: the snapshots stay behind for the whole test.
    a, b = (PostgresStore(postgres_url, schema=schema, refresh_s=60) for _ in range(2))
    await a.open()
    await b.open()
    try:
        await a.create_query(spec("q", RR), 0.0)
        await a.create_query(spec("r", SP), 1.0)
        await a.submit(ReportColumns.of(rr_run(0, 30, 8)))
        seen = await b.current_query("q")
        assert seen is not None and seen.reports_per_round == (30,)
        assert seen.completed_devices == 30
        listed = await b.current_queries()
        assert [(q.query_id, q.reports_per_round) for q in listed] == [
            ("q", (30,)),
            ("r", (0, 0)),
        ]
        assert await b.current_query("missing") is None
        await a.close_query("q")
        closed = await b.current_query("q")
        assert closed is not None and closed.status == QueryStatus.CLOSED
    finally:
        await a.close()
        await b.close()
