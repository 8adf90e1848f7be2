"""In-memory state of one query and the rules a report must pass (docs/design.md, "Protocol").

Owned by the store's single writer thread: every change happens there, in order, so two
concurrent copies of one report can never both be counted. This state is the authority for
deduplication; the store persists it as an append-only report log and rebuilds it at start.

Counts are per-target sums over devices that completed every round. For randomized response
(one round) a report is counted when it arrives. For Sampling Privacy a device's round-1
answers wait, individually, until its round-2 report arrives; then both rounds enter the
counts together, so a device that drops out after round 1 never biases the estimate.

Two ways in, one set of rules: `admit` checks a single report; `admit_all` takes a whole run
of reports for one query at once (set operations and numpy instead of a Python step per
report) when, and only when, every one of them would be accepted by `admit` in turn. When any
report would not, `admit_all` changes nothing and the caller falls back to `admit`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from aggregator.errors import AlreadyExists, FailedPrecondition, Invalid
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


@dataclass
class ReportColumns:
    """Reports as parallel columns, one entry per report, in arrival order."""

    query_ids: list[str] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    pseudonyms: list[bytes] = field(default_factory=list)
    report_ids: list[bytes] = field(default_factory=list)
    answers: list[bytes] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.report_ids)

    def append(self, report: ReportIn) -> None:
        self.query_ids.append(report.query_id)
        self.rounds.append(report.round)
        self.pseudonyms.append(report.pseudonym)
        self.report_ids.append(report.report_id)
        self.answers.append(report.answers)

    def report(self, index: int) -> ReportIn:
        return ReportIn(
            self.query_ids[index],
            self.rounds[index],
            self.pseudonyms[index],
            self.report_ids[index],
            self.answers[index],
        )

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
    held_runs: int


class HeldRun(NamedTuple):
    """Accepted reports of one round, packed: `n` ids, pseudonyms and answers back to back."""

    round: int
    report_ids: bytes
    pseudonyms: bytes
    answers: bytes


def _key_index(packed: bytes, key: bytes) -> int:
    """Index of `key` among the fixed-width keys packed in `packed` (it is there)."""
    width = len(key)
    at = packed.find(key)
    while at > 0 and at % width:  # a match straddling two keys: look further
        at = packed.find(key, at + 1)
    if at < 0:
        raise RuntimeError(f"report id {key.hex()} is indexed but not in its held run")
    return at // width


@dataclass
class QueryState:
    spec: QuerySpec
    status: QueryStatus
    current_round: int
    created_at: float
    counts: Counts
    reports_per_round: list[int]
    completed_devices: int
    # Accepted reports still held, in runs (one per admitted request or restored log slice):
    # each run keeps its reports' fields packed, and the dedup index maps a report id to its
    # run's number. A run number is one int object shared by the whole run, and no per-report
    # answers or lists stay alive, so holding a report costs little more than its dict entry.
    by_report_id: dict[bytes, int] = field(default_factory=dict)
    held_runs: list[HeldRun] = field(default_factory=list)
    # Per round (index 0 = round 1): pseudonyms of devices that reported that round.
    devices_by_round: list[set[bytes]] = field(default_factory=list)
    # Sampling Privacy: round-1 answers of devices whose round-2 report has not arrived.
    awaiting_round2: dict[bytes, bytes] = field(default_factory=dict)

    @classmethod
    def new(cls, spec: QuerySpec, created_at: float) -> QueryState:
        rounds = spec.mechanism.rounds
        return cls(
            spec=spec,
            status=QueryStatus.OPEN,
            current_round=1,
            created_at=created_at,
            counts=np.zeros((rounds, len(spec.targets)), dtype=np.int64),
            reports_per_round=[0] * rounds,
            completed_devices=0,
            devices_by_round=[set() for _ in range(rounds)],
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

    def snapshot(self) -> QueryInfo:
        return QueryInfo(
            spec=self.spec,
            status=self.status,
            current_round=self.current_round,
            reports_per_round=tuple(self.reports_per_round),
            completed_devices=self.completed_devices,
            created_at=self.created_at,
        )

    def restore_reports(
        self,
        round_: int,
        report_ids: list[bytes],
        pseudonyms: list[bytes],
        answers: list[bytes],
    ) -> None:
        """Rebuild the dedup indexes from one stored log entry (counts are stored separately).

        Entries may come in any order: a round-1 device waits for round 2 only while no
        round-2 report of it is known.
        """
        for start in range(0, len(report_ids), _RESTORED_RUN):
            stop = start + _RESTORED_RUN
            self._hold(
                round_,
                report_ids[start:stop],
                b"".join(report_ids[start:stop]),
                b"".join(pseudonyms[start:stop]),
                b"".join(answers[start:stop]),
            )
        self.devices_by_round[round_ - 1].update(pseudonyms)
        if self.rounds == 2:
            if round_ == 1:
                done = self.devices_by_round[1]
                self.awaiting_round2.update(
                    (p, a) for p, a in zip(pseudonyms, answers, strict=True) if p not in done
                )
            else:
                pop = self.awaiting_round2.pop
                for pseudonym in pseudonyms:
                    pop(pseudonym, None)

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
        run = self.by_report_id.get(report.report_id)
        if run is not None:
            held = self.held_runs[run]
            i = _key_index(held.report_ids, report.report_id)
            width = self.answer_bytes
            if (
                held.pseudonyms[i * REPORT_KEY_BYTES : (i + 1) * REPORT_KEY_BYTES]
                == report.pseudonym
                and held.round == report.round
                and held.answers[i * width : (i + 1) * width] == report.answers
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
            first = self.awaiting_round2.pop(report.pseudonym, None)
            if first is None:
                return Outcome(
                    FailedPrecondition(
                        f"device {report.pseudonym.hex()} has no round-1 report in query {qid!r}; "
                        f"only devices that answered round 1 can answer round 2"
                    )
                )
            accepted.completed_answers[0].append(first)
            accepted.completed_answers[1].append(answers)
            accepted.completed += 1
        elif self.rounds == 2:
            self.awaiting_round2[report.pseudonym] = answers
        else:
            accepted.completed_answers[0].append(answers)
            accepted.completed += 1
        self._hold(report.round, (report.report_id,), report.report_id, report.pseudonym, answers)
        devices.add(report.pseudonym)
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
            or reports.rounds.count(round_) != n
        ):
            return False
        report_ids, pseudonyms, answers = reports.report_ids, reports.pseudonyms, reports.answers
        if set(map(len, report_ids)) != {REPORT_KEY_BYTES}:
            return False
        if set(map(len, pseudonyms)) != {REPORT_KEY_BYTES}:
            return False
        if set(map(len, answers)) != {self.answer_bytes}:
            return False
        packed_answers = b"".join(answers)
        mask = self.padding_mask
        if mask:
            last = np.frombuffer(packed_answers, dtype=np.uint8)[
                self.answer_bytes - 1 :: self.answer_bytes
            ]
            if np.bitwise_and(last, mask).any():
                return False
        run = len(self.held_runs)
        new_ids = dict.fromkeys(report_ids, run)  # the index entries, if all pass
        if len(new_ids) != n or not self.by_report_id.keys().isdisjoint(new_ids):
            return False
        two_rounds = self.rounds == 2
        if two_rounds and round_ == 2 and not self.awaiting_round2.keys() >= set(pseudonyms):
            return False
        # Devices, checked and added in one pass over the (large) set: symmetric difference
        # adds every new device and removes any already there, so the set grows by exactly n
        # only when all n are distinct and new; otherwise the same update again undoes it.
        devices = self.devices_by_round[round_ - 1]
        before = len(devices)
        devices.symmetric_difference_update(pseudonyms)
        if len(devices) - before != n:
            devices.symmetric_difference_update(pseudonyms)
            return False
        # Every report passes: record them all.
        if two_rounds and round_ == 2:
            pop = self.awaiting_round2.pop
            accepted.completed_answers[0].append(b"".join([pop(p) for p in pseudonyms]))
            accepted.completed_answers[1].append(packed_answers)
            accepted.completed += n
        elif two_rounds:
            self.awaiting_round2.update(zip(pseudonyms, answers, strict=True))
        else:
            accepted.completed_answers[0].append(packed_answers)
            accepted.completed += n
        packed_ids = b"".join(report_ids)
        packed_pseudonyms = b"".join(pseudonyms)
        self.held_runs.append(HeldRun(round_, packed_ids, packed_pseudonyms, packed_answers))
        self.by_report_id.update(new_ids)
        self.reports_per_round[round_ - 1] += n
        accepted.count += n
        accepted.report_ids.append(packed_ids)
        accepted.pseudonyms.append(packed_pseudonyms)
        accepted.answers.append(packed_answers)
        return True

    def _hold(
        self,
        round_: int,
        report_ids: Iterable[bytes],
        packed_ids: bytes,
        packed_pseudonyms: bytes,
        packed_answers: bytes,
    ) -> None:
        """Keep one run of accepted reports (`report_ids` are those packed in `packed_ids`)."""
        run = len(self.held_runs)
        self.held_runs.append(HeldRun(round_, packed_ids, packed_pseudonyms, packed_answers))
        self.by_report_id.update(dict.fromkeys(report_ids, run))

    def new_accepted(self) -> Accepted:
        return Accepted(
            round=self.current_round, completed_answers=[[] for _ in range(self.rounds)]
        )

    def add_completed(self, accepted: Accepted) -> None:
        """Add the completed devices' answers of one group to the counts (vectorized)."""
        n_completed = accepted.completed
        if n_completed == 0:
            return
        n_targets = len(self.spec.targets)
        for round_index, answers in enumerate(accepted.completed_answers):
            self.counts[round_index] += column_sums(b"".join(answers), n_completed, n_targets)
        self.completed_devices += n_completed
        accepted.counted = True

    def progress(self) -> Progress:
        return Progress(
            self.status,
            self.current_round,
            tuple(self.reports_per_round),
            self.completed_devices,
            len(self.held_runs),
        )

    def withdraw(self, accepted: Accepted) -> None:
        """Take back reports accepted in a transaction that then failed: out of the dedup
        indexes and the counts. Withdraw a transaction's `Accepted` newest first, then
        `rewind` to the progress from before it."""
        ids = b"".join(accepted.report_ids)
        packed = b"".join(accepted.pseudonyms)
        pseudonyms = [
            packed[i : i + REPORT_KEY_BYTES] for i in range(0, len(packed), REPORT_KEY_BYTES)
        ]
        for i in range(0, len(ids), REPORT_KEY_BYTES):
            self.by_report_id.pop(ids[i : i + REPORT_KEY_BYTES], None)
        self.devices_by_round[accepted.round - 1].difference_update(pseudonyms)
        if self.rounds == 2 and accepted.round == 1:
            for pseudonym in pseudonyms:
                self.awaiting_round2.pop(pseudonym, None)
        elif self.rounds == 2:
            # Each round-2 report completed a device whose round-1 answers were waiting.
            firsts = b"".join(accepted.completed_answers[0])
            width = self.answer_bytes
            for k, pseudonym in enumerate(pseudonyms):
                self.awaiting_round2[pseudonym] = firsts[k * width : (k + 1) * width]
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
        del self.held_runs[before.held_runs :]

    def forget_reports(self) -> None:
        """After a release: individual reports are gone."""
        self.by_report_id.clear()
        self.held_runs.clear()
        for devices in self.devices_by_round:
            devices.clear()
        self.awaiting_round2.clear()


def column_sums(packed: bytes, n_rows: int, n_bits: int) -> Counts:
    """Per bit position, how many of `n_rows` packed rows have it set.

    Unpacks a bounded number of rows at a time (about 4 MiB of bits), so a large group of
    reports with many targets never materializes all its bits at once.
    """
    row_bytes = (n_bits + 7) // 8
    rows = np.frombuffer(packed, dtype=np.uint8).reshape(n_rows, row_bytes)
    step = max(1, _UNPACK_BITS // max(n_bits, 1))
    total = np.zeros(n_bits, dtype=np.int64)
    for start in range(0, n_rows, step):
        bits = np.unpackbits(rows[start : start + step], axis=1, count=n_bits)
        total += bits.sum(axis=0, dtype=np.int64)
    return total


_UNPACK_BITS = 1 << 22
# Reports per held run when rebuilding from the log (a log row holds a whole commit group):
# bounds the scan that locates a repeated report id within its run.
_RESTORED_RUN = 512
