"""A load test's latency as a PNG: over time (by intended send time) and its distribution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

# Percentiles marked on the distribution's axis, as HdrHistogram plots do.
_TICKS = (0.0, 0.5, 0.9, 0.99, 0.999, 0.9999)


def plot_latency(
    path: Path,
    intended_at: npt.NDArray[np.float64],
    latencies: npt.NDArray[np.float64],
    title: str,
) -> None:
    """Top: each answered request's latency (ms) at its intended send time (s).
    Bottom: latency by percentile, the x axis stretched towards the tail (1 / (1 - p))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    answered = ~np.isnan(latencies)
    t, ms = intended_at[answered], latencies[answered] * 1000.0
    fig, (over_time, by_percentile) = plt.subplots(2, 1, figsize=(8, 7))
    over_time.scatter(t, ms, s=2 if len(ms) > 2000 else 8, alpha=0.6, linewidths=0)
    over_time.set_xlabel("intended send time (s)")
    over_time.set_ylabel("latency (ms)")
    over_time.set_title(title, fontsize=10)
    over_time.grid(alpha=0.3)
    if len(ms):
        ordered = np.sort(ms)
        p = (np.arange(len(ordered)) + 0.5) / len(ordered)
        by_percentile.plot(1.0 / (1.0 - p), ordered)
        by_percentile.set_xscale("log")
        ticks = [1.0 / (1.0 - q) for q in _TICKS if 1.0 / (1.0 - q) <= len(ordered)]
        by_percentile.set_xticks(ticks, [f"{100 * (1 - 1 / x):g}%" for x in ticks])
        by_percentile.minorticks_off()
    by_percentile.set_xlabel("percentile")
    by_percentile.set_ylabel("latency (ms)")
    by_percentile.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
