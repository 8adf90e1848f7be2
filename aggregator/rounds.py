"""In-memory state of one query and the rules a report must pass (docs/design.md, "Protocol").

Owned by the store's single writer thread: every change happens there, in order, so two
concurrent copies of one report can never both be counted. This state is the authority for
deduplication; the store persists it as an append-only report log and rebuilds it at start.
Held reports cost little memory: report ids and pseudonyms live in compact key indexes
(`aggregator.keytable`, 21 to 27 bytes a key), SP's waiting round-1 answers as packed bits, and the
rest of a report is looked up (`aggregator.held`) only when its id comes again.

Counts are per-target sums over devices that completed every round. For randomized response
(one round) a report is counted when it arrives. For Sampling Privacy a device's round-1
answers wait, individually, until its round-2 report arrives; then both rounds enter the
counts together, so a device that drops out after round 1 never biases the estimate.

Two ways in, one set of rules: `admit` checks a single report; `admit_all` takes a whole run
of reports for one query at once (one compiled call per index instead of a Python step per
report)
when, and only when, every one of them would be accepted by `admit` in turn. When any
report would not, `admit_all` changes nothing and the caller falls back to `admit`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from aggregator.errors import AlreadyExists, FailedPrecondition, Invalid
from aggregator.held import HeldReports, InMemoryHeld, PackedRows
from aggregator.keytable import Keys, KeyTable, column_sums, join_fixed, split_fixed
from aggregator.model import (
    ACCEPTED,
    DUPLICATE,
    Outcome,
    QueryInfo,
    QuerySpec,
    QueryStatus,
    ReportIn,
)
from ldpcollect.wire import REPORT_KEY_BYTES

Counts = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PackedReports:
    """A uniform batch's reports: one query, one round, and each of the other columns as its
    fixed-width values back to back (`batch_codec` makes them without an object per report)."""

    query_id: str
    round: int
    pseudonyms: bytes
    report_ids: bytes
    answers: bytes
    n: int

    def width(self, column: bytes) -> int:
        return len(column) // self.n

    def split(self, column: bytes) -> list[bytes]:
        return split_fixed(column, self.width(column))

    @classmethod
    def concat(cls, parts: Sequence[PackedReports]) -> PackedReports | None:
        """The parts one after the other, or None unless they share query, round and widths."""
        first = parts[0]
        widths = [first.width(c) for c in (first.pseudonyms, first.report_ids, first.answers)]
        for part in parts[1:]:
            if (
                part.query_id != first.query_id
                or part.round != first.round
                or [part.width(c) for c in (part.pseudonyms, part.report_ids, part.answers)]
                != widths
            ):
                return None
        return cls(
            first.query_id,
            first.round,
            b"".join(p.pseudonyms for p in parts),
            b"".join(p.report_ids for p in parts),
            b"".join(p.answers for p in parts),
            sum(p.n for p in parts),
        )


class ReportColumns:
    """Reports as parallel columns, one entry per report, in arrival order.

    Made from a uniform batch (`packed`), the per-report lists are made only when first read
    (the writer's usual path reads none of them). Read-only once made: build another
    `ReportColumns` rather than change a column in place.
    """

    __slots__ = ("_answers", "_pseudonyms", "_query_ids", "_report_ids", "_rounds", "packed")

    def __init__(
        self,
        query_ids: list[str] | None = None,
        rounds: list[int] | None = None,
        pseudonyms: list[bytes] | None = None,
        report_ids: list[bytes] | None = None,
        answers: list[bytes] | None = None,
        *,
        packed: PackedReports | None = None,
    ) -> None:
        self.packed = packed
        empty = packed is None
        self._query_ids = query_ids if query_ids is not None or not empty else []
        self._rounds = rounds if rounds is not None or not empty else []
        self._pseudonyms = pseudonyms if pseudonyms is not None or not empty else []
        self._report_ids = report_ids if report_ids is not None or not empty else []
        self._answers = answers if answers is not None or not empty else []

    @property
    def query_ids(self) -> list[str]:
        if self._query_ids is None:
            assert self.packed is not None
            self._query_ids = [self.packed.query_id] * self.packed.n
        return self._query_ids

    @property
    def rounds(self) -> list[int]:
        if self._rounds is None:
            assert self.packed is not None
            self._rounds = [self.packed.round] * self.packed.n
        return self._rounds

    @property
    def pseudonyms(self) -> list[bytes]:
        if self._pseudonyms is None:
            assert self.packed is not None
            self._pseudonyms = self.packed.split(self.packed.pseudonyms)
        return self._pseudonyms

    @property
    def report_ids(self) -> list[bytes]:
        if self._report_ids is None:
            assert self.packed is not None
            self._report_ids = self.packed.split(self.packed.report_ids)
        return self._report_ids

    @property
    def answers(self) -> list[bytes]:
        if self._answers is None:
            assert self.packed is not None
            self._answers = self.packed.split(self.packed.answers)
        return self._answers

    def _columns(self) -> tuple[list[str], list[int], list[bytes], list[bytes], list[bytes]]:
        return self.query_ids, self.rounds, self.pseudonyms, self.report_ids, self.answers

    def __len__(self) -> int:
        return self.packed.n if self.packed is not None else len(self.report_ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReportColumns):
            return NotImplemented
        return self._columns() == other._columns()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ReportColumns({len(self)} reports)"

    def append(self, report: ReportIn) -> None:
        columns = self._columns()
        self.packed = None  # the lists are the columns from now on
        for column, value in zip(columns, report, strict=True):
            column.append(value)  # type: ignore[attr-defined]

    def report(self, index: int) -> ReportIn:
        return ReportIn(
            self.query_ids[index],
            self.rounds[index],
            self.pseudonyms[index],
            self.report_ids[index],
            self.answers[index],
        )

    def take(self, indices: list[int]) -> ReportColumns:
        """The reports at `indices`, in that order."""
        if len(indices) < 2:  # (itemgetter of one index gives the item, of none fails)
            return ReportColumns.of(self.report(i) for i in indices)
        pick = operator.itemgetter(*indices)  # one C loop per column
        return ReportColumns(
            list(pick(self.query_ids)),
            list(pick(self.rounds)),
            list(pick(self.pseudonyms)),
            list(pick(self.report_ids)),
            list(pick(self.answers)),
        )

    @classmethod
    def concat(cls, parts: Sequence[ReportColumns]) -> ReportColumns:
        """All the reports of `parts`, one after the other."""
        packed = [p.packed for p in parts if p.packed is not None]
        if packed and len(packed) == len(parts):
            joined = PackedReports.concat(packed)
            if joined is not None:
                return cls(packed=joined)
        columns = cls()
        for part in parts:
            for mine, theirs in zip(columns._columns(), part._columns(), strict=True):
                mine += theirs  # type: ignore[operator]
        return columns

    @classmethod
    def of(cls, reports: Iterable[ReportIn]) -> ReportColumns:
        columns = cls()
        for report in reports:
            columns.append(report)
        return columns


@dataclass
class Accepted:
    """Reports accepted for one query and round in one group, in arrival order.

    Each list holds byte strings that concatenate to the packed column (a part may hold one
    report or a whole run), so a group is written as one log row with three joins.
    """

    round: int
    count: int = 0
    report_ids: list[bytes] = field(default_factory=list)
    pseudonyms: list[bytes] = field(default_factory=list)
    answers: list[bytes] = field(default_factory=list)
    # Answers that enter the counts now: per round, packed answers of completed devices.
    completed_answers: list[list[bytes]] = field(default_factory=list)
    completed: int = 0
    counted: bool = False  # whether `add_completed` added them to the counts


class Progress(NamedTuple):
    """A query's lifecycle position and totals, kept to rewind a failed transaction."""

    status: QueryStatus
    current_round: int
    reports_per_round: tuple[int, ...]
    completed_devices: int
    held_reports: int


class LogEntry(NamedTuple):
    """Stored reports of one round, packed: `n` ids, pseudonyms and answers back to back."""

    round: int
    n: int
    report_ids: bytes
    pseudonyms: bytes
    answers: bytes


@dataclass
class QueryState:
    spec: QuerySpec
    status: QueryStatus
    current_round: int
    created_at: float
    counts: Counts
    reports_per_round: list[int]
    completed_devices: int
    # Held reports (until the release), as compact indexes: report id -> ordinal of the report
    # in `held`; per round (index 0 = round 1), device pseudonym -> ordinal of its report among
    # that round's. Sampling Privacy: the round-1 answers, row = round-1 ordinal; a device
    # waits for round 2 while it is in round 1's index and not in round 2's.
    report_ids: Keys = field(default_factory=KeyTable)
    devices_by_round: list[Keys] = field(default_factory=list)
    round1_answers: PackedRows = field(default_factory=lambda: PackedRows(1))
    held: HeldReports = field(default_factory=lambda: InMemoryHeld(1))

    @classmethod
    def new(cls, spec: QuerySpec, created_at: float) -> QueryState:
        rounds = spec.mechanism.rounds
        width = (len(spec.targets) + 7) // 8
        return cls(
            spec=spec,
            status=QueryStatus.OPEN,
            current_round=1,
            created_at=created_at,
            counts=np.zeros((rounds, len(spec.targets)), dtype=np.int64),
            reports_per_round=[0] * rounds,
            completed_devices=0,
            devices_by_round=[KeyTable() for _ in range(rounds)],
            round1_answers=PackedRows(width),
            held=InMemoryHeld(width),
        )

    @property
    def rounds(self) -> int:
        return self.spec.mechanism.rounds

    @property
    def answer_bytes(self) -> int:
        return (len(self.spec.targets) + 7) // 8

    @property
    def padding_mask(self) -> int:
        """Bits of the last answer byte that must be zero (MSB-first packing)."""
        used = len(self.spec.targets) % 8
        return 0 if used == 0 else (1 << (8 - used)) - 1

    @property
    def keeps_round1_answers(self) -> bool:
        return self.rounds == 2

    def snapshot(self) -> QueryInfo:
        return QueryInfo(
            spec=self.spec,
            status=self.status,
            current_round=self.current_round,
            reports_per_round=tuple(self.reports_per_round),
            completed_devices=self.completed_devices,
            created_at=self.created_at,
        )

    def restore(self, entries: Sequence[LogEntry], *, hold: bool = True) -> None:
        """Rebuild the dedup indexes from stored log entries in log order (counts are stored
        separately), each index in one sorted step. With `hold`, also keep the reports in
        `held` (a store that finds them in its own log passes False)."""
        if not entries:
            return
        builds: list[tuple[Keys, list[bytes], int]] = [
            (self.report_ids, [e.report_ids for e in entries], len(self.report_ids))
        ]
        for round_ in range(1, self.rounds + 1):
            mine = [e for e in entries if e.round == round_]
            if not mine:
                continue
            devices = self.devices_by_round[round_ - 1]
            builds.append((devices, [e.pseudonyms for e in mine], len(devices)))
            if round_ == 1 and self.keeps_round1_answers:
                for e in mine:
                    self.round1_answers.append(e.answers)
        _bulk_add_all(builds)
        if hold:
            for e in entries:
                self.held.hold(e.round, e.n, e.pseudonyms, e.answers)

    def admit(self, report: ReportIn, accepted: Accepted) -> Outcome:
        """Validate one report; when it is new and valid, record it and return ACCEPTED.

        Checks, in order: key lengths, idempotency (same id: duplicate if identical, else
        AlreadyExists), query open, round, answer length and padding, one report per device and
        round, and for round 2 a round-1 report from the same device.
        """
        qid = self.spec.query_id
        if len(report.report_id) != REPORT_KEY_BYTES:
            return Outcome(
                Invalid(f"report_id must be {REPORT_KEY_BYTES} bytes, got {len(report.report_id)}")
            )
        if len(report.pseudonym) != REPORT_KEY_BYTES:
            return Outcome(
                Invalid(
                    f"device_pseudonym must be {REPORT_KEY_BYTES} bytes, "
                    f"got {len(report.pseudonym)}"
                )
            )
        ordinal = self.report_ids.get(report.report_id)
        if ordinal is not None:
            held = self.held.fetch(ordinal)
            if (
                held.pseudonym == report.pseudonym
                and held.round == report.round
                and held.answers == report.answers
            ):
                return DUPLICATE
            return Outcome(
                AlreadyExists(
                    f"report_id {report.report_id.hex()} was already used for a different report "
                    f"in query {qid!r}; use a fresh report id for a new report"
                )
            )
        if self.status != QueryStatus.OPEN:
            return Outcome(
                FailedPrecondition(
                    f"query {qid!r} is {self.status.name.lower()} and accepts no more reports"
                )
            )
        if report.round != self.current_round:
            return Outcome(
                FailedPrecondition(
                    f"query {qid!r} is accepting round {self.current_round} of {self.rounds}, "
                    f"not round {report.round}"
                )
            )
        answers = report.answers
        if len(answers) != self.answer_bytes:
            return Outcome(
                Invalid(
                    f"answers must be {self.answer_bytes} bytes (one bit per each of "
                    f"{len(self.spec.targets)} targets, packed), got {len(answers)}"
                )
            )
        if self.padding_mask and answers[-1] & self.padding_mask:
            return Outcome(
                Invalid(
                    f"answers has nonzero padding bits: the last "
                    f"{8 - len(self.spec.targets) % 8} bits of the last byte must be 0"
                )
            )
        devices = self.devices_by_round[report.round - 1]
        if report.pseudonym in devices:
            return Outcome(
                AlreadyExists(
                    f"device {report.pseudonym.hex()} already reported round {report.round} "
                    f"of query {qid!r} under another report id"
                )
            )
        if self.rounds == 2 and report.round == 2:
            row = self.devices_by_round[0].get(report.pseudonym)
            if row is None:
                return Outcome(
                    FailedPrecondition(
                        f"device {report.pseudonym.hex()} has no round-1 report in query {qid!r}; "
                        f"only devices that answered round 1 can answer round 2"
                    )
                )
            first = self.round1_answers.take(np.array([row], dtype=np.int64))
            accepted.completed_answers[0].append(first)
            accepted.completed_answers[1].append(answers)
            accepted.completed += 1
        elif self.rounds == 2:
            self.round1_answers.append(answers)
        else:
            accepted.completed_answers[0].append(answers)
            accepted.completed += 1
        self.report_ids.add(report.report_id, len(self.held))
        devices.add(report.pseudonym, len(devices))
        self.held.hold(report.round, 1, report.pseudonym, answers)
        self.reports_per_round[report.round - 1] += 1
        accepted.count += 1
        accepted.report_ids.append(report.report_id)
        accepted.pseudonyms.append(report.pseudonym)
        accepted.answers.append(answers)
        return ACCEPTED

    def admit_all(self, reports: ReportColumns, accepted: Accepted) -> bool:
        """Accept every report of a run for this query at once, or change nothing.

        True only when `admit`, applied to each report in order, would accept each one: the
        query is open, every report is for its current round with well-formed keys and
        answers, and no report id or (device, round) repeats, within the run or before it.
        """
        n = len(reports)
        round_ = self.current_round
        if (
            n == 0
            or self.status != QueryStatus.OPEN
            or accepted.round != round_
            or (
                reports.packed.round != round_
                if reports.packed is not None
                else reports.rounds.count(round_) != n
            )
        ):
            return False
        packed = reports.packed
        if packed is not None:  # one round: checked above; the widths here
            packed_ids, packed_pseudonyms = packed.report_ids, packed.pseudonyms
            packed_answers = packed.answers
            if (
                packed.width(packed_ids) != REPORT_KEY_BYTES
                or packed.width(packed_pseudonyms) != REPORT_KEY_BYTES
                or packed.width(packed_answers) != self.answer_bytes
            ):
                return False
        else:
            ids = join_fixed(reports.report_ids, REPORT_KEY_BYTES)
            pseudonyms = join_fixed(reports.pseudonyms, REPORT_KEY_BYTES)
            answers = join_fixed(reports.answers, self.answer_bytes)
            if ids is None or pseudonyms is None or answers is None:
                return False
            packed_ids, packed_pseudonyms, packed_answers = ids, pseudonyms, answers
        mask = self.padding_mask
        if mask:
            last = np.frombuffer(packed_answers, dtype=np.uint8)[
                self.answer_bytes - 1 :: self.answer_bytes
            ]
            if np.bitwise_and(last, mask).any():
                return False
        two_rounds = self.rounds == 2
        rows = None
        if two_rounds and round_ == 2:  # every device answered round 1
            rows = self.devices_by_round[0].lookup_values(packed_pseudonyms)
            if (rows < 0).any():
                return False
        # Each index adds all its keys at once, or none (one held, or repeated in the run).
        if not self.report_ids.add_all_new(packed_ids, len(self.held)):
            return False
        devices = self.devices_by_round[round_ - 1]
        if not devices.add_all_new(packed_pseudonyms, len(devices)):
            self.report_ids.discard_many(packed_ids)
            return False
        if rows is not None:
            accepted.completed_answers[0].append(self.round1_answers.take(rows))
            accepted.completed_answers[1].append(packed_answers)
            accepted.completed += n
        elif two_rounds:
            self.round1_answers.append(packed_answers)
        else:
            accepted.completed_answers[0].append(packed_answers)
            accepted.completed += n
        # Every report passes: record them all.
        self.held.hold(round_, n, packed_pseudonyms, packed_answers)
        self.reports_per_round[round_ - 1] += n
        accepted.count += n
        accepted.report_ids.append(packed_ids)
        accepted.pseudonyms.append(packed_pseudonyms)
        accepted.answers.append(packed_answers)
        return True

    def new_accepted(self) -> Accepted:
        return Accepted(
            round=self.current_round, completed_answers=[[] for _ in range(self.rounds)]
        )

    def add_completed(self, accepted: Accepted) -> None:
        """Add the completed devices' answers of one group to the counts (vectorized)."""
        self.add_sums(accepted, self.completed_sums(accepted))

    def completed_sums(self, accepted: Accepted) -> list[npt.NDArray[np.int64]]:
        """Per round, the completed devices' answers of one group summed per target. Reads
        nothing that admission changes: may run on another thread while the group is
        written (numpy releases the interpreter lock in its loops)."""
        n_completed, n_targets = accepted.completed, len(self.spec.targets)
        if n_completed == 0:
            return []
        return [
            column_sums(b"".join(answers), n_completed, n_targets)
            for answers in accepted.completed_answers
        ]

    def add_sums(self, accepted: Accepted, sums: list[npt.NDArray[np.int64]]) -> None:
        """Add `completed_sums(accepted)` to the counts."""
        if accepted.completed == 0:
            return
        for round_index, total in enumerate(sums):
            self.counts[round_index] += total
        self.completed_devices += accepted.completed
        accepted.counted = True

    def progress(self) -> Progress:
        return Progress(
            self.status,
            self.current_round,
            tuple(self.reports_per_round),
            self.completed_devices,
            len(self.held),
        )

    def withdraw(self, accepted: Accepted) -> None:
        """Take back reports accepted in a transaction that then failed: out of the dedup
        indexes and the counts. Withdraw a transaction's `Accepted` newest first, then
        `rewind` to the progress from before it."""
        self.report_ids.discard_many(b"".join(accepted.report_ids))
        devices = self.devices_by_round[accepted.round - 1]
        devices.discard_many(b"".join(accepted.pseudonyms))
        if self.keeps_round1_answers and accepted.round == 1:
            self.round1_answers.truncate(len(devices))
        if accepted.counted:
            n_targets = len(self.spec.targets)
            for round_index, answers in enumerate(accepted.completed_answers):
                self.counts[round_index] -= column_sums(
                    b"".join(answers), accepted.completed, n_targets
                )

    def rewind(self, before: Progress) -> None:
        """Back to `before` (see `withdraw`)."""
        self.status = before.status
        self.current_round = before.current_round
        self.reports_per_round = list(before.reports_per_round)
        self.completed_devices = before.completed_devices
        self.held.truncate(before.held_reports)

    def forget_reports(self) -> None:
        """After a release: individual reports are gone."""
        self.report_ids.clear()
        for devices in self.devices_by_round:
            devices.clear()
        self.round1_answers.clear()
        self.held.clear()


# Below this many keys in all, a restart builds its indexes one after the other.
_PARALLEL_BUILD_FROM = 1 << 18


def _bulk_add_all(builds: Sequence[tuple[Keys, list[bytes], int]]) -> None:
    """`bulk_add` each (index, packed keys, first value): independent indexes, so at a
    restart of millions of keys they are built at once on two threads (numpy's sort and
    gathers release the interpreter lock: on two cores the report-id and pseudonym indexes
    take about the time of one)."""

    def build(job: tuple[Keys, list[bytes], int]) -> None:
        index, parts, first = job
        index.bulk_add(b"".join(parts), first)

    keys = sum(len(part) for _, parts, _ in builds for part in parts) // REPORT_KEY_BYTES
    if len(builds) < 2 or keys < _PARALLEL_BUILD_FROM:
        for job in builds:
            build(job)
        return
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="index-build") as pool:
        for done in [pool.submit(build, job) for job in builds]:
            done.result()
