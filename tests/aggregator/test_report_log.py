"""The store's report log and in-memory dedup: same rules as one report at a time, durable.

These drive the real `SqliteStore` on real files: batches that mix every kind of report
against a plain model of the rules (DESIGN.md section 4), restarts that rebuild the dedup
state from the log, a process killed between groups, a transaction that fails half-way, and a
file written in the older one-row-per-report layout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aggregator.errors import ServiceError
from aggregator.model import QuerySpec, QueryStatus, ReportIn
from aggregator.rounds import ReportColumns
from aggregator.store.base import SubmitResult
from aggregator.store.sqlite import SqliteStore
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

N_TARGETS = 10  # 2 answer bytes, the last 6 bits padding
TARGETS = tuple(range(1, N_TARGETS + 1))
RR = RandomizedResponse("0.85", "0.3")
SP = SamplingPrivacy("1/2")


def spec(query_id: str, mech: Mechanism) -> QuerySpec:
    return QuerySpec(query_id, "", mech, "grid", TARGETS, 1, None)


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def bits_of(answers: bytes) -> list[int]:
    packed = np.frombuffer(answers, dtype=np.uint8)
    return [int(b) for b in np.unpackbits(packed, count=N_TARGETS)]


@dataclass
class Model:
    """The ingest rules for one query, one report at a time, written out plainly."""

    rounds: int
    current_round: int = 1
    by_id: dict[bytes, tuple[bytes, int, bytes]] = field(default_factory=dict)
    devices: set[tuple[bytes, int]] = field(default_factory=set)
    awaiting: dict[bytes, bytes] = field(default_factory=dict)
    per_round: list[int] = field(default_factory=lambda: [0, 0])
    completed: int = 0
    counts: list[list[int]] = field(default_factory=lambda: [[0] * N_TARGETS, [0] * N_TARGETS])

    def admit(self, r: ReportIn) -> grpc.StatusCode | str:
        if len(r.report_id) != 16 or len(r.pseudonym) != 16:
            return grpc.StatusCode.INVALID_ARGUMENT
        if r.report_id in self.by_id:
            same = self.by_id[r.report_id] == (r.pseudonym, r.round, r.answers)
            return "duplicate" if same else grpc.StatusCode.ALREADY_EXISTS
        if r.round != self.current_round:
            return grpc.StatusCode.FAILED_PRECONDITION
        if len(r.answers) != 2 or r.answers[-1] & 0b0011_1111:
            return grpc.StatusCode.INVALID_ARGUMENT
        if (r.pseudonym, r.round) in self.devices:
            return grpc.StatusCode.ALREADY_EXISTS
        if r.round == 2:
            if r.pseudonym not in self.awaiting:
                return grpc.StatusCode.FAILED_PRECONDITION
            self.add((self.awaiting.pop(r.pseudonym), r.answers))
        elif self.rounds == 2:
            self.awaiting[r.pseudonym] = r.answers
        else:
            self.add((r.answers,))
        self.by_id[r.report_id] = (r.pseudonym, r.round, r.answers)
        self.devices.add((r.pseudonym, r.round))
        self.per_round[r.round - 1] += 1
        return "accepted"

    def add(self, answers: tuple[bytes, ...]) -> None:
        self.completed += 1
        for round_index, packed in enumerate(answers):
            for t, bit in enumerate(bits_of(packed)):
                self.counts[round_index][t] += bit

    def in_round(self, reports: list[ReportIn]) -> list[ReportIn]:
        """The reports with round 0 replaced by the current round."""
        return [r._replace(round=r.round or self.current_round) for r in reports]

    def submit(self, reports: list[ReportIn]) -> Summary:
        """(accepted, duplicates, [(index, code) of each rejected report])."""
        outcomes = [self.admit(report) for report in reports]
        return (
            outcomes.count("accepted"),
            outcomes.count("duplicate"),
            [(i, o) for i, o in enumerate(outcomes) if isinstance(o, grpc.StatusCode)],
        )


Summary = tuple[int, int, list[tuple[int, grpc.StatusCode]]]


def summary(result: SubmitResult) -> Summary:
    return result.accepted, result.duplicates, [(i, o.code) for i, o in result.rejected]


# A small pool so that runs collide (6 devices, 8 report ids), mostly well-formed so that
# whole runs of valid reports are common; round 0 stands for the query's current round.
GOOD_ANSWERS = [b"\xa5\x40", b"\x00\x00", b"\xff\xc0"]
BAD_ANSWERS = [b"\x12\x41", b"\x12", b"\x12\x40\x00"]
report_strategy = st.builds(
    ReportIn,
    query_id=st.just("q"),
    round=st.sampled_from([0] * 8 + [1, 2]),
    pseudonym=st.sampled_from([key(i) for i in range(1, 7)] * 3 + [b"short"]),
    report_id=st.sampled_from([key(10 + i) for i in range(8)] * 3 + [b"\x01" * 15]),
    answers=st.sampled_from(GOOD_ANSWERS * 6 + BAD_ANSWERS),
)
# A step is a run of reports submitted together, or None: advance to round 2 (SP only).
steps_strategy = st.lists(
    st.one_of(st.lists(report_strategy, min_size=1, max_size=6), st.none()), max_size=8
)


async def _apply_steps(
    db: Path, mech: Mechanism, steps: list[list[ReportIn] | None]
) -> tuple[Model, SqliteStore, list[list[ReportIn]]]:
    model = Model(rounds=mech.rounds)
    sent: list[list[ReportIn]] = []
    store = SqliteStore(db)
    await store.open()
    await store.create_query(spec("q", mech), 0.0)
    for step in steps:
        if step is None:
            if model.rounds == 2 and model.current_round == 1:
                await store.advance_round("q")
                model.current_round = 2
            continue
        run = model.in_round(step)
        got = await store.submit(ReportColumns.of(run))
        assert summary(got) == model.submit(run)
        sent.append(run)
    return model, store, sent


def _assert_matches(store: SqliteStore, model: Model) -> None:
    info = store.query("q")
    assert info is not None
    assert list(info.reports_per_round) == model.per_round[: model.rounds]
    assert info.completed_devices == model.completed
    assert store.stored_report_count("q") == sum(model.per_round)
    assert store.counts("q").tolist() == model.counts[: model.rounds]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(use_sp=st.booleans(), steps=steps_strategy, replay=st.lists(report_strategy, max_size=6))
def test_runs_follow_the_one_report_rules_and_survive_a_restart(
    use_sp: bool, steps: list[list[ReportIn] | None], replay: list[ReportIn]
) -> None:
    mech: Mechanism = SP if use_sp else RR

    async def scenario(db: Path) -> None:
        model, store, sent = await _apply_steps(db, mech, steps)
        _assert_matches(store, model)
        await store.close()
        # A new store on the same file rebuilds the dedup state from the report log.
        store = SqliteStore(db)
        await store.open()
        try:
            _assert_matches(store, model)
            everything = [r for run in sent for r in run]
            for run in (everything, model.in_round(replay)):
                if run:
                    got = await store.submit(ReportColumns.of(run))
                    assert summary(got) == model.submit(run)
            _assert_matches(store, model)
        finally:
            await store.close()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "log.db"))


MUTATIONS = (
    None,
    "repeat_id",  # a second report under an id used earlier in the run
    "repeat_device",  # the same device twice in the run
    "copy",  # an exact copy of an earlier report of the run
    "old_id",  # an id accepted before the run
    "old_device",  # a device that already reported this round
    "no_round1",  # round 2 from a device that skipped round 1
    "long_answers",
    "padding",
    "short_id",
    "short_device",
    "other_round",
)


def _fresh_run(model: Model, n: int, mutation: str | None, at: int, serial: int) -> list[ReportIn]:
    """A run of new valid reports for the current round, with at most one defect."""
    round_ = model.current_round
    if round_ == 2:
        devices = list(model.awaiting)[:n]
    else:
        devices = [key(10**6 + serial * 10 + i) for i in range(n)]
    run = [
        ReportIn("q", round_, device, key(2 * 10**6 + serial * 10 + i), GOOD_ANSWERS[i % 3])
        for i, device in enumerate(devices)
    ]
    if not run or mutation is None:
        return run
    i = at % len(run)
    j = (i + 1) % len(run)
    old = [r for r in model.by_id.items() if r[1][1] == round_]
    changes = {
        "repeat_id": {"report_id": run[j].report_id},
        "repeat_device": {"pseudonym": run[j].pseudonym},
        "copy": dict(run[j]._asdict()),
        "old_id": {"report_id": old[0][0]} if old else {},
        "old_device": {"pseudonym": old[-1][1][0]} if old else {},
        "no_round1": {"pseudonym": key(3 * 10**6 + serial)},
        "long_answers": {"answers": run[i].answers + b"\x00"},
        "padding": {"answers": BAD_ANSWERS[0]},
        "short_id": {"report_id": b"\x05" * 15},
        "short_device": {"pseudonym": b"\x05" * 17},
        "other_round": {"round": 3 - round_},
    }[mutation]
    run[i] = run[i]._replace(**changes)
    return run


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    use_sp=st.booleans(),
    runs=st.lists(
        st.tuples(st.integers(1, 6), st.sampled_from(MUTATIONS), st.integers(0, 5)),
        min_size=1,
        max_size=6,
    ),
    advance_after=st.integers(0, 6),
)
def test_runs_of_new_reports_with_one_defect_follow_the_one_report_rules(
    use_sp: bool, runs: list[tuple[int, str | None, int]], advance_after: int
) -> None:
    mech: Mechanism = SP if use_sp else RR

    async def scenario(db: Path) -> None:
        model = Model(rounds=mech.rounds)
        store = SqliteStore(db)
        await store.open()
        try:
            await store.create_query(spec("q", mech), 0.0)
            for serial, (n, mutation, at) in enumerate(runs):
                if serial == advance_after and model.rounds == 2:
                    await store.advance_round("q")
                    model.current_round = 2
                run = _fresh_run(model, n, mutation, at, serial)
                if run:
                    got = await store.submit(ReportColumns.of(run))
                    assert summary(got) == model.submit(run), mutation
            _assert_matches(store, model)
        finally:
            await store.close()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "runs.db"))


def _rr_run(first: int, n: int, seed: int) -> list[ReportIn]:
    rng = np.random.default_rng(seed)
    answers = np.packbits(rng.integers(0, 2, size=(n, N_TARGETS), dtype=np.uint8), axis=1)
    return [
        ReportIn("q", 1, key(2 * i), key(2 * i + 1), answers[i - first].tobytes())
        for i in range(first, first + n)
    ]


def _log_sums(db: Path) -> tuple[int, list[int], set[bytes]]:
    """Reports, per-target Yes counts and report ids in the log, read with plain SQL."""
    ids: set[bytes] = set()
    total = 0
    counts = np.zeros(N_TARGETS, dtype=np.int64)
    with closing(sqlite3.connect(db)) as conn, conn:
        for n, report_ids, answers in conn.execute("SELECT n, report_ids, answers FROM reports"):
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
    from tests.aggregator.test_report_log import RR, _rr_run, spec

    async def main(db):
        store = SqliteStore(db)
        await store.open()
        await store.create_query(spec("q", RR), 0.0)
        for group in range(10_000):
            run = _rr_run(group * 100, 100, group)
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
        assert {r.report_id for r in _rr_run(group * 100, 100, group)} <= ids

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
            again = await store.submit(ReportColumns.of(_rr_run(0, 100, 0)))
            assert (again.accepted, again.duplicates) == (0, 100)
            fresh = await store.submit(ReportColumns.of(_rr_run(groups * 100, 100, groups)))
            assert fresh.accepted == 100
        finally:
            await store.close()

    asyncio.run(reopen())


async def test_a_failed_transaction_changes_nothing_and_a_retry_succeeds(tmp_path: Path) -> None:
    db = tmp_path / "fail.db"
    store = SqliteStore(db)
    await store.open()
    try:
        await store.create_query(spec("q", SP), 0.0)
        first = await store.submit(ReportColumns.of(_rr_run(0, 50, 1)))
        assert first.accepted == 50
        # Storage refuses the next log row (as a full disk would) in the middle of the group.
        with closing(sqlite3.connect(db)) as conn, conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON reports "
                "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
        second = _rr_run(50, 50, 2)
        try:
            await store.submit(ReportColumns.of(second))
        except ServiceError as exc:
            assert exc.code == grpc.StatusCode.INTERNAL and "retry" in exc.message
        else:
            raise AssertionError("the failed transaction was acknowledged")
        info = store.query("q")
        assert info is not None and list(info.reports_per_round) == [50, 0]
        assert store.stored_report_count("q") == 50
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
    round1 = _rr_run(0, 20, 3)
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
        assert [(i, o.code) for i, o in result.rejected] == [
            (i, grpc.StatusCode.ALREADY_EXISTS) for i in range(5)
        ]
        await store.close_query("q")
        info = store.query("q")
        assert info is not None and info.status == QueryStatus.CLOSED
        assert info.completed_devices == 20
    finally:
        await store.close()
    with closing(sqlite3.connect(db)) as conn, conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(reports)")]
    assert "report_ids" in columns and "report_id" not in columns
