"""Latency percentiles from an HDR histogram (three significant digits, 1 µs to 1 hour).

Recording costs O(1) and constant memory however long the test runs; a percentile is the
highest value equivalent (within 0.1%) to the recorded sample at that rank, as wrk2 and ghz
report it. Values beyond an hour are clamped to an hour and counted.
"""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
_LOWEST_US = 1
_HIGHEST_US = 3_600_000_000
_DIGITS = 3


class LatencyHistogram:
    """Latencies recorded in seconds, read back in milliseconds."""

    def __init__(self) -> None:
        self._hdr = HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS)
        self.clamped = 0

    def record(self, seconds: float) -> None:
        micros = max(_LOWEST_US, round(seconds * 1e6))
        if micros > _HIGHEST_US:
            self.clamped += 1
            micros = _HIGHEST_US
        self._hdr.record_value(micros)

    @property
    def count(self) -> int:
        return int(self._hdr.get_total_count())

    def percentile_ms(self, percentile: float) -> float:
        """The latency at `percentile` (0-100], in ms; NaN when nothing was recorded."""
        if self.count == 0:
            return float("nan")
        return float(self._hdr.get_value_at_percentile(percentile)) / 1000.0

    def max_ms(self) -> float:
        return float(self._hdr.get_max_value()) / 1000.0 if self.count else float("nan")

    def mean_ms(self) -> float:
        return float(self._hdr.get_mean_value()) / 1000.0 if self.count else float("nan")

    def summary_ms(self) -> dict[str, float]:
        """p50, p90, p99, p99.9, max and mean in ms."""
        out = {f"p{p:g}": self.percentile_ms(p) for p in PERCENTILES}
        out["max"] = self.max_ms()
        out["mean"] = self.mean_ms()
        return out
