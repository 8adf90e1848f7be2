"""The SQLite store: the shared behaviour suite, plus what only a file can show.

`TestSqliteStore` runs `StoreContract` (every backend's behaviour) on real files. The tests
below it show the file's own guarantees: a process killed between groups keeps whole
acknowledged groups, a transaction that fails half-way changes nothing, and a file written in
the older one-row-per-report layout is converted when opened.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from aggregator.errors import AlreadyExists, StorageFailure, Unavailable
from aggregator.model import QueryStatus, ReportIn
from aggregator.rounds import ReportColumns
from aggregator.store.report_cipher import ReportCipher
from aggregator.store.sqlite import SqliteStore
from tests.aggregator.store_contract import (
    N_TARGETS,
    SP,
    StoreContract,
    key,
    rr_run,
    spec,
    summary,
)


class TestSqliteStore(StoreContract):
    def make_store(self, where: Path) -> SqliteStore:
        return SqliteStore(where / "store.db")


class TestSqliteStoreWithAnswerFiles(StoreContract):
    """The same rules with every query's answers in its answer file (the contract's queries
    are narrower than the default `answer_file_bytes`)."""

    def make_store(self, where: Path) -> SqliteStore:
        return SqliteStore(where / "store.db", answer_file_bytes=1)


def _log_sums(db: Path) -> tuple[int, list[int], set[bytes]]:
    """Reports, per-target Yes counts and report ids in the log, read with plain SQL (the
    answers from the query's answer file) and decrypted with the query's key."""
    ids: set[bytes] = set()
    total = 0
    counts = np.zeros(N_TARGETS, dtype=np.int64)
    with closing(sqlite3.connect(db)) as conn, conn:
        keys = dict(conn.execute("SELECT query_id, key FROM report_keys"))
        for query_id, nonce, n, at, report_ids, pseudonyms, answers in conn.execute(
            "SELECT query_id, nonce, n, answers_at, report_ids, pseudonyms, answers FROM reports"
        ):
            if at is not None:
                name = hashlib.sha256(query_id.encode()).hexdigest()
                with open(f"{db}.answers/{name}", "rb") as file:
                    file.seek(at)
                    answers = file.read(2 * n)
            cipher = ReportCipher(keys[query_id])
            report_ids, _, answers = cipher.open(nonce, report_ids, pseudonyms, answers)
            total += n
            ids.update(report_ids[i : i + 16] for i in range(0, 16 * n, 16))
            packed = np.frombuffer(answers, dtype=np.uint8).reshape(n, 2)
            counts += np.unpackbits(packed, axis=1, count=N_TARGETS).sum(axis=0, dtype=np.int64)
    return total, [int(c) for c in counts], ids


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    import numpy as np
    from aggregator.model import ReportIn
    from aggregator.rounds import ReportColumns
    from aggregator.store.sqlite import SqliteStore
    from tests.aggregator.store_contract import RR, rr_run, spec

    async def main(db):
        store = SqliteStore(db)
        await store.open()
        await store.create_query(spec("q", RR), 0.0)
        for group in range(10_000):
            run = rr_run(group * 100, 100, group)
            result = await store.submit(ReportColumns.of(run))
            assert result.accepted == 100, result
            print(group, flush=True)

    asyncio.run(main(sys.argv[1]))
    """
)


def test_a_process_killed_between_groups_keeps_whole_acknowledged_groups(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None
    acknowledged = [int(child.stdout.readline()) for _ in range(30)]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert acknowledged == list(range(30))

    total, log_counts, ids = _log_sums(db)
    groups = total // 100
    assert total == 100 * groups and groups >= 30  # whole groups only, every acked one
    for group in range(groups):
        assert {r.report_id for r in rr_run(group * 100, 100, group)} <= ids

    async def reopen() -> None:
        store = SqliteStore(db)
        await store.open()
        try:
            info = store.query("q")
            assert info is not None
            # The counts committed with the groups agree with the log they were committed with.
            assert list(info.reports_per_round) == [total]
            assert store.counts("q").tolist() == [log_counts]
            # Every acknowledged report is known: sending a group again changes nothing.
            again = await store.submit(ReportColumns.of(rr_run(0, 100, 0)))
            assert (again.accepted, again.duplicates) == (0, 100)
            fresh = await store.submit(ReportColumns.of(rr_run(groups * 100, 100, groups)))
            assert fresh.accepted == 100
        finally:
            await store.close()

    asyncio.run(reopen())


async def test_a_failed_transaction_changes_nothing_and_a_retry_succeeds(tmp_path: Path) -> None:
    db = tmp_path / "fail.db"
    store = SqliteStore(db, answer_file_bytes=1)
    await store.open()
    try:
        await store.create_query(spec("q", SP), 0.0)
        first = await store.submit(ReportColumns.of(rr_run(0, 50, 1)))
        assert first.accepted == 50
        answers = Path(f"{db}.answers") / hashlib.sha256(b"q").hexdigest()
        assert answers.stat().st_size == 50 * 2
        # Storage refuses the next log row (as a full disk would) in the middle of the group.
        with closing(sqlite3.connect(db)) as conn, conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON reports "
                "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
        second = rr_run(50, 50, 2)
        try:
            await store.submit(ReportColumns.of(second))
        except StorageFailure as exc:
            assert "retry" in exc.message
        else:
            raise AssertionError("the failed transaction was acknowledged")
        info = store.query("q")
        assert info is not None and list(info.reports_per_round) == [50, 0]
        assert store.stored_report_count("q") == 50
        assert answers.stat().st_size == 50 * 2  # what the failed group appended is cut off
        with closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("DROP TRIGGER refuse")
        retried = await store.submit(ReportColumns.of(second))
        assert retried.accepted == 50
        await store.advance_round("q")
        round2 = [r._replace(round=2, report_id=key(10**6 + i)) for i, r in enumerate(second)]
        done = await store.submit(ReportColumns.of(round2))
        assert done.accepted == 50
        info = store.query("q")
        assert info is not None and info.completed_devices == 50
    finally:
        await store.close()


async def test_a_file_in_the_per_report_layout_is_converted_on_open(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    store = SqliteStore(db)
    await store.open()
    await store.create_query(spec("q", SP), 0.0)
    round1 = rr_run(0, 20, 3)
    await store.submit(ReportColumns.of(round1))
    await store.advance_round("q")
    round2 = [r._replace(round=2, report_id=key(10**6 + i)) for i, r in enumerate(round1[:5])]
    await store.submit(ReportColumns.of(round2))
    before = store.query("q")
    counts_before = store.counts("q").tolist()
    await store.close()
    # Rewrite the report log as the older layout: one row per report, two unique keys.
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DROP TABLE reports")
        conn.execute(
            "CREATE TABLE reports (query_id TEXT NOT NULL, report_id BLOB NOT NULL, "
            "pseudonym BLOB NOT NULL, round INTEGER NOT NULL, answers BLOB NOT NULL, "
            "PRIMARY KEY (query_id, report_id), UNIQUE (query_id, pseudonym, round)) "
            "WITHOUT ROWID"
        )
        conn.executemany(
            "INSERT INTO reports VALUES (?, ?, ?, ?, ?)",
            [("q", r.report_id, r.pseudonym, r.round, r.answers) for r in round1 + round2],
        )

    store = SqliteStore(db)
    await store.open()
    try:
        assert store.query("q") == before
        assert store.counts("q").tolist() == counts_before
        assert store.stored_report_count("q") == 25
        again = await store.submit(ReportColumns.of(round1 + round2))
        assert (again.accepted, again.duplicates) == (0, 25)
        # Devices 5.. still wait for round 2; device 0 already answered it.
        rest = [r._replace(round=2, report_id=key(2 * 10**6 + i)) for i, r in enumerate(round1)]
        result = await store.submit(ReportColumns.of(rest))
        assert result.accepted == 15
        assert summary(result)[2] == [(i, AlreadyExists) for i in range(5)]
        await store.close_query("q")
        info = store.query("q")
        assert info is not None and info.status == QueryStatus.CLOSED
        assert info.completed_devices == 20
    finally:
        await store.close()
    with closing(sqlite3.connect(db)) as conn, conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(reports)")]
    assert "report_ids" in columns and "report_id" not in columns


async def test_a_full_disk_is_unavailable_and_withdrawn_from_memory_without_a_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "full.db"
    store = SqliteStore(db, max_pages=16)  # a 64 KiB file: full after a few groups
    await store.open()
    acknowledged: list[ReportIn] = []
    refused: list[ReportIn] = []
    try:
        await store.create_query(spec("q", SP), 0.0)
        for group in range(100):
            run = rr_run(group * 50, 50, group)
            try:
                await store.submit(ReportColumns.of(run))
            except Unavailable as exc:
                assert "storage is full" in exc.message and "retry" in exc.message
                refused = run
                break
            acknowledged += run
        assert refused and acknowledged
        info = store.query("q")
        assert info is not None and list(info.reports_per_round) == [len(acknowledged), 0]
        assert store.stored_report_count("q") == len(acknowledged)
        # The refused reports were taken out of memory: sent again, one is new (accepted if
        # it fits in the space left, else refused again), never a duplicate.
        try:
            one = await store.submit(ReportColumns.of(refused[:1]))
        except Unavailable:
            pass
        else:
            assert (one.accepted, one.duplicates) == (1, 0)
            acknowledged, refused = acknowledged + refused[:1], refused[1:]
        again = await store.submit(ReportColumns.of(acknowledged[:3]))
        assert (again.accepted, again.duplicates) == (0, 3)
    finally:
        await store.close()
    assert not [r for r in caplog.records if "reloading state" in r.getMessage()]
    # With room again, the refused group is accepted as new.
    store = SqliteStore(db)
    await store.open()
    try:
        retried = await store.submit(ReportColumns.of(refused))
        assert retried.accepted == len(refused)
        info = store.query("q")
        assert info is not None
        assert list(info.reports_per_round) == [len(acknowledged) + len(refused), 0]
    finally:
        await store.close()


async def test_a_round_two_group_refused_for_space_leaves_its_devices_waiting(
    tmp_path: Path,
) -> None:
    db = tmp_path / "full2.db"
    store = SqliteStore(db, max_pages=16)
    await store.open()
    round1: list[ReportIn] = []
    try:
        await store.create_query(spec("q", SP), 0.0)
        for group in range(100):
            run = rr_run(group * 50, 50, group)
            try:
                await store.submit(ReportColumns.of(run))
            except Unavailable:
                break
            round1 += run
        await store.advance_round("q")
        round2 = [r._replace(round=2, report_id=key(10**7 + i)) for i, r in enumerate(round1)]
        with pytest.raises(Unavailable):
            await store.submit(ReportColumns.of(round2))
        info = store.query("q")
        assert info is not None and info.completed_devices == 0
        assert not store.counts("q").any()
        # The devices still wait for round 2: one sent alone is accepted if it fits (not
        # refused for lacking round 1), else refused for space again.
        try:
            one = await store.submit(ReportColumns.of(round2[:1]))
        except Unavailable:
            pass
        else:
            assert (one.accepted, one.rejected) == (1, [])
    finally:
        await store.close()
    store = SqliteStore(db)
    await store.open()
    try:
        result = await store.submit(ReportColumns.of(round2))
        assert result.accepted + result.duplicates == len(round2) and not result.rejected
        info = store.query("q")
        assert info is not None and info.completed_devices == len(round1)
    finally:
        await store.close()
