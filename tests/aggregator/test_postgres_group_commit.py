"""Group commit in the PostgreSQL store: groups that arrive while the replica's group
transactions are busy share the next one, and a conflict inside a shared transaction still
gives every report the answer the rules give it alone."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import numpy as np

from aggregator.errors import AlreadyExists
from aggregator.rounds import ReportColumns
from aggregator.store.postgres import PostgresStore
from tests.aggregator.store_contract import RR, bits_of, key, rr_run, spec, summary


def schema_for(where: Path) -> str:
    return "g_" + hashlib.sha1(str(where).encode()).hexdigest()[:20]


async def test_waiting_groups_share_one_transaction(postgres_url: str, tmp_path: Path) -> None:
    store = PostgresStore(postgres_url, schema=schema_for(tmp_path), group_flights=1)
    await store.open()
    try:
        await store.create_query(spec("q", RR), 0.0)
        groups = [rr_run(100 * g, 100, seed=g) for g in range(4)]
        results = await asyncio.gather(*(store.submit(ReportColumns.of(g)) for g in groups))
        assert [summary(r) for r in results] == [(100, 0, [])] * 4
        # Handed over at the same moment: one transaction wrote them all.
        assert store._group_commit.transactions == 1
        every = [r for g in groups for r in g]
        expected = np.sum([bits_of(r.answers) for r in every], axis=0)
        assert store.counts("q").tolist() == [expected.tolist()]
    finally:
        await store.close()
    reopened = PostgresStore(postgres_url, schema=schema_for(tmp_path))
    await reopened.open()
    try:
        assert reopened.counts("q").tolist() == [expected.tolist()]
        assert reopened.query("q").reports_per_round == (400,)  # type: ignore[union-attr]
    finally:
        await reopened.close()


async def test_a_conflict_in_a_shared_transaction_is_decided_report_by_report(
    postgres_url: str, tmp_path: Path
) -> None:
    store = PostgresStore(postgres_url, schema=schema_for(tmp_path), group_flights=1)
    await store.open()
    try:
        await store.create_query(spec("q", RR), 0.0)
        first, second, third = rr_run(0, 50, 1), rr_run(50, 50, 2), rr_run(100, 50, 3)
        # The third group repeats a report of the first (a retry: a duplicate) and sends
        # another report for a device of the second (one of the two is refused).
        third[0] = first[7]
        third[1] = third[1]._replace(pseudonym=second[3].pseudonym)
        assert summary(await store.submit(ReportColumns.of(first))) == (50, 0, [])
        results = await asyncio.gather(
            *(store.submit(ReportColumns.of(g)) for g in (second, third))
        )
        assert store._group_commit.transactions == 2  # the second and third shared one
        outcomes = sorted(summary(r) for r in results)
        assert outcomes in (
            [(48, 1, [(1, AlreadyExists)]), (50, 0, [])],  # the second group's report first
            [(49, 0, [(3, AlreadyExists)]), (49, 1, [])],  # the third group's first
        )
        info = store.query("q")
        assert info is not None and info.reports_per_round == (148,)
        retry = await store.submit(ReportColumns.of([third[5]._replace(report_id=key(10**6))]))
        assert summary(retry) == (0, 0, [(0, AlreadyExists)])
    finally:
        await store.close()
