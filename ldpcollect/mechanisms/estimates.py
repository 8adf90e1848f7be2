"""Debiased estimates with standard errors and 95% normal intervals."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ldpcollect.errors import ParameterError

Z95 = 1.959963984540054


@dataclass(frozen=True, eq=False)
class Estimates:
    """Per target: estimate of the true count, its standard error and a 95% interval."""

    estimate: NDArray[np.float64]
    std_error: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    n_devices: int

    @classmethod
    def from_variance(
        cls, estimate: NDArray[np.float64], variance: NDArray[np.float64], n_devices: int
    ) -> Estimates:
        se = np.sqrt(np.maximum(variance, 0.0))
        return cls(estimate, se, estimate - Z95 * se, estimate + Z95 * se, n_devices)


def check_round_counts(
    round_counts: NDArray[np.integer] | NDArray[np.floating],
    rounds: int,
    n_devices: int,
    count_noise_variance: float,
) -> NDArray[np.float64]:
    """Validate estimate() inputs; returns the counts as float64 of shape (rounds, T).

    Without release noise every count must lie in [0, n_devices] (expected counts, which need
    not be integers, are accepted for analysis); with noise the counts may fall outside, but
    must be finite.
    """
    if isinstance(n_devices, bool) or not isinstance(n_devices, int | np.integer):
        raise ParameterError("n_devices", n_devices, "an integer >= 0")
    if n_devices < 0:
        raise ParameterError("n_devices", n_devices, "an integer >= 0")
    noise = float(count_noise_variance)
    if not (np.isfinite(noise) and noise >= 0):
        raise ParameterError("count_noise_variance", count_noise_variance, "[0, inf)")
    arr = np.asarray(round_counts)
    if arr.ndim != 2 or arr.shape[0] != rounds or arr.shape[1] < 1 or arr.dtype.kind not in "iuf":
        raise ParameterError(
            "round_counts",
            f"array {arr.dtype} shape {arr.shape}",
            f"a numeric array of shape ({rounds}, T), T >= 1",
        )
    counts = arr.astype(np.float64)
    if not np.all(np.isfinite(counts)):
        raise ParameterError("round_counts", "non-finite values", "finite counts")
    if noise == 0 and (np.any(counts < 0) or np.any(counts > n_devices)):
        raise ParameterError(
            "round_counts",
            f"range [{counts.min()}, {counts.max()}]",
            f"[0, n_devices={n_devices}] when count_noise_variance is 0",
        )
    return counts


def check_true_counts(
    true_counts: NDArray[np.integer] | list[int], n_devices: int
) -> NDArray[np.int64]:
    """Validate sample_aggregate() inputs: T non-negative counts summing to <= n_devices."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, int | np.integer):
        raise ParameterError("n_devices", n_devices, "an integer >= 0")
    if n_devices < 0:
        raise ParameterError("n_devices", n_devices, "an integer >= 0")
    arr = np.asarray(true_counts)
    if arr.ndim != 1 or not 1 <= arr.size <= 65_536 or arr.dtype.kind not in "iu":
        raise ParameterError(
            "true_counts",
            f"array {arr.dtype} shape {arr.shape}",
            "a one-dimensional integer array of 1 to 65,536 counts",
        )
    counts = arr.astype(np.int64)
    if np.any(counts < 0) or int(counts.sum()) > n_devices:
        raise ParameterError(
            "true_counts",
            f"min {int(counts.min())}, sum {int(counts.sum())}",
            f"counts >= 0 summing to at most n_devices={n_devices} (one location per device)",
        )
    return counts


def check_true_count(true_count: float, n_devices: int) -> tuple[float, int]:
    """Validate predicted_sd() inputs."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, int | np.integer):
        raise ParameterError("n_devices", n_devices, "an integer >= 0")
    if n_devices < 0:
        raise ParameterError("n_devices", n_devices, "an integer >= 0")
    t = float(true_count)
    if not (np.isfinite(t) and 0 <= t <= n_devices):
        raise ParameterError("true_count", true_count, f"[0, n_devices={n_devices}]")
    return t, int(n_devices)
