"""The SQLite store's answer files (`aggregator/store/answer_files.py`): what a crash leaves
behind is cut off or removed at open, a file missing committed answers is refused, and held
answers read back from the files decide duplicates and Sampling Privacy's round 2."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aggregator.errors import AlreadyExists
from aggregator.release import release_function
from aggregator.rounds import ReportColumns
from aggregator.store.sqlite import SqliteStore
from aggregator.store.sqlite_backup import BackupFailed, backup
from aggregator.store.sqlite_file import DatabaseUnusable
from tests.aggregator.store_contract import RR, SP, key, rr_run, spec

WIDTH = 2  # answer bytes a report at the contract's 10 targets


def answer_file(db: Path, query_id: str = "q") -> Path:
    return Path(f"{db}.answers") / hashlib.sha256(query_id.encode()).hexdigest()


async def _two_rounds(db: Path, *, restart_with: bytes | None) -> tuple[list[int], int]:
    """SP: 60 devices in round 1 (answers to the answer file), a restart (after appending
    `restart_with` to the file, as a transaction that died before COMMIT would) with the
    default threshold (the round-2 answers of these narrow reports go to the log rows), then
    40 of them in round 2."""
    round1 = rr_run(0, 60, 7)
    store = SqliteStore(db, answer_file_bytes=1)
    await store.open()
    await store.create_query(spec("q", SP), 0.0)
    assert (await store.submit(ReportColumns.of(round1))).accepted == 60
    await store.close()
    assert answer_file(db).stat().st_size == 60 * WIDTH
    if restart_with is not None:
        with answer_file(db).open("ab") as file:
            file.write(restart_with)
    store = SqliteStore(db)
    await store.open()
    try:
        assert answer_file(db).stat().st_size == 60 * WIDTH  # cut back to the committed rows
        again = await store.submit(ReportColumns.of(round1[:5]))
        assert (again.accepted, again.duplicates) == (0, 5)
        # The same report id with other answers: told apart by reading the held answers.
        other = round1[0]._replace(answers=bytes(b ^ 0x80 for b in round1[0].answers))
        refused = await store.submit(ReportColumns.of([other]))
        assert [type(outcome.refusal) for _, outcome in refused.rejected] == [AlreadyExists]
        await store.advance_round("q")
        round2 = [r._replace(round=2, report_id=key(10**6 + i)) for i, r in enumerate(round1)]
        assert (await store.submit(ReportColumns.of(round2[:40]))).accepted == 40
        info = store.query("q")
        assert info is not None
        return store.counts("q")[1].tolist(), info.completed_devices
    finally:
        await store.close()


async def test_bytes_past_the_committed_rows_are_cut_off_and_held_answers_read_back(
    tmp_path: Path,
) -> None:
    clean = await _two_rounds(tmp_path / "clean.db", restart_with=None)
    torn = await _two_rounds(tmp_path / "torn.db", restart_with=b"\xff" * 777)
    assert torn == clean
    assert clean[1] == 40 and sum(clean[0]) > 0


async def test_a_file_shorter_than_its_committed_rows_is_refused_by_name(tmp_path: Path) -> None:
    db = tmp_path / "short.db"
    store = SqliteStore(db, answer_file_bytes=1)
    await store.open()
    await store.create_query(spec("q", SP), 0.0)
    assert (await store.submit(ReportColumns.of(rr_run(0, 30, 1)))).accepted == 30
    await store.close()
    with answer_file(db).open("r+b") as file:
        file.truncate(30 * WIDTH - 1)
    with pytest.raises(DatabaseUnusable) as refused:
        await SqliteStore(db).open()
    assert str(answer_file(db)) in str(refused.value)
    assert "acknowledged answers are missing" in str(refused.value)
    assert answer_file(db).stat().st_size == 30 * WIDTH - 1  # left as it was


async def test_files_of_released_or_unknown_queries_are_removed_at_open(tmp_path: Path) -> None:
    db = tmp_path / "stray.db"
    store = SqliteStore(db, answer_file_bytes=1)
    await store.open()
    for query_id in ("gone", "kept"):
        await store.create_query(spec(query_id, RR), 0.0)
        run = [r._replace(query_id=query_id) for r in rr_run(0, 20, 2)]
        assert (await store.submit(ReportColumns.of(run))).accepted == 20
    left = answer_file(db, "gone").read_bytes()
    await store.close_query("gone")
    await store.release("gone", release_function())
    assert not answer_file(db, "gone").exists()
    await store.close()
    # As a process killed between the release's COMMIT and the file's deletion leaves it,
    # and a file no query names.
    answer_file(db, "gone").write_bytes(left)
    answer_file(db, "never").write_bytes(b"\0" * 10)
    store = SqliteStore(db)
    await store.open()
    try:
        assert sorted(p.name for p in Path(f"{db}.answers").iterdir()) == [
            answer_file(db, "kept").name
        ]
        assert store.stored_report_count("kept") == 20
    finally:
        await store.close()


FULL_CHILD = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    import numpy as np
    from aggregator.errors import Unavailable
    from aggregator.model import QuerySpec, ReportIn
    from aggregator.rounds import ReportColumns
    from aggregator.store.sqlite import SqliteStore
    from tests.aggregator.store_contract import RR, key

    TARGETS = 4000  # 500 answer bytes a report: the answer file fills before SQLite's

    def group(g):
        rng = np.random.default_rng(g)
        bits = rng.integers(0, 2, size=(500, TARGETS), dtype=np.uint8)
        answers = np.packbits(bits, axis=1)
        return [
            ReportIn("q", 1, key(2 * i), key(2 * i + 1), answers[i % 500].tobytes())
            for i in range(g * 500, g * 500 + 500)
        ]

    async def main(db, answer_file):
        store = SqliteStore(db)
        await store.open()
        await store.create_query(
            QuerySpec("q", "", RR, "grid", tuple(range(1, TARGETS + 1)), 1, None), 0.0
        )
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (600_000, resource.RLIM_INFINITY))
        acknowledged = 0
        for g in range(100):
            try:
                await store.submit(ReportColumns.of(group(g)))
            except Unavailable as exc:
                assert "storage is full" in exc.message, exc.message
                break
            acknowledged += 500
        else:
            raise AssertionError("the file never filled")
        with open(answer_file, "rb") as file:
            assert len(file.read()) == acknowledged * 500  # the refused group is cut off
        again = await store.submit(ReportColumns.of(group(0)))
        assert (again.accepted, again.duplicates) == (0, 500)
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        retried = await store.submit(ReportColumns.of(group(g)))
        assert retried.accepted == 500, retried
        await store.close()
        store = SqliteStore(db)
        await store.open()
        info = store.query("q")
        assert list(info.reports_per_round) == [acknowledged + 500], info
        await store.close()
        print("ok", acknowledged, flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_a_full_answer_file_refuses_the_group_and_cuts_it_off(tmp_path: Path) -> None:
    db = tmp_path / "full.db"
    done = subprocess.run(
        [sys.executable, "-c", FULL_CHILD, str(db), str(answer_file(db))],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    status, acknowledged = done.stdout.split()
    assert status == "ok" and int(acknowledged) >= 500


async def test_a_backup_whose_answers_are_gone_is_refused_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    db, copy = tmp_path / "gone.db", tmp_path / "copy.db"
    store = SqliteStore(db, answer_file_bytes=1)
    await store.open()
    await store.create_query(spec("q", SP), 0.0)
    assert (await store.submit(ReportColumns.of(rr_run(0, 30, 1)))).accepted == 30
    await store.close()
    answer_file(db).unlink()  # as a release between the snapshot and the copy leaves it
    with pytest.raises(BackupFailed, match="try again"):
        backup(db, copy, attempts=2)
    assert not copy.exists() and not Path(f"{copy}.answers").exists()
