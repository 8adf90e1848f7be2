"""Bounded in-flight work: what the Collector admits before refusing with a retry hint.

Without a bound, every accepted RPC holds its reports in memory until the writer commits them,
the writer's queue grows without limit and, past a point, gRPC itself drops calls (CANCELLED).
The Collector therefore takes a share of a fixed budget before it touches a submission:

- reports in flight (admitted, not yet committed): a unary call takes 1, a batch its size, a
  stream each chunk as it reads it. A unary call or a batch that does not fit is refused at once
  with RESOURCE_EXHAUSTED and a `grpc-retry-pushback-ms` hint; a stream waits for room (it stops
  reading, and HTTP/2 flow control slows the sender), and is refused the same way only if no
  room comes within `stream_wait_s`.
- concurrent streams: a StreamReports call beyond `max_streams` is refused at its start.
- idle streams: a stream that sends nothing for `stream_idle_timeout_s` is ended with
  UNAVAILABLE; what it sent before is committed and acknowledged on a resend.

The hint grows with the recent commit time, so clients come back about when there is room.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass

PUSHBACK_METADATA_KEY = "grpc-retry-pushback-ms"


@dataclass(frozen=True)
class OverloadLimits:
    max_inflight_reports: int = 200_000
    max_streams: int = 1_000
    stream_idle_timeout_s: float = 30.0
    stream_wait_s: float = 5.0

    def __post_init__(self) -> None:
        if self.max_inflight_reports < 1:
            raise ValueError(f"max_inflight_reports must be >= 1, got {self.max_inflight_reports}")
        if self.max_streams < 1:
            raise ValueError(f"max_streams must be >= 1, got {self.max_streams}")
        if not self.stream_idle_timeout_s > 0:
            raise ValueError(
                f"stream_idle_timeout_s must be > 0 seconds, got {self.stream_idle_timeout_s}"
            )
        if self.stream_wait_s < 0:
            raise ValueError(f"stream_wait_s must be >= 0 seconds, got {self.stream_wait_s}")


class Overloaded(Exception):
    """No room for this work now; `pushback_ms` says when to come back."""

    def __init__(self, message: str, pushback_ms: int) -> None:
        super().__init__(message)
        self.message = message
        self.pushback_ms = pushback_ms


class InFlightBudget:
    """Reports and streams in flight, on one event loop (not thread-safe by design)."""

    def __init__(self, limits: OverloadLimits) -> None:
        self.limits = limits
        self.reports = 0
        self.streams = 0
        self._freed = asyncio.Event()
        self._commit_s = 0.005  # smoothed recent commit time

    def observe_commit(self, seconds: float) -> None:
        self._commit_s = 0.8 * self._commit_s + 0.2 * seconds

    def pushback_ms(self) -> int:
        """About the time for the backlog ahead to commit: 2 to 4 commit groups, 20 ms to 5 s."""
        fill = self.reports / self.limits.max_inflight_reports
        return int(min(5_000, max(20, math.ceil(1000 * self._commit_s * (2 + 2 * fill)))))

    def _fits(self, n: int) -> bool:
        # Work larger than the whole budget is admitted alone rather than never.
        return self.reports + n <= self.limits.max_inflight_reports or self.reports == 0

    def take(self, n: int) -> None:
        """Admit n reports now, or raise Overloaded."""
        if not self._fits(n):
            raise Overloaded(
                f"the aggregator has {self.reports} reports in flight (limit "
                f"{self.limits.max_inflight_reports}); retry after the hinted delay, "
                "with the same report ids",
                self.pushback_ms(),
            )
        self.reports += n

    async def wait_and_take(self, n: int) -> None:
        """Admit n reports, waiting up to `stream_wait_s` for room, else raise Overloaded."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.stream_wait_s
        while not self._fits(n):
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise Overloaded(
                    f"no room for more reports within {self.limits.stream_wait_s:g} s "
                    f"({self.reports} in flight); the reports before this point were "
                    "counted: resend the rest after the hinted delay",
                    self.pushback_ms(),
                )
            self._freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._freed.wait(), remaining)
        self.reports += n

    def give_back(self, n: int) -> None:
        self.reports -= n
        self._freed.set()

    def open_stream(self) -> None:
        if self.streams >= self.limits.max_streams:
            raise Overloaded(
                f"the aggregator has {self.streams} report streams open (limit "
                f"{self.limits.max_streams}); retry after the hinted delay or use SubmitBatch",
                self.pushback_ms(),
            )
        self.streams += 1

    def close_stream(self) -> None:
        self.streams -= 1
