"""When each request of an open-loop load test is due, and what its latency is (pure arithmetic).

Open loop (wrk2): request i is due at t0 + i/rate whatever happened to the earlier ones, and
its latency runs from that intended time, not from when it was actually sent. A server that
stalls for a second therefore shows a second of latency on every request due during the
stall, instead of the one slow request a closed-loop client would see (coordinated omission).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ldpcollect.errors import ParameterError

# A send this much after its intended time means the client could not keep the schedule.
LATE_AFTER_SECONDS = 0.010


@dataclass(frozen=True)
class OpenLoopSchedule:
    """`rate` requests per second for `duration` seconds, the first at t0."""

    rate: float
    duration: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise ParameterError("--rate", self.rate, "(0, inf) requests per second")
        if not (math.isfinite(self.duration) and self.duration > 0):
            raise ParameterError("--duration", self.duration, "(0, inf) seconds")

    @property
    def count(self) -> int:
        """Requests due in [t0, t0 + duration): i / rate < duration."""
        return max(1, math.ceil(self.rate * self.duration - 1e-9))

    def intended(self, t0: float, i: int) -> float:
        return t0 + i / self.rate


@dataclass(frozen=True)
class Timing:
    """One request's clock readings: due (intended), sent, and answered (done); and whether it
    had to wait for an in-flight slot (the client's bound on concurrent requests)."""

    intended: float
    sent: float
    done: float
    waited_for_slot: bool = False

    @property
    def latency(self) -> float:
        """What a device would have waited: from the intended send time to the answer."""
        return self.done - self.intended

    @property
    def service_time(self) -> float:
        """The RPC alone, from the actual send (what a closed-loop tool would report)."""
        return self.done - self.sent

    @property
    def send_delay(self) -> float:
        return max(0.0, self.sent - self.intended)

    @property
    def late(self) -> bool:
        """Not sent on time: it waited for an in-flight slot, or the client fell behind."""
        return self.waited_for_slot or self.send_delay > LATE_AFTER_SECONDS
