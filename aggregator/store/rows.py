"""How a query and a group of reports become table rows, for every SQL backend.

Numbers that must stay exact are text (fractions) or fixed-width little-endian bytes (targets
uint64, counts int64 rounds x targets row-major); small lists are JSON. Report ids, pseudonyms
and answers of one group are packed back to back in three columns (the report log).
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from aggregator.model import QuerySpec, QueryStatus
from aggregator.rounds import Accepted, LogEntry, QueryState
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.wire import REPORT_KEY_BYTES


class QueryRow(NamedTuple):
    """One row of the `queries` table; the field names are the column names."""

    query_id: str
    description: str
    mechanism: str
    mechanism_params: str
    scheme: str
    targets: bytes
    min_reports: int
    noise_sigma: str | None
    created_at: float
    status: int
    current_round: int
    reports_per_round: str
    completed_devices: int
    counts: bytes

    @classmethod
    def of(cls, state: QueryState) -> QueryRow:
        return cls(*spec_values(state.spec), state.created_at, *progress_values(state))

    def to_state(self) -> QueryState:
        """The query's state as committed, without its held reports (see `LogRow.restore`)."""
        spec = spec_of(
            self.query_id,
            self.description,
            self.mechanism,
            self.mechanism_params,
            self.scheme,
            self.targets,
            self.min_reports,
            self.noise_sigma,
        )
        mechanism = spec.mechanism
        state = QueryState.new(spec, self.created_at)
        state.status = QueryStatus(self.status)
        state.current_round = self.current_round
        state.reports_per_round = [int(x) for x in json.loads(self.reports_per_round)]
        state.completed_devices = self.completed_devices
        state.counts = (
            np.frombuffer(self.counts, dtype="<i8")
            .astype(np.int64)
            .reshape(mechanism.rounds, len(spec.targets))
        )
        return state


# The columns that describe a query (they never change), in `spec_values` order.
SPEC_COLUMNS = QueryRow._fields[:8]


def spec_values(spec: QuerySpec) -> tuple[str, str, str, str, str, bytes, int, str | None]:
    """Values of SPEC_COLUMNS."""
    return (
        spec.query_id,
        spec.description,
        spec.mechanism.name,
        json.dumps(spec.mechanism.params()),
        spec.scheme,
        np.asarray(spec.targets, dtype="<u8").tobytes(),
        spec.min_reports,
        None if spec.noise_sigma is None else str(spec.noise_sigma),
    )


def spec_of(
    query_id: str,
    description: str,
    mechanism: str,
    mechanism_params: str,
    scheme: str,
    targets: bytes,
    min_reports: int,
    noise_sigma: str | None,
) -> QuerySpec:
    """The QuerySpec stored in SPEC_COLUMNS."""
    return QuerySpec(
        query_id=query_id,
        description=description,
        mechanism=mechanism_from_params(mechanism, json.loads(mechanism_params)),
        scheme=scheme,
        targets=tuple(int(t) for t in np.frombuffer(targets, dtype="<u8")),
        min_reports=min_reports,
        noise_sigma=None if noise_sigma is None else Fraction(noise_sigma),
    )


# The columns a transaction changes after the query is created, in `progress_values` order.
PROGRESS_COLUMNS = QueryRow._fields[-5:]


def progress_values(state: QueryState) -> tuple[int, int, str, int, bytes]:
    """Values of PROGRESS_COLUMNS (the spec columns never change, so they are not re-encoded)."""
    return (
        int(state.status),
        state.current_round,
        json.dumps(state.reports_per_round),
        state.completed_devices,
        state.counts.astype("<i8").tobytes(),
    )


class LogRow(NamedTuple):
    """One row of the report log: the reports one transaction accepted for one query."""

    query_id: str
    round: int
    n: int
    report_ids: bytes  # n x 16 bytes
    pseudonyms: bytes  # n x 16 bytes
    answers: bytes  # n x ceil(targets / 8) bytes
    # The row's initial AES-CTR counter block when its columns are encrypted
    # (`aggregator.store.report_cipher`); None: stored in clear.
    nonce: bytes | None = None

    @classmethod
    def of(cls, query_id: str, accepted: Accepted) -> LogRow:
        return cls(
            query_id,
            accepted.round,
            accepted.count,
            b"".join(accepted.report_ids),
            b"".join(accepted.pseudonyms),
            b"".join(accepted.answers),
        )

    def restore(self, state: QueryState) -> None:
        """Rebuild `state`'s dedup indexes from this row (its counts are stored already)."""
        state.restore([self.entry(state)])

    def entry(self, state: QueryState) -> LogEntry:
        """This row's reports, checked against the query's widths."""
        for column, width in (
            (self.report_ids, REPORT_KEY_BYTES),
            (self.pseudonyms, REPORT_KEY_BYTES),
            (self.answers, state.answer_bytes),
        ):
            if len(column) != self.n * width:
                raise RuntimeError(
                    f"corrupt report log: a column of {self.n} entries of {width} bytes has "
                    f"{len(column)} bytes"
                )
        return LogEntry(self.round, self.n, self.report_ids, self.pseudonyms, self.answers)
