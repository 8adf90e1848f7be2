"""Query targets (an ordered list of location IDs) and mapping device locations onto them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
from numpy.typing import NDArray

from ldpcollect.errors import ParameterError

MAX_TARGETS = 65_536
LOCATION_LIMIT = 1 << 64
_TARGETS_ALLOWED = "1 to 65,536 unique location IDs, each an integer in [0, 2**64)"


def validate_targets(targets: Iterable[int]) -> tuple[int, ...]:
    """The targets as a tuple of ints: non-empty, unique, at most 65,536, each in [0, 2**64)."""
    items = list(targets)
    if not items:
        raise ParameterError("targets", "[]", _TARGETS_ALLOWED, "no targets")
    if len(items) > MAX_TARGETS:
        raise ParameterError(
            "targets", f"{len(items)} targets", _TARGETS_ALLOWED, "too many targets"
        )
    out: list[int] = []
    seen: set[int] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | np.integer):
            raise ParameterError("targets", item, _TARGETS_ALLOWED, "not an integer")
        value = int(item)
        if not 0 <= value < LOCATION_LIMIT:
            raise ParameterError("targets", value, _TARGETS_ALLOWED, "out of range")
        if value in seen:
            raise ParameterError("targets", value, _TARGETS_ALLOWED, "duplicate target")
        seen.add(value)
        out.append(value)
    return tuple(out)


def validate_location(location_id: int) -> int:
    """One device's location ID, an integer in [0, 2**64)."""
    if isinstance(location_id, bool) or not isinstance(location_id, int | np.integer):
        raise ParameterError("location_id", location_id, "an integer in [0, 2**64)")
    value = int(location_id)
    if not 0 <= value < LOCATION_LIMIT:
        raise ParameterError("location_id", value, "an integer in [0, 2**64)")
    return value


def targets_array(targets: Iterable[int] | NDArray[np.integer]) -> NDArray[np.uint64]:
    """Validated targets as a uint64 array (order kept)."""
    items = targets.tolist() if isinstance(targets, np.ndarray) else targets
    return np.array(validate_targets(items), dtype=np.uint64)


def locations_array(locations: NDArray[np.integer] | Iterable[int]) -> NDArray[np.uint64]:
    """Device locations as a one-dimensional uint64 array, each in [0, 2**64)."""
    arr = np.asarray(locations)
    allowed = "a one-dimensional integer array of location IDs in [0, 2**64)"
    if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
        raise ParameterError("locations", f"array {arr.dtype} shape {arr.shape}", allowed)
    if arr.dtype.kind == "i" and arr.size and int(arr.min()) < 0:
        raise ParameterError("locations", int(arr.min()), allowed)
    return arr.astype(np.uint64, copy=False)


class TargetIndex:
    """Maps location IDs to the index of the equal target, or -1 when none is equal."""

    def __init__(self, targets: NDArray[np.uint64]) -> None:
        self.order = np.argsort(targets, kind="stable")
        self.sorted = targets[self.order]

    def __call__(self, locations: NDArray[np.uint64]) -> NDArray[np.int64]:
        pos = np.searchsorted(self.sorted, locations)
        pos = np.minimum(pos, self.sorted.size - 1)
        hit = self.sorted[pos] == locations
        return np.where(hit, self.order[pos], -1).astype(np.int64)


def device_chunks(n_devices: int, n_targets: int, cells: int = 1 << 20) -> Iterator[slice]:
    """Slices of devices so one chunk holds about `cells` (device, target) pairs."""
    step = max(1, cells // max(1, n_targets))
    for start in range(0, n_devices, step):
        yield slice(start, min(n_devices, start + step))


def column_counts(answers: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Yes count per target of a (devices, T) chunk (int32 accumulation: chunks are small)."""
    if answers.shape[0] >= 1 << 31:
        raise ParameterError("chunk", answers.shape[0], "fewer than 2**31 devices per chunk")
    counts: NDArray[np.int32] = np.add.reduce(answers.view(np.uint8), axis=0, dtype=np.int32)
    return counts.astype(np.int64)
