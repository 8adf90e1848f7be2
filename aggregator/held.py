"""Where a query's held reports are found again, and SP's waiting round-1 answers.

The dedup indexes (`aggregator.keyindex`) map a report id to its ordinal: its position among
the query's held reports, in acceptance order. Only a repeated report id needs the report
behind it (is the copy identical, a duplicate, or a different report under a used id?), so
the reports themselves can stay where they are stored: `HeldReports` finds one by ordinal.
`InMemoryHeld` keeps them in memory (any backend); a store may look them up in its own log
instead (`aggregator.store.log_held`).
"""

from __future__ import annotations

import bisect
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from ldpcollect.wire import REPORT_KEY_BYTES


class HeldReport(NamedTuple):
    round: int
    pseudonym: bytes
    answers: bytes


class HeldReports(Protocol):
    """A query's held reports by ordinal (0, 1, ... in acceptance order)."""

    def __len__(self) -> int: ...

    def hold(self, round_: int, n: int, pseudonyms: bytes, answers: bytes) -> None:
        """Append `n` accepted reports of one round (packed columns)."""

    def fetch(self, ordinal: int) -> HeldReport: ...

    def truncate(self, n: int) -> None:
        """Forget every report from ordinal `n` on (a failed transaction's)."""

    def clear(self) -> None: ...


class _Run(NamedTuple):
    first: int
    round: int
    pseudonyms: bytes
    answers: bytes


class InMemoryHeld:
    """Held reports kept in memory as packed runs (pseudonyms and answers back to back)."""

    def __init__(self, answer_bytes: int) -> None:
        self._width = answer_bytes
        self._runs: list[_Run] = []
        self._firsts: list[int] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def hold(self, round_: int, n: int, pseudonyms: bytes, answers: bytes) -> None:
        self._runs.append(_Run(self._count, round_, pseudonyms, answers))
        self._firsts.append(self._count)
        self._count += n

    def fetch(self, ordinal: int) -> HeldReport:
        run = self._runs[bisect.bisect_right(self._firsts, ordinal) - 1]
        return run_report(run.round, run.pseudonyms, run.answers, ordinal - run.first, self._width)

    def truncate(self, n: int) -> None:
        keep = bisect.bisect_left(self._firsts, n)
        del self._runs[keep:]
        del self._firsts[keep:]
        self._count = n

    def clear(self) -> None:
        self.truncate(0)


def run_report(round_: int, pseudonyms: bytes, answers: bytes, i: int, width: int) -> HeldReport:
    """Report `i` of a run of packed columns."""
    k = REPORT_KEY_BYTES
    return HeldReport(round_, pseudonyms[i * k : (i + 1) * k], answers[i * width : (i + 1) * width])


class PackedRows:
    """Fixed-width byte rows, appended in order, in chunks of about 1 MiB (no regrowth copies)."""

    def __init__(self, width: int) -> None:
        self._width = width
        self._chunk_rows = max(1, (1 << 20) // max(width, 1))
        self._chunks: list[npt.NDArray[np.uint8]] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self._chunks)

    def append(self, packed: bytes) -> None:
        rows = np.frombuffer(packed, dtype=np.uint8).reshape(-1, self._width)
        while len(rows):
            chunk, at = divmod(self._n, self._chunk_rows)
            if chunk == len(self._chunks):
                self._chunks.append(np.empty((self._chunk_rows, self._width), dtype=np.uint8))
            take = min(len(rows), self._chunk_rows - at)
            self._chunks[chunk][at : at + take] = rows[:take]
            rows = rows[take:]
            self._n += take

    def take(self, rows: npt.NDArray[np.int64]) -> bytes:
        """Rows `rows`, packed back to back in that order."""
        out = np.empty((len(rows), self._width), dtype=np.uint8)
        chunk, at = np.divmod(rows, self._chunk_rows)
        for c in np.unique(chunk).tolist():
            mine = chunk == c
            out[mine] = self._chunks[c][at[mine]]
        return out.tobytes()

    def truncate(self, n: int) -> None:
        self._n = min(n, self._n)
        del self._chunks[-(-self._n // self._chunk_rows) :]

    def clear(self) -> None:
        self.truncate(0)
