"""SQLite store: one file, WAL, group commit, acknowledgement only after COMMIT.

This module holds what is SQLite's own: the SQL, the single writer thread with its group
commit and asyncio bridge, and the conversion of the older file layout. The rules it applies
(`aggregator.lifecycle`, `aggregator.admission`), the row encoding (`rows`, `release_codec`)
and the published reads (`snapshots`) are shared with any other backend.

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
  anyway, in compact sorted form, and are rebuilt from the log at start with one sort per
  index. SQLite keeps no per-report index: a group costs one row insert, not one B-tree
  insert per report and unique key. A repeated report id is compared with the report it
  names by reading that one report back from its log row (`log_held`). An encrypted query's
  answers live in an append-only file of its own beside the database (`answer_files`),
  flushed to disk before the COMMIT of the rows that point at them: SQLite would write them
  twice (log and checkpoint).
- Reads (list, get, release, ledger) see immutable snapshots published after each commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from aggregator import lifecycle
from aggregator.admission import PendingChanges, admit, admit_many
from aggregator.errors import ServiceError, StorageFailure, Unavailable
from aggregator.model import (
    QueryInfo,
    QuerySpec,
    QueryStatus,
    Redemption,
    ReleaseRecord,
    SubmitResult,
)
from aggregator.rounds import Accepted, Counts, LogEntry, QueryState, ReportColumns
from aggregator.store import spent_tokens
from aggregator.store.answer_files import AnswerFiles, write_at
from aggregator.store.base import LedgerFn, ReleaseFn
from aggregator.store.log_held import LogHeld, SealAnswers
from aggregator.store.release_codec import release_from_json, release_to_json
from aggregator.store.report_cipher import ReportCipher
from aggregator.store.report_keys import erase_reports, load_keys, record_key
from aggregator.store.rows import PROGRESS_COLUMNS, LogRow, QueryRow, progress_values
from aggregator.store.single_writer import DatabaseInUse, WriterLock
from aggregator.store.snapshots import Snapshots
from aggregator.store.sqlite_file import (
    INSERT_LOG,
    INSERT_LOG_AT,
    SCHEMA,
    DatabaseUnusable,
    add_report_columns,
    create_private,
    migrate_legacy_reports,
    storage_error,
)
from aggregator.store.writer_phases import PhaseClock, WriterPhases

log = logging.getLogger(__name__)


_INSERT_QUERY = (
    f"INSERT INTO queries ({', '.join(QueryRow._fields)}) "
    f"VALUES ({', '.join('?' * len(QueryRow._fields))})"
)
_UPDATE_PROGRESS = (
    f"UPDATE queries SET {', '.join(f'{c} = ?' for c in PROGRESS_COLUMNS)} WHERE query_id = ?"
)


class CommitObserver(Protocol):
    def observe_commit(
        self, seconds: float, requests: int, reports: int, phases: WriterPhases | None = None
    ) -> None: ...


@dataclass
class _Request:
    """One queued unit of work; `run` applies it in the writer thread."""

    run: Callable[[PendingChanges], Any]
    future: asyncio.Future[Any]
    n_reports: int = 0
    reports: ReportColumns | None = None  # a submission: admitted with its neighbours


_STOP = object()
# The commit delay is skipped for a group that already holds this many reports (its commit is
# well amortized).
_AMORTIZED_GROUP_REPORTS = 1_000
# A group whose completed answers exceed this many bytes is summed on a second thread.
_WIDE_SUMS = 1 << 20


class SqliteStore(Snapshots):
    def __init__(
        self,
        path: str | Path,
        *,
        max_group_reports: int = 20_000,
        group_wait_s: float = 0.0,
        commit_delay_s: float = 0.002,
        synchronous: str = "FULL",
        max_pages: int | None = None,
        observer: CommitObserver | None = None,
        answer_file_bytes: int = 64,
    ) -> None:
        """`max_pages` caps the file's size in pages (PRAGMA max_page_count, 4 KiB pages):
        beyond it writes fail as on a full disk. An encrypted query whose answers take at
        least `answer_file_bytes` a report (64: 512 targets) writes them to its answer file
        (`answer_files`); narrower answers stay in the log rows, where the second write costs
        little and a batch mixing queries is spared one fdatasync per query."""
        if synchronous.upper() not in {"FULL", "NORMAL", "EXTRA"}:
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        super().__init__()
        self._path = str(path)
        self._max_group_reports = max_group_reports
        self._group_wait_s = group_wait_s
        self._commit_delay_s = commit_delay_s
        self._synchronous = synchronous.upper()
        self._max_pages = max_pages
        self._observer = observer
        self._queue: queue.SimpleQueue[_Request | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: sqlite3.Connection | None = None
        self._writer_lock = WriterLock(path)
        # Writer-owned state (the reads see it through `Snapshots.publish`).
        self._states: dict[str, QueryState] = {}
        self._ledger_body: str | None = None
        self._release_records: dict[str, ReleaseRecord] = {}
        self._report_counts: dict[str, int] = {}
        self._held: dict[str, LogHeld] = {}
        self._answer_files = AnswerFiles(self._path)
        self._answer_file_bytes = answer_file_bytes
        self._buffers: list[bytearray] = []  # reused to seal answers into (`_write_answers`)
        self._aside: ThreadPoolExecutor | None = None  # the writer's helpers (`_flush`)

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open (or create, mode 0600) the file and load it; a file that cannot be used raises
        `DatabaseUnusable` naming it and what to do."""
        self._loop = asyncio.get_running_loop()
        try:
            self._writer_lock.acquire()  # before reading anything: one writer per file
            create_private(self._path)
            self._conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            self._prepare()
        except Exception as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._answer_files.close()
            self._writer_lock.release()
            if isinstance(exc, DatabaseInUse):
                raise
            raise DatabaseUnusable(self._path, exc) from exc
        self._publish(self._states.values())
        self._aside = ThreadPoolExecutor(2, thread_name_prefix="sqlite-aside")
        self._thread = threading.Thread(target=self._writer, name="sqlite-writer", daemon=True)
        self._thread.start()

    def _prepare(self) -> None:
        conn = self._sql()
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(f"could not switch to WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        # Deleted reports are overwritten, not just unlinked (some builds default to off).
        conn.execute("PRAGMA secure_delete=ON")
        if self._max_pages is not None:
            conn.execute(f"PRAGMA max_page_count={int(self._max_pages)}")
        migrate_legacy_reports(conn, self._path)
        for statement in SCHEMA:
            conn.execute(statement)
        add_report_columns(conn)
        self._load()
        # Old log frames may still hold deleted reports (e.g. a kill right after a release).
        self._checkpoint()

    async def close(self) -> None:
        if self._thread is None:
            return
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join)
        self._thread = None
        if self._aside is not None:
            self._aside.shutdown()
            self._aside = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._answer_files.close()
        self._writer_lock.release()

    # ------------------------------------------------------------------ writes

    async def submit(self, reports: ReportColumns) -> SubmitResult:
        def run(changes: PendingChanges) -> SubmitResult:
            return admit(changes, self._states, reports)

        result: SubmitResult = await self._enqueue(run, len(reports), reports)
        return result

    async def create_query(self, spec: QuerySpec, created_at: float) -> QueryInfo:
        def run(changes: PendingChanges) -> QueryInfo:
            if spec.query_id in self._states:
                raise lifecycle.duplicate_query(spec.query_id)
            cipher = ReportCipher.new()
            state = self._attach(QueryState.new(spec, created_at), cipher)
            self._sql().execute(_INSERT_QUERY, QueryRow.of(state))
            record_key(self._sql(), spec.query_id, cipher)
            spent_tokens.record_token_issuer(self._sql(), spec.query_id, spec.token_issuer)
            self._states[spec.query_id] = state
            changes.created.add(spec.query_id)
            changes.touched[spec.query_id] = state
            return state.snapshot()

        result: QueryInfo = await self._enqueue(run)
        return result

    async def advance_round(self, query_id: str) -> QueryInfo:
        def run(changes: PendingChanges) -> QueryInfo:
            state = self._state(query_id)
            changes.touch(state)
            lifecycle.advance_round(state)
            return state.snapshot()

        result: QueryInfo = await self._enqueue(run)
        return result

    async def close_query(self, query_id: str) -> QueryInfo:
        def run(changes: PendingChanges) -> QueryInfo:
            state = self._state(query_id)
            changes.touch(state)
            lifecycle.close(state)
            return state.snapshot()

        result: QueryInfo = await self._enqueue(run)
        return result

    async def delete_query(self, query_id: str) -> tuple[QueryInfo, int]:
        def run(changes: PendingChanges) -> tuple[QueryInfo, int]:
            state = self._state(query_id)
            lifecycle.check_deletable(state)
            conn = self._sql()
            erase_reports(conn, query_id, encrypted=self._held[query_id].cipher is not None)
            for table in ("report_keys", "query_tokens", "queries"):
                conn.execute(f"DELETE FROM {table} WHERE query_id = ?", (query_id,))
            deleted = self._report_counts.pop(query_id, 0)
            del self._states[query_id]
            self._held.pop(query_id, None)
            changes.touched.pop(query_id, None)
            changes.forgotten.add(query_id)  # a failed commit reads it back from the file
            changes.deleted.add(query_id)
            return state.snapshot(), deleted

        result: tuple[QueryInfo, int] = await self._enqueue(run)
        return result

    async def release(self, query_id: str, compute: ReleaseFn) -> ReleaseRecord:
        def run(changes: PendingChanges) -> ReleaseRecord:
            state = self._state(query_id)
            lifecycle.check_releasable(state)
            record, ledger_body = compute(state.snapshot(), state.counts.copy(), self._ledger_body)
            conn = self._sql()
            conn.execute(
                "INSERT INTO releases (query_id, released_at, body) VALUES (?, ?, ?)",
                (query_id, record.released_at, release_to_json(record)),
            )
            if ledger_body is not None:
                self._write_ledger(ledger_body)
            erase_reports(conn, query_id, encrypted=self._held[query_id].cipher is not None)
            spent_tokens.forget(conn, query_id)
            self._release_records[query_id] = record
            self._report_counts[query_id] = 0
            changes.touch(state)
            changes.forgotten.add(query_id)
            lifecycle.mark_released(state)
            return record

        result: ReleaseRecord = await self._enqueue(run)
        return result

    async def redeem_tokens(
        self, query_id: str, items: Sequence[tuple[bytes, bytes]]
    ) -> list[Redemption]:
        def run(changes: PendingChanges) -> list[Redemption]:
            return spent_tokens.redeem(self._sql(), query_id, items)

        result: list[Redemption] = await self._enqueue(run)  # not reports: no report metrics
        return result

    async def update_ledger(self, update: LedgerFn) -> str:
        def run(changes: PendingChanges) -> str:
            body = update(self._ledger_body)
            self._write_ledger(body)
            return body

        result: str = await self._enqueue(run)
        return result

    # ------------------------------------------------------------------ writer thread

    async def _enqueue(
        self,
        run: Callable[[PendingChanges], Any],
        n_reports: int = 0,
        reports: ReportColumns | None = None,
    ) -> Any:
        if self._thread is None or self._loop is None:
            raise Unavailable("the store is not open")
        future: asyncio.Future[Any] = self._loop.create_future()
        self._queue.put(_Request(run, future, n_reports, reports))
        return await future

    def _state(self, query_id: str) -> QueryState:
        state = self._states.get(query_id)
        if state is None:
            raise lifecycle.unknown_query(query_id)
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
        # A clean stop leaves no released query's reports in the file.
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
        conn = self._sql()
        started = time.perf_counter()
        changes = PendingChanges()
        results: list[tuple[asyncio.Future[Any], object]] = []
        ledger_before, report_counts_before = self._ledger_body, dict(self._report_counts)
        clock = PhaseClock()
        try:
            conn.execute("BEGIN IMMEDIATE")
            submissions: list[_Request] = []
            for request in batch:
                if request.reports is not None:
                    submissions.append(request)
                    continue
                # Admin changes see every report queued before them.
                with clock.timing("apply"):
                    self._admit(submissions, changes, results)
                with clock.timing("write"):
                    self._flush(changes)
                with clock.timing("apply"):
                    try:
                        results.append((request.future, request.run(changes)))
                    except ServiceError as exc:
                        results.append((request.future, exc))
            with clock.timing("apply"):
                self._admit(submissions, changes, results)
            with clock.timing("write"):
                self._flush(changes)
            with clock.timing("commit"):
                conn.executemany(
                    _UPDATE_PROGRESS,
                    [(*progress_values(s), s.spec.query_id) for s in changes.touched.values()],
                )
                self._answer_files.sync_names()  # `_flush` made the answers durable
                conn.execute("COMMIT")
            self._answer_files.committed()
        except (sqlite3.Error, OSError) as exc:  # storage refused: nothing of it happened
            log.error("transaction of %d request(s) failed in %s: %s", len(batch), self._path, exc)
            self._rollback()
            reread = changes.withdraw(self._states)
            for query_id in changes.forgotten:
                self._release_records.pop(query_id, None)
            self._ledger_body, self._report_counts = ledger_before, report_counts_before
            if reread:
                self._load(only=reread)
                changes.touched.update((qid, self._states[qid]) for qid in reread)
            error = storage_error(exc)
            results = [(request.future, error) for request in batch]
            changes.deleted.clear()
        except Exception:  # a defect: memory may be half-changed, so read everything again
            log.exception("transaction failed; reloading state from %s", self._path)
            self._rollback()
            self._answer_files.close()  # reopened, and cut back, by the reload
            self._load()
            changes.touched = dict(self._states)
            changes.deleted.clear()
            error = StorageFailure("internal error while storing; nothing was stored; retry")
            results = [(request.future, error) for request in batch]
        else:
            if changes.forgotten:
                # A release deleted reports: take them out of the write-ahead log file too.
                self._checkpoint()
                for query_id in changes.forgotten:
                    try:
                        self._answer_files.delete(query_id)
                    except OSError as exc:  # its key is gone; the next start deletes it
                        log.warning("could not delete the answer file of %r: %s", query_id, exc)
        self._publish(changes.touched.values(), changes.deleted)
        elapsed = time.perf_counter() - started
        if self._observer is not None:
            self._observer.observe_commit(elapsed, len(batch), n_reports, clock.phases())
        self._resolve(results)

    def _admit(
        self,
        submissions: list[_Request],
        changes: PendingChanges,
        results: list[tuple[asyncio.Future[Any], object]],
    ) -> None:
        """Admit consecutive submissions together (one step per query when all pass)."""
        if not submissions:
            return
        columns = [r.reports for r in submissions if r.reports is not None]
        decided = admit_many(changes, self._states, columns)
        results.extend(zip((r.future for r in submissions), decided, strict=True))
        submissions.clear()

    def _rollback(self) -> None:
        conn = self._sql()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        self._answer_files.rollback()

    def _checkpoint(self) -> None:
        """Copy the write-ahead log into the file and truncate it to zero bytes."""
        busy, _, _ = self._sql().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            log.warning("could not truncate the write-ahead log of %s (busy)", self._path)

    def _resolve(self, results: list[tuple[asyncio.Future[Any], object]]) -> None:
        if self._loop is None or not results:
            return
        # A closed loop means nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_settle, results)

    def _sql(self) -> sqlite3.Connection:
        assert self._conn is not None, "the store is not open"
        return self._conn

    def _flush(self, changes: PendingChanges) -> None:
        """Append the accepted reports to the log and add completed devices to the counts.

        On helper threads, while this one inserts the rows: a wide group's sums, and each
        answer-file row's answers sealed, written and flushed to disk (numpy, the cipher,
        pwrite and fdatasync all release the interpreter lock). All are done when it returns,
        so the COMMIT that follows only names answers already on disk."""
        summing: list[tuple[QueryState, Accepted, Future[list[Counts]]]] = []
        writing: list[Future[None]] = []
        try:
            for query_id, accepted in changes.accepted.items():
                if accepted.count:
                    self._flush_query(query_id, accepted, summing, writing)
                    changes.report_count += accepted.count
        finally:
            # Every helper is done before anything else happens: a rollback must not cut a
            # file back while a helper still writes to it.
            helpers: list[Future[Any]] = [sums for _, _, sums in summing]
            wait([*helpers, *writing])
        for state, accepted, sums in summing:
            state.add_sums(accepted, sums.result())
        for written in writing:
            written.result()  # a failed write raises here: the group fails, nothing stays
        changes.accepted.clear()

    def _flush_query(
        self,
        query_id: str,
        accepted: Accepted,
        summing: list[tuple[QueryState, Accepted, Future[list[Counts]]]],
        writing: list[Future[None]],
    ) -> None:
        """Insert one query's log row; its sums and answer-file write may go to helpers
        (appended to `summing` and `writing`)."""
        conn = self._sql()
        state = self._states[query_id]
        if self._aside is not None and accepted.completed * state.answer_bytes > _WIDE_SUMS:
            summing.append((state, accepted, self._aside.submit(state.completed_sums, accepted)))
        else:
            state.add_completed(accepted)
        held = self._held[query_id]
        row = LogRow.of(query_id, accepted)
        if held.cipher is None or state.answer_bytes < self._answer_file_bytes:
            seq = conn.execute(INSERT_LOG, held.sealed(row)).lastrowid  # answers in the row
        else:
            clear_bytes = len(row.answers)
            row, seal = held.sealed_apart(row)
            fd, at = self._answer_files.reserve(query_id, clear_bytes)
            if self._aside is None:
                self._write_answers(seal, fd, at)
            else:
                writing.append(self._aside.submit(self._write_answers, seal, fd, at))
            seq = conn.execute(INSERT_LOG_AT, (*row, at)).lastrowid
        assert seq is not None
        held.written(seq)
        self._report_counts[query_id] = self._report_counts.get(query_id, 0) + accepted.count

    def _write_answers(self, seal: SealAnswers, fd: int, offset: int) -> None:
        """Seal a row's answers, write them at their reserved place in the query's answer
        file and make them durable (on a helper thread: the cipher, pwrite and fdatasync
        release the interpreter lock, so the writer goes on with the group meanwhile)."""
        buffer = self._buffers.pop() if self._buffers else bytearray()
        try:
            with seal(buffer) as answers:  # released after: the buffer may grow when reused
                write_at(fd, offset, answers)
            os.fdatasync(fd)
        finally:
            self._buffers.append(buffer)

    def _attach(self, state: QueryState, cipher: ReportCipher | None) -> QueryState:
        """Let `state` find its held reports in the log rather than keep them in memory
        (`cipher`: the query's report key, None for a query whose rows are in clear)."""
        files = None if cipher is None else (self._answer_files, state.spec.query_id)
        held = LogHeld(state.answer_bytes, self._sql, cipher, files)
        state.held = self._held[state.spec.query_id] = held
        return state

    def _publish(self, states: Iterable[QueryState], gone: Iterable[str] = ()) -> None:
        self.publish(states, self._release_records, self._ledger_body, self._report_counts, gone)

    def _write_ledger(self, body: str) -> None:
        self._sql().execute(
            "INSERT INTO ledger (id, body) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET body = excluded.body",
            (body,),
        )
        self._ledger_body = body

    # ------------------------------------------------------------------ the file

    def _restore_log(self, state: QueryState) -> int:
        """Rebuild `state`'s dedup indexes from its report log rows; returns the reports."""
        # Answers are read only where restoring needs them: SP's waiting round-1 answers.
        answers = "answers" if state.keeps_round1_answers else "NULL"
        query_id, width = state.spec.query_id, state.answer_bytes
        held = self._held[query_id]
        (end,) = (
            self._sql()
            .execute(
                "SELECT coalesce(max(answers_at + n * ?), 0) FROM reports WHERE query_id = ?",
                (width, query_id),
            )
            .fetchone()
        )
        self._answer_files.recover(query_id, int(end))  # cut off what never committed
        entries: list[LogEntry] = []
        for seq, round_, n, nonce, at, report_ids, pseudonyms, packed in self._sql().execute(
            f"SELECT seq, round, n, nonce, answers_at, report_ids, pseudonyms, {answers} "
            "FROM reports WHERE query_id = ? ORDER BY seq",
            (query_id,),
        ):
            if packed is not None and at is not None:
                packed = self._answer_files.read(query_id, at, n * width)
            row = LogRow(query_id, round_, n, report_ids, pseudonyms, packed, nonce)
            row = held.opened(row, answers=packed is not None)
            if packed is None:
                row = row._replace(answers=b"\0" * (n * state.answer_bytes))
            entries.append(row.entry(state))
            held.restored(seq, n)
        state.restore(entries, hold=False)
        return sum(e.n for e in entries)

    def _load(self, only: set[str] | None = None) -> None:
        """(Re)build the writer-owned state from the committed file: all of it, or the
        queries in `only` (their rows and report log)."""
        conn = self._sql()
        where = ""
        args: tuple[str, ...] = ()
        if only is not None:
            where = f" WHERE query_id IN ({', '.join('?' * len(only))})"
            args = tuple(sorted(only))
        else:
            self._states = {}
        keys = load_keys(conn)
        for values in conn.execute(
            f"SELECT {', '.join(QueryRow._fields)} FROM queries{where}", args
        ):
            row = QueryRow(*values)
            self._states[row.query_id] = self._attach(row.to_state(), keys.get(row.query_id))
        for query_id, issuer in spent_tokens.token_issuers(conn).items():
            if query_id in self._states and (only is None or query_id in only):
                state = self._states[query_id]
                state.spec = replace(state.spec, token_issuer=issuer)
        counts: dict[str, int] = {}
        for query_id in sorted(only) if only is not None else list(self._states):
            state = self._states[query_id]
            if state.status == QueryStatus.RELEASED:
                continue  # its reports were deleted with the release
            counts[query_id] = self._restore_log(state)
        if only is not None:
            for query_id in only:
                self._report_counts[query_id] = counts.get(query_id, 0)
            return
        self._report_counts = counts
        self._answer_files.keep_only(set(counts))  # left by a release or a failed first group
        self._release_records = {
            qid: release_from_json(body)
            for qid, body in conn.execute("SELECT query_id, body FROM releases")
        }
        row = conn.execute("SELECT body FROM ledger WHERE id = 1").fetchone()
        self._ledger_body = None if row is None else str(row[0])


def _unavailable() -> Unavailable:
    return Unavailable("the aggregator is shutting down; retry")


def _settle(results: list[tuple[asyncio.Future[Any], object]]) -> None:
    for future, value in results:
        if future.done():
            continue
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)
