"""In-memory state of one query and the rules a report must pass (DESIGN.md section 4).

Owned by the store's single writer thread: every change happens there, in order, so two
concurrent copies of one report can never both be counted.

Counts are per-target sums over devices that completed every round. For randomized response
(one round) a report is counted when it arrives. For Sampling Privacy a device's round-1
answers wait, individually, until its round-2 report arrives; then both rounds enter the
counts together, so a device that drops out after round 1 never biases the estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
import numpy as np
import numpy.typing as npt

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
class StoredReport:
    pseudonym: bytes
    round: int
    answers: bytes


@dataclass
class Accepted:
    """Reports accepted for one query in one group, in arrival order."""

    rows: list[tuple[bytes, bytes, int, bytes]] = field(default_factory=list)
    # Answers that enter the counts now: per round, the packed answers of completed devices.
    completed_answers: list[list[bytes]] = field(default_factory=list)


@dataclass
class QueryState:
    spec: QuerySpec
    status: QueryStatus
    current_round: int
    created_at: float
    counts: Counts
    reports_per_round: list[int]
    completed_devices: int
    by_report_id: dict[bytes, StoredReport] = field(default_factory=dict)
    device_rounds: set[tuple[bytes, int]] = field(default_factory=set)
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

    def restore_report(
        self, report_id: bytes, pseudonym: bytes, round_: int, answers: bytes
    ) -> None:
        """Rebuild the dedup indexes from a stored report (counts are stored separately)."""
        self.by_report_id[report_id] = StoredReport(pseudonym, round_, answers)
        self.device_rounds.add((pseudonym, round_))
        if self.rounds == 2:
            if round_ == 1:
                if (pseudonym, 2) not in self.device_rounds:
                    self.awaiting_round2[pseudonym] = answers
            else:
                self.awaiting_round2.pop(pseudonym, None)

    def admit(self, report: ReportIn, accepted: Accepted) -> Outcome:
        """Validate one report; when it is new and valid, record it and return ACCEPTED.

        Checks, in order: key lengths, idempotency (same id: duplicate if identical, else
        ALREADY_EXISTS), query open, round, answer length and padding, one report per device
        and round, and for round 2 a round-1 report from the same device.
        """
        qid = self.spec.query_id
        if len(report.report_id) != REPORT_KEY_BYTES:
            return Outcome(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"report_id must be {REPORT_KEY_BYTES} bytes, got {len(report.report_id)}",
            )
        if len(report.pseudonym) != REPORT_KEY_BYTES:
            return Outcome(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"device_pseudonym must be {REPORT_KEY_BYTES} bytes, got {len(report.pseudonym)}",
            )
        previous = self.by_report_id.get(report.report_id)
        if previous is not None:
            if (
                previous.pseudonym == report.pseudonym
                and previous.round == report.round
                and previous.answers == report.answers
            ):
                return DUPLICATE
            return Outcome(
                grpc.StatusCode.ALREADY_EXISTS,
                f"report_id {report.report_id.hex()} was already used for a different report "
                f"in query {qid!r}; use a fresh report id for a new report",
            )
        if self.status != QueryStatus.OPEN:
            return Outcome(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"query {qid!r} is {self.status.name.lower()} and accepts no more reports",
            )
        if report.round != self.current_round:
            return Outcome(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"query {qid!r} is accepting round {self.current_round} of {self.rounds}, "
                f"not round {report.round}",
            )
        answers = report.answers
        if len(answers) != self.answer_bytes:
            return Outcome(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"answers must be {self.answer_bytes} bytes (one bit per each of "
                f"{len(self.spec.targets)} targets, packed), got {len(answers)}",
            )
        if self.padding_mask and answers[-1] & self.padding_mask:
            return Outcome(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"answers has nonzero padding bits: the last "
                f"{8 - len(self.spec.targets) % 8} bits of the last byte must be 0",
            )
        key = (report.pseudonym, report.round)
        if key in self.device_rounds:
            return Outcome(
                grpc.StatusCode.ALREADY_EXISTS,
                f"device {report.pseudonym.hex()} already reported round {report.round} "
                f"of query {qid!r} under another report id",
            )
        if self.rounds == 2 and report.round == 2:
            first = self.awaiting_round2.pop(report.pseudonym, None)
            if first is None:
                return Outcome(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"device {report.pseudonym.hex()} has no round-1 report in query {qid!r}; "
                    f"only devices that answered round 1 can answer round 2",
                )
            accepted.completed_answers[0].append(first)
            accepted.completed_answers[1].append(answers)
        elif self.rounds == 2:
            self.awaiting_round2[report.pseudonym] = answers
        else:
            accepted.completed_answers[0].append(answers)
        self.by_report_id[report.report_id] = StoredReport(report.pseudonym, report.round, answers)
        self.device_rounds.add(key)
        self.reports_per_round[report.round - 1] += 1
        accepted.rows.append((report.report_id, report.pseudonym, report.round, answers))
        return ACCEPTED

    def new_accepted(self) -> Accepted:
        return Accepted(completed_answers=[[] for _ in range(self.rounds)])

    def add_completed(self, accepted: Accepted) -> None:
        """Add the completed devices' answers of one group to the counts (vectorized)."""
        n_completed = len(accepted.completed_answers[0])
        if n_completed == 0:
            return
        n_targets = len(self.spec.targets)
        for round_index, answers in enumerate(accepted.completed_answers):
            packed = np.frombuffer(b"".join(answers), dtype=np.uint8).reshape(
                n_completed, self.answer_bytes
            )
            bits = np.unpackbits(packed, axis=1, count=n_targets)
            self.counts[round_index] += bits.sum(axis=0, dtype=np.int64)
        self.completed_devices += n_completed

    def forget_reports(self) -> None:
        """After a release: individual reports are gone."""
        self.by_report_id.clear()
        self.device_rounds.clear()
        self.awaiting_round2.clear()
