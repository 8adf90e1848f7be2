"""HDR percentiles agree with numpy's on known data, within the histogram's 0.1% precision."""

from __future__ import annotations

import math

import numpy as np
import pytest

from client.latency import PERCENTILES, LatencyHistogram


def test_percentiles_match_numpy_within_a_tenth_of_a_percent() -> None:
    rng = np.random.default_rng(11)
    seconds = rng.lognormal(mean=np.log(0.004), sigma=1.0, size=100_000)
    histogram = LatencyHistogram()
    for value in seconds:
        histogram.record(float(value))
    micros = np.maximum(1, np.round(seconds * 1e6))
    assert histogram.count == len(seconds)
    ordered = np.sort(micros)
    for p in PERCENTILES:
        # the sample at rank p N (an integer here; numpy's quantile can land one rank off when
        # p / 100 * N rounds up in floating point), to which HDR adds less than 0.1%
        exact = float(ordered[round(p / 100 * len(ordered)) - 1]) / 1000
        assert exact == pytest.approx(np.quantile(micros, p / 100) / 1000, rel=0.01)
        assert exact <= histogram.percentile_ms(p) <= exact * 1.001 + 1e-3, p
    assert micros.max() / 1000 <= histogram.max_ms() <= micros.max() / 1000 * 1.001
    assert histogram.mean_ms() == pytest.approx(micros.mean() / 1000, rel=1e-3)


def test_percentiles_are_ordered_and_empty_is_nan() -> None:
    histogram = LatencyHistogram()
    assert math.isnan(histogram.percentile_ms(50))
    for ms in range(1, 1001):
        histogram.record(ms / 1000)
    summary = histogram.summary_ms()
    values = [summary[k] for k in ("p50", "p90", "p99", "p99.9", "max")]
    assert values == sorted(values)
    assert summary["p50"] == pytest.approx(500, rel=1e-3)


def test_values_beyond_an_hour_are_clamped_and_counted() -> None:
    histogram = LatencyHistogram()
    histogram.record(7200.0)
    assert histogram.clamped == 1
    assert histogram.max_ms() == pytest.approx(3_600_000, rel=1e-3)
