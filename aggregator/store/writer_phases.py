"""Where a single writer's transaction groups spend their time (the SQLite store's writer).

Three phases: applying the rules and admin changes, writing (the log rows, and the answer
files flushed to disk) and committing. Summed and set against the wall clock (the metric
`ldpcollect_writer_seconds`), they tell an operator whether the writer is the bottleneck
(near one second a second), and whether its CPU (apply) or its disk (write, commit) holds it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple


class WriterPhases(NamedTuple):
    """Seconds one transaction group spent in each phase."""

    apply: float
    write: float
    commit: float


@dataclass
class PhaseClock:
    """Adds up one group's `WriterPhases` (a few clock reads a group)."""

    apply: float = 0.0
    write: float = 0.0
    commit: float = 0.0

    @contextlib.contextmanager
    def timing(self, phase: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, phase, getattr(self, phase) + time.perf_counter() - started)

    def phases(self) -> WriterPhases:
        return WriterPhases(self.apply, self.write, self.commit)
