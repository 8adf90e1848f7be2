"""SQLite store: one file, WAL, group commit, acknowledgement only after COMMIT.

Design
- One writer thread owns the connection and all mutable query state. Requests (report
  batches and admin changes) go into a queue with an asyncio future each; the writer drains
  whatever is queued (up to `max_group_reports` reports), applies the requests in order inside
  ONE transaction, commits, and only then resolves the futures. Many reports share one fsync
  (group commit) and arrival order decides every race (two copies of a report, a report
  racing CloseQuery). When the previous group held several requests (concurrent submitters),
  the writer waits `commit_delay_s` (2 ms) for more before committing, unless the group is
  already large: far fewer commits, each amortized over more reports, for at most that much
  extra latency; a lone sequential client never waits.
- `synchronous=FULL`: in WAL mode every COMMIT fsyncs the log, so an acknowledged report
  survives power loss. (NORMAL only syncs at checkpoints and can lose the last commits,
  which would make "ack only once durable" untrue.)
- Per-target counts live in memory as numpy int64 arrays and are written in the same
  transaction as the reports they include, so a crash can never separate the two.
- Reports are kept as an append-only log: each transaction writes ONE row per query it
  accepted reports for, holding that group's report ids, pseudonyms and answers as packed
  fixed-width columns. The dedup indexes (report ids, devices per round, Sampling Privacy
  devices awaiting round 2) live in the writer's memory, where every report is checked
  anyway, and are rebuilt from the log at start. SQLite keeps no per-report index: a group
  costs one row insert, not one B-tree insert per report and unique key.
- Reads (list, get, release, ledger) see immutable snapshots published after each commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import grpc
import numpy as np
import numpy.typing as npt

from aggregator.errors import ServiceError
from aggregator.model import (
    Outcome,
    QueryInfo,
    QuerySpec,
    QueryStatus,
    ReleaseRecord,
    TargetRelease,
)
from aggregator.rounds import Accepted, QueryState, ReportColumns
from aggregator.store.base import LedgerFn, ReleaseFn, SubmitResult
from aggregator.store.single_writer import WriterLock
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.wire import REPORT_KEY_BYTES

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS queries (
    query_id          TEXT PRIMARY KEY,
    description       TEXT NOT NULL,
    mechanism         TEXT NOT NULL,    -- "rr" | "sp"
    mechanism_params  TEXT NOT NULL,    -- JSON object of exact fraction text
    scheme            TEXT NOT NULL,    -- "grid" | "h3:<res>"
    targets           BLOB NOT NULL,    -- uint64 little-endian, in query order
    min_reports       INTEGER NOT NULL,
    noise_sigma       TEXT,             -- fraction text; NULL = no release noise
    created_at        REAL NOT NULL,
    status            INTEGER NOT NULL, -- 1 open, 2 closed, 3 released
    current_round     INTEGER NOT NULL,
    reports_per_round TEXT NOT NULL,    -- JSON list, round 1 first
    completed_devices INTEGER NOT NULL,
    counts            BLOB NOT NULL     -- int64 little-endian, rounds x targets, row-major:
                                        -- per-target sums over devices that completed
);
CREATE TABLE IF NOT EXISTS releases (
    query_id    TEXT PRIMARY KEY,
    released_at REAL NOT NULL,
    body        TEXT NOT NULL           -- JSON of the ReleaseRecord
);
CREATE TABLE IF NOT EXISTS ledger (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    body TEXT NOT NULL                  -- the privacy ledger's JSON
);
"""
REPORT_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (  -- append-only report log: one row per query per commit
    seq        INTEGER PRIMARY KEY,
    query_id   TEXT NOT NULL,
    round      INTEGER NOT NULL,
    n          INTEGER NOT NULL,       -- reports in this row
    report_ids BLOB NOT NULL,          -- n x 16 bytes
    pseudonyms BLOB NOT NULL,          -- n x 16 bytes
    answers    BLOB NOT NULL           -- n x ceil(targets / 8) bytes
);
"""
REPORT_LOG_INDEX = "CREATE INDEX IF NOT EXISTS reports_by_query ON reports (query_id)"
# Before the report log, reports were stored one row each (query_id, report_id, pseudonym,
# round, answers); such a file is converted in place when opened.
_LEGACY_REPORT_COLUMNS = {"query_id", "report_id", "pseudonym", "round", "answers"}


class CommitObserver(Protocol):
    def observe_commit(self, seconds: float, requests: int, reports: int) -> None: ...


@dataclass
class _Request:
    """One queued unit of work; `run` applies it in the writer thread."""

    run: Callable[[_Group], Any]
    future: asyncio.Future[Any]
    n_reports: int = 0


@dataclass
class _Group:
    """Changes of one transaction not yet written: accepted reports and touched queries."""

    accepted: dict[str, Accepted] = field(default_factory=dict)  # by query id
    touched: dict[str, QueryState] = field(default_factory=dict)
    report_count: int = 0


_STOP = object()
# The commit delay is skipped for a group that already holds this many reports (its commit is
# well amortized).
_AMORTIZED_GROUP_REPORTS = 1_000


def _not_found(query_id: str) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.NOT_FOUND,
        f"no query {query_id!r}; ListQueries (admin) or ListOpenQueries shows the ids",
    )


class SqliteStore:
    def __init__(
        self,
        path: str | Path,
        *,
        max_group_reports: int = 20_000,
        group_wait_s: float = 0.0,
        commit_delay_s: float = 0.002,
        synchronous: str = "FULL",
        observer: CommitObserver | None = None,
    ) -> None:
        if synchronous.upper() not in {"FULL", "NORMAL", "EXTRA"}:
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        self._path = str(path)
        self._max_group_reports = max_group_reports
        self._group_wait_s = group_wait_s
        self._commit_delay_s = commit_delay_s
        self._synchronous = synchronous.upper()
        self._observer = observer
        self._queue: queue.SimpleQueue[_Request | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: sqlite3.Connection | None = None
        self._writer_lock = WriterLock(path)
        # Writer-owned state.
        self._states: dict[str, QueryState] = {}
        self._ledger_body: str | None = None
        self._release_records: dict[str, ReleaseRecord] = {}
        # Published snapshots (replaced wholesale after each commit).
        self._snapshots: dict[str, QueryInfo] = {}
        self._releases: dict[str, ReleaseRecord] = {}
        self._report_counts: dict[str, int] = {}
        self._counts: dict[str, npt.NDArray[np.int64]] = {}
        self._published_ledger: str | None = None

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._writer_lock.acquire()  # before reading anything: one writer per file
        try:
            self._open_connection()
        except BaseException:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._writer_lock.release()
            raise
        self._thread = threading.Thread(target=self._writer, name="sqlite-writer", daemon=True)
        self._thread.start()

    def _open_connection(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(f"could not switch {self._path} to WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.executescript(SCHEMA)
        self._conn = conn
        self._migrate_legacy_reports()
        conn.execute(REPORT_LOG_SCHEMA)
        conn.execute(REPORT_LOG_INDEX)
        self._load()
        self._publish(self._states.values())
        self._published_ledger = self._ledger_body

    async def close(self) -> None:
        if self._thread is None:
            return
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join)
        self._thread = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._writer_lock.release()

    # ------------------------------------------------------------------ reads

    def queries(self) -> list[QueryInfo]:
        return sorted(self._snapshots.values(), key=lambda q: (q.created_at, q.query_id))

    def query(self, query_id: str) -> QueryInfo | None:
        return self._snapshots.get(query_id)

    def release_of(self, query_id: str) -> ReleaseRecord | None:
        return self._releases.get(query_id)

    def ledger(self) -> str | None:
        return self._published_ledger

    def stored_report_count(self, query_id: str) -> int:
        return self._report_counts.get(query_id, 0)

    def counts(self, query_id: str) -> npt.NDArray[np.int64]:
        """Committed per-target counts (rounds x targets) over devices that completed."""
        counts = self._counts.get(query_id)
        if counts is None:
            raise _not_found(query_id)
        return counts.copy()

    # ------------------------------------------------------------------ writes

    async def submit(self, reports: ReportColumns) -> SubmitResult:
        def run(group: _Group) -> SubmitResult:
            return self._admit(group, reports)

        result: SubmitResult = await self._enqueue(run, len(reports))
        return result

    async def create_query(self, spec: QuerySpec, created_at: float) -> QueryInfo:
        def run(group: _Group) -> QueryInfo:
            if spec.query_id in self._states:
                raise ServiceError(
                    grpc.StatusCode.ALREADY_EXISTS,
                    f"query {spec.query_id!r} already exists; choose another query_id",
                )
            state = QueryState.new(spec, created_at)
            self._insert_query(state)
            self._states[spec.query_id] = state
            group.touched[spec.query_id] = state
            return state.snapshot()

        result: QueryInfo = await self._enqueue(run)
        return result

    async def advance_round(self, query_id: str) -> QueryInfo:
        def run(group: _Group) -> QueryInfo:
            state = self._state(query_id)
            if state.status != QueryStatus.OPEN or state.current_round >= state.rounds:
                where = (
                    f"is {state.status.name.lower()}"
                    if state.status != QueryStatus.OPEN
                    else f"is in its last round ({state.current_round} of {state.rounds})"
                )
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"cannot advance query {query_id!r}: it {where}; "
                    f"only an open Sampling Privacy query in round 1 advances "
                    f"(use CloseQuery to end a query)",
                )
            state.current_round += 1
            group.touched[query_id] = state
            return state.snapshot()

        result: QueryInfo = await self._enqueue(run)
        return result

    async def close_query(self, query_id: str) -> QueryInfo:
        def run(group: _Group) -> QueryInfo:
            state = self._state(query_id)
            if state.status != QueryStatus.OPEN:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"query {query_id!r} is already {state.status.name.lower()}",
                )
            if state.current_round < state.rounds:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"query {query_id!r} is in round {state.current_round} of {state.rounds}; "
                    f"AdvanceRound to round {state.rounds} first (only devices that answer "
                    f"every round are counted)",
                )
            state.status = QueryStatus.CLOSED
            group.touched[query_id] = state
            return state.snapshot()

        result: QueryInfo = await self._enqueue(run)
        return result

    async def release(self, query_id: str, compute: ReleaseFn) -> ReleaseRecord:
        def run(group: _Group) -> ReleaseRecord:
            state = self._state(query_id)
            if state.status == QueryStatus.RELEASED:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"query {query_id!r} was already released (once per query); "
                    f"GetRelease returns that release",
                )
            if state.status != QueryStatus.CLOSED:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"query {query_id!r} is still open (round {state.current_round} of "
                    f"{state.rounds}); CloseQuery before Release",
                )
            if state.completed_devices < state.spec.min_reports:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"query {query_id!r} has {state.completed_devices} devices that completed "
                    f"every round, below its min_reports {state.spec.min_reports}; "
                    f"it cannot be released",
                )
            record, ledger_body = compute(state.snapshot(), state.counts.copy(), self._ledger_body)
            assert self._conn is not None
            self._conn.execute(
                "INSERT INTO releases (query_id, released_at, body) VALUES (?, ?, ?)",
                (query_id, record.released_at, json.dumps(_release_to_json(record))),
            )
            if ledger_body is not None:
                self._write_ledger(ledger_body)
            self._conn.execute("DELETE FROM reports WHERE query_id = ?", (query_id,))
            self._release_records[query_id] = record
            state.forget_reports()
            state.status = QueryStatus.RELEASED
            group.touched[query_id] = state
            return record

        result: ReleaseRecord = await self._enqueue(run)
        return result

    async def update_ledger(self, update: LedgerFn) -> str:
        def run(group: _Group) -> str:
            body = update(self._ledger_body)
            self._write_ledger(body)
            return body

        result: str = await self._enqueue(run)
        return result

    # ------------------------------------------------------------------ writer thread

    async def _enqueue(self, run: Callable[[_Group], Any], n_reports: int = 0) -> Any:
        if self._thread is None or self._loop is None:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, "the store is not open")
        future: asyncio.Future[Any] = self._loop.create_future()
        self._queue.put(_Request(run, future, n_reports))
        return await future

    def _state(self, query_id: str) -> QueryState:
        state = self._states.get(query_id)
        if state is None:
            raise _not_found(query_id)
        return state

    def _writer(self) -> None:
        carry: _Request | None = None
        stopping = False
        last_group_requests = 1
        while not stopping:
            first = carry if carry is not None else self._queue.get()
            carry = None
            if first is _STOP:
                break
            assert isinstance(first, _Request)
            batch = [first]
            n_reports = first.n_reports
            if self._group_wait_s > 0:
                time.sleep(self._group_wait_s)
            carry, stopping, n_reports = self._drain(batch, n_reports)
            if (
                self._commit_delay_s > 0
                and self._group_wait_s == 0
                and last_group_requests > 1
                and carry is None
                and not stopping
                and n_reports < _AMORTIZED_GROUP_REPORTS
            ):
                # Commit delay (like PostgreSQL's commit_delay with commit_siblings): the last
                # group shows concurrent submitters, so let more requests join this one. A lone
                # client (groups of one request) never waits.
                time.sleep(self._commit_delay_s)
                carry, stopping, n_reports = self._drain(batch, n_reports)
            last_group_requests = len(batch)
            self._commit_group(batch, n_reports)
        # Drain whatever arrived with or after the stop request: refuse it.
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Request):
                self._resolve([(item.future, _unavailable())])
        if carry is not None:
            self._resolve([(carry.future, _unavailable())])

    def _drain(self, batch: list[_Request], n_reports: int) -> tuple[_Request | None, bool, int]:
        """Move queued requests into `batch` up to `max_group_reports` reports.

        Returns (a request that did not fit, to start the next group; whether stop was
        requested; the reports now in `batch`).
        """
        while n_reports < self._max_group_reports:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return None, True, n_reports
            assert isinstance(item, _Request)
            if n_reports + item.n_reports > self._max_group_reports:
                return item, False, n_reports
            batch.append(item)
            n_reports += item.n_reports
        return None, False, n_reports

    def _commit_group(self, batch: list[_Request], n_reports: int) -> None:
        assert self._conn is not None
        started = time.perf_counter()
        group = _Group()
        results: list[tuple[asyncio.Future[Any], object]] = []
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            for request in batch:
                if request.n_reports == 0:
                    # Admin changes see every report queued before them.
                    self._flush(group)
                try:
                    results.append((request.future, request.run(group)))
                except ServiceError as exc:
                    results.append((request.future, exc))
            self._flush(group)
            for state in group.touched.values():
                self._update_query(state)
            self._conn.execute("COMMIT")
        except Exception as exc:  # a failed transaction: nothing of this group happened
            log.exception("transaction failed; reloading state from %s", self._path)
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            self._load()
            group.touched = dict(self._states)
            error = ServiceError(grpc.StatusCode.INTERNAL, f"storage failure, retry: {exc}")
            results = [(request.future, error) for request in batch]
        self._publish(group.touched.values())
        self._published_ledger = self._ledger_body
        elapsed = time.perf_counter() - started
        if self._observer is not None:
            self._observer.observe_commit(elapsed, len(batch), n_reports)
        self._resolve(results)

    def _resolve(self, results: list[tuple[asyncio.Future[Any], object]]) -> None:
        if self._loop is None or not results:
            return
        # A closed loop means nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_settle, results)

    def _accepted(self, group: _Group, state: QueryState) -> Accepted:
        query_id = state.spec.query_id
        accepted = group.accepted.get(query_id)
        if accepted is None:
            accepted = group.accepted[query_id] = state.new_accepted()
            group.touched[query_id] = state
        return accepted

    def _admit(self, group: _Group, reports: ReportColumns) -> SubmitResult:
        n = len(reports)
        if n == 0:
            return SubmitResult()
        states = self._states
        query_ids = reports.query_ids
        first = query_ids[0]
        state = states.get(first)
        # The common case, a run of new valid reports for one query, in one step (a single
        # report is cheaper to check on its own).
        if (
            n > 1
            and state is not None
            and query_ids.count(first) == n
            and state.admit_all(reports, self._accepted(group, state))
        ):
            return SubmitResult(accepted=n)
        result = SubmitResult()
        for index in range(n):
            report = reports.report(index)
            state = states.get(report.query_id)
            if state is None:
                outcome = Outcome(grpc.StatusCode.NOT_FOUND, str(_not_found(report.query_id)))
            else:
                outcome = state.admit(report, self._accepted(group, state))
            if not outcome.ok:
                result.rejected.append((index, outcome))
            elif outcome.duplicate:
                result.duplicates += 1
            else:
                result.accepted += 1
        return result

    def _flush(self, group: _Group) -> None:
        """Append the accepted reports to the log and add completed devices to the counts."""
        assert self._conn is not None
        rows: list[tuple[str, int, int, bytes, bytes, bytes]] = []
        for query_id, accepted in group.accepted.items():
            if accepted.count == 0:
                continue
            rows.append(
                (
                    query_id,
                    accepted.round,
                    accepted.count,
                    b"".join(accepted.report_ids),
                    b"".join(accepted.pseudonyms),
                    b"".join(accepted.answers),
                )
            )
            self._states[query_id].add_completed(accepted)
            self._report_counts[query_id] = self._report_counts.get(query_id, 0) + accepted.count
            group.report_count += accepted.count
        if rows:
            self._conn.executemany(
                "INSERT INTO reports (query_id, round, n, report_ids, pseudonyms, answers) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
        group.accepted.clear()

    def _publish(self, states: Any) -> None:
        snapshots = dict(self._snapshots)
        counts = dict(self._counts)
        for state in states:
            snapshots[state.spec.query_id] = state.snapshot()
            counts[state.spec.query_id] = state.counts.copy()
            if state.status == QueryStatus.RELEASED:
                self._report_counts[state.spec.query_id] = 0
        self._snapshots = snapshots
        self._counts = counts
        self._releases = dict(self._release_records)

    # ------------------------------------------------------------------ rows

    def _insert_query(self, state: QueryState) -> None:
        assert self._conn is not None
        spec = state.spec
        self._conn.execute(
            "INSERT INTO queries (query_id, description, mechanism, mechanism_params, scheme, "
            "targets, min_reports, noise_sigma, created_at, status, current_round, "
            "reports_per_round, completed_devices, counts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                spec.query_id,
                spec.description,
                spec.mechanism.name,
                json.dumps(spec.mechanism.params()),
                spec.scheme,
                np.asarray(spec.targets, dtype="<u8").tobytes(),
                spec.min_reports,
                None if spec.noise_sigma is None else str(spec.noise_sigma),
                state.created_at,
                int(state.status),
                state.current_round,
                json.dumps(state.reports_per_round),
                state.completed_devices,
                state.counts.astype("<i8").tobytes(),
            ),
        )

    def _update_query(self, state: QueryState) -> None:
        assert self._conn is not None
        self._conn.execute(
            "UPDATE queries SET status = ?, current_round = ?, reports_per_round = ?, "
            "completed_devices = ?, counts = ? WHERE query_id = ?",
            (
                int(state.status),
                state.current_round,
                json.dumps(state.reports_per_round),
                state.completed_devices,
                state.counts.astype("<i8").tobytes(),
                state.spec.query_id,
            ),
        )

    def _write_ledger(self, body: str) -> None:
        assert self._conn is not None
        self._conn.execute(
            "INSERT INTO ledger (id, body) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET body = excluded.body",
            (body,),
        )
        self._ledger_body = body

    def _migrate_legacy_reports(self) -> None:
        """Convert a file from the one-row-per-report layout to the report log, atomically."""
        assert self._conn is not None
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(reports)")}
        if columns != _LEGACY_REPORT_COLUMNS:
            return
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("ALTER TABLE reports RENAME TO reports_legacy")
            conn.execute(REPORT_LOG_SCHEMA)
            groups: dict[tuple[str, int], tuple[list[bytes], list[bytes], list[bytes]]] = {}
            for qid, report_id, pseudonym, round_, answers in conn.execute(
                "SELECT query_id, report_id, pseudonym, round, answers FROM reports_legacy "
                "ORDER BY round"
            ):
                ids, pseudonyms, all_answers = groups.setdefault((qid, round_), ([], [], []))
                ids.append(report_id)
                pseudonyms.append(pseudonym)
                all_answers.append(answers)
            conn.executemany(
                "INSERT INTO reports (query_id, round, n, report_ids, pseudonyms, answers) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (qid, round_, len(ids), b"".join(ids), b"".join(ps), b"".join(answers))
                    for (qid, round_), (ids, ps, answers) in groups.items()
                ],
            )
            conn.execute("DROP TABLE reports_legacy")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("converted %s to the report log layout", self._path)

    def _load(self) -> None:
        """(Re)build all writer-owned state from the committed file."""
        assert self._conn is not None
        self._states = {}
        self._release_records = {}
        for row in self._conn.execute(
            "SELECT query_id, description, mechanism, mechanism_params, scheme, targets, "
            "min_reports, noise_sigma, created_at, status, current_round, reports_per_round, "
            "completed_devices, counts FROM queries"
        ):
            (qid, description, mech_name, params, scheme, targets, min_reports, sigma,
             created_at, status, current_round, per_round, completed, counts) = row  # fmt: skip
            mechanism = mechanism_from_params(mech_name, json.loads(params))
            spec = QuerySpec(
                query_id=qid,
                description=description,
                mechanism=mechanism,
                scheme=scheme,
                targets=tuple(int(t) for t in np.frombuffer(targets, dtype="<u8")),
                min_reports=min_reports,
                noise_sigma=None if sigma is None else Fraction(sigma),
            )
            state = QueryState.new(spec, created_at)
            state.status = QueryStatus(status)
            state.current_round = current_round
            state.reports_per_round = [int(x) for x in json.loads(per_round)]
            state.completed_devices = completed
            state.counts = (
                np.frombuffer(counts, dtype="<i8")
                .astype(np.int64)
                .reshape(mechanism.rounds, len(spec.targets))
            )
            self._states[qid] = state
        self._report_counts = {}
        for qid, round_, n, report_ids, pseudonyms, answers in self._conn.execute(
            "SELECT query_id, round, n, report_ids, pseudonyms, answers FROM reports ORDER BY seq"
        ):
            state = self._states[qid]
            state.restore_reports(
                round_,
                _split(report_ids, n, REPORT_KEY_BYTES),
                _split(pseudonyms, n, REPORT_KEY_BYTES),
                _split(answers, n, state.answer_bytes),
            )
            self._report_counts[qid] = self._report_counts.get(qid, 0) + n
        for qid, body in self._conn.execute("SELECT query_id, body FROM releases"):
            self._release_records[qid] = _release_from_json(json.loads(body))
        row = self._conn.execute("SELECT body FROM ledger WHERE id = 1").fetchone()
        self._ledger_body = None if row is None else str(row[0])


def _split(packed: bytes, n: int, width: int) -> list[bytes]:
    """The `n` fixed-width entries of a packed log column."""
    if len(packed) != n * width:
        raise RuntimeError(
            f"corrupt report log: a column of {n} entries of {width} bytes has {len(packed)} bytes"
        )
    return [packed[i : i + width] for i in range(0, n * width, width)]


def _unavailable() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "the aggregator is shutting down; retry")


def _settle(results: list[tuple[asyncio.Future[Any], object]]) -> None:
    for future, value in results:
        if future.done():
            continue
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)


def _release_to_json(record: ReleaseRecord) -> dict[str, Any]:
    return asdict(record)


def _release_from_json(data: dict[str, Any]) -> ReleaseRecord:
    return ReleaseRecord(
        query_id=data["query_id"],
        participants=int(data["participants"]),
        released_at=float(data["released_at"]),
        estimates=tuple(
            TargetRelease(
                location_id=int(e["location_id"]),
                estimate=float(e["estimate"]),
                std_error=float(e["std_error"]),
                ci_low=float(e["ci_low"]),
                ci_high=float(e["ci_high"]),
                participants=int(e["participants"]),
                round_counts=tuple(int(c) for c in e["round_counts"]),
            )
            for e in data["estimates"]
        ),
        claims=tuple(dict(c) for c in data["claims"]),
    )
