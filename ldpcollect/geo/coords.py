"""Validation shared by the location schemes: coordinates, bounding boxes, target-list size."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError

MAX_TARGETS = 65_536
"""A query covers at most this many targets (docs/design.md, "Mechanisms and estimators")."""

FloatArray = npt.NDArray[np.float64]


class BBox(NamedTuple):
    """A validated latitude/longitude box in degrees.

    `west > east` means the box crosses the antimeridian (lon +-180); `west == -180` and
    `east == 180` covers every longitude.
    """

    south: float
    west: float
    north: float
    east: float

    @property
    def lon_width(self) -> float:
        """Width in degrees of longitude, going east from `west` to `east` (0 .. 360]."""
        if self.west <= self.east:
            return self.east - self.west
        return self.east - self.west + 360.0


def check_point(lat: float, lon: float) -> tuple[float, float]:
    """Return (lat, lon) as floats, or raise ParameterError for NaN or out-of-range values."""
    lat_f = _as_float("lat", lat)
    lon_f = _as_float("lon", lon)
    if not -90.0 <= lat_f <= 90.0:
        raise ParameterError("lat", lat, "[-90, 90] degrees")
    if not -180.0 <= lon_f <= 180.0:
        raise ParameterError("lon", lon, "[-180, 180] degrees")
    return lat_f, lon_f


def check_points(lats: npt.ArrayLike, lons: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Vectorized `check_point`: 1-D float64 arrays of equal length, all in range, no NaN."""
    lat_a = np.asarray(lats, dtype=np.float64)
    lon_a = np.asarray(lons, dtype=np.float64)
    if lat_a.ndim != 1 or lon_a.shape != lat_a.shape:
        raise ParameterError(
            "lats/lons",
            f"shapes {lat_a.shape} and {lon_a.shape}",
            "two 1-D arrays of the same length",
        )
    _check_range("lats", lat_a, 90.0)
    _check_range("lons", lon_a, 180.0)
    return lat_a, lon_a


def check_bbox(south: float, west: float, north: float, east: float) -> BBox:
    """Validate a box: south <= north; west > east means it crosses the antimeridian."""
    south_f, west_f = check_point(south, west)
    north_f, east_f = check_point(north, east)
    if south_f > north_f:
        raise ParameterError(
            "bbox",
            (south, west, north, east),
            "south,west,north,east with south <= north",
            f"its south edge {south_f:g} lies north of its north edge {north_f:g}",
        )
    return BBox(south_f, west_f, north_f, east_f)


def check_target_count(count: int, what: str, value: object, *, approximate: bool = False) -> None:
    """Raise ParameterError when a target list would exceed MAX_TARGETS."""
    if count > MAX_TARGETS:
        about = "about " if approximate else ""
        raise ParameterError(
            what,
            value,
            f"a region of at most {MAX_TARGETS:,} target cells",
            f"it covers {about}{count:,} cells; use a smaller region or a coarser resolution",
        )


def _as_float(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterError(name, value, "a real number of degrees")
    result = float(value)
    if math.isnan(result):
        raise ParameterError(name, value, "a real number of degrees", "NaN is not a location")
    return result


def _check_range(name: str, values: FloatArray, limit: float) -> None:
    bad = ~(np.abs(values) <= limit)  # NaN compares False, so it counts as bad
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ParameterError(
            name,
            float(values[first]),
            f"[{-limit:g}, {limit:g}] degrees",
            f"{int(bad.sum())} of {values.size} values invalid, first at index {first}",
        )
