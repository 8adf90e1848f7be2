"""The Sampling Privacy paper's grid: 0.15 mile cells over a 9,500 x 9,500 mile square.

Cell id = row * 63334 + col, where 63334 = ceil(9500 / 0.15) cells per side, so ids run from 0 to
63334**2 - 1 = 4,011,195,555 and fit in 32 bits (seed 001: "a 32 bit identifier ... covers a
9,500 x 9,500 mile square with 0.15 mile sections").

Projection. A square of miles needs a flat map; we use the equidistant cylindrical
(equirectangular) projection on a sphere of radius 3958.76 miles (IUGG mean radius,
6371.0088 km), with its standard parallel at the origin's latitude:

    y = R * (lat - origin_lat)                      (radians; north is +y)
    x = R * cos(origin_lat) * wrap(lon - origin_lon)  (east is +x; wrap to [-180, 180) degrees)

The square is centred on the origin: rows count northward from its south edge, columns eastward
from its west edge (row 0 / col 0 is the south-west corner; ids increase west to east, then
south to north). Cells are half-open: a point on a boundary belongs to the cell to its north
or east.

Default origin: the Eiffel Tower, lat 48.8584, lon 2.2945 (the paper's running example). The
default grid then spans lat -19.89 .. 90 (the rows that would lie beyond the north pole, lat
90 .. 117.61, are never used) and lon -102.20 .. 106.79: Europe, Africa north of ~20 S, the
Middle East, India, western Russia and North America east of ~102 W. Points elsewhere are
outside the grid and raise ParameterError; this is a regional grid, not a global one (a 9,500
mile square cannot cover a 197 million square mile sphere). Use H3 cells for places outside it
(the western Americas, East Asia, Australia, ...).

Distortion (honest statement). Every row is exactly 0.15 miles of latitude (north-south distances
are true everywhere). East-west, a cell is 0.15 * cos(lat) / cos(origin_lat) miles wide: true at
the origin's latitude (48.86 N by default), 0.228 miles at the equator, 0.114 at 60 N, 0.078 at
70 N, and zero at the poles, where a whole row of cells meets in one point (a point exactly at a
pole, where longitude means nothing, gets the cell of the grid's central column). Cell areas
therefore range from 0 to 1.52 times the nominal 0.0225 square miles within the default grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError
from ldpcollect.geo.coords import check_bbox, check_point, check_points, check_target_count

EARTH_RADIUS_MILES: Final = 6371.0088 / 1.609344
CELL_MILES: Final = 0.15
SIDE_MILES: Final = 9500
CELLS_PER_SIDE: Final = math.ceil(SIDE_MILES / CELL_MILES)  # 63334
CELL_COUNT: Final = CELLS_PER_SIDE * CELLS_PER_SIDE  # 4,011,195,556 < 2**32
DEFAULT_ORIGIN: Final = (48.8584, 2.2945)
ROW_DEGREES: Final = math.degrees(CELL_MILES / EARTH_RADIUS_MILES)
"""Height of a row in degrees of latitude (about 0.00217)."""

_HALF: Final = CELLS_PER_SIDE / 2
# The square must not wrap around the globe: CELLS_PER_SIDE columns of ROW_DEGREES / cos(lat)
# degrees each fit in 360 degrees only while |origin_lat| <= about 67.55.
MAX_ORIGIN_LAT: Final = math.degrees(math.acos(CELLS_PER_SIDE * ROW_DEGREES / 360.0))

UInt32Array = npt.NDArray[np.uint32]


def _wrap(degrees: float) -> float:
    return (degrees + 180.0) % 360.0 - 180.0


@dataclass(frozen=True)
class Grid:
    """The 9,500 mile square centred on (origin_lat, origin_lon); see the module docstring."""

    origin_lat: float = DEFAULT_ORIGIN[0]
    origin_lon: float = DEFAULT_ORIGIN[1]

    def __post_init__(self) -> None:
        lat, lon = check_point(self.origin_lat, self.origin_lon)
        if abs(lat) > MAX_ORIGIN_LAT:
            raise ParameterError(
                "origin_lat",
                self.origin_lat,
                f"[{-MAX_ORIGIN_LAT:.2f}, {MAX_ORIGIN_LAT:.2f}] degrees",
                "further from the equator the 9,500 mile square would wrap around the globe",
            )
        object.__setattr__(self, "origin_lat", lat)
        object.__setattr__(self, "origin_lon", lon)

    @property
    def col_degrees(self) -> float:
        """Width of a column in degrees of longitude."""
        return ROW_DEGREES / math.cos(math.radians(self.origin_lat))

    def extent(self) -> str:
        """Where the grid ends, in words (used in error messages)."""
        south = self.origin_lat - _HALF * ROW_DEGREES
        north = self.origin_lat + _HALF * ROW_DEGREES
        lat_text = f"lat [{max(south, -90.0):.4f}, {min(north, 90.0):.4f}"
        lat_text += "]" if north > 90.0 else ")"
        west = _wrap(self.origin_lon - _HALF * self.col_degrees)
        east = _wrap(self.origin_lon + _HALF * self.col_degrees)
        if west < east:
            lon_text = f"lon [{west:.4f}, {east:.4f})"
        else:
            lon_text = f"lon [{west:.4f}, 180] or [-180, {east:.4f})"
        origin = f"{self.origin_lat:g}, {self.origin_lon:g}"
        return f"the grid centred on ({origin}): {lat_text} x {lon_text}"

    def locate(self, lat: float, lon: float) -> int:
        """The id of the cell containing (lat, lon); ParameterError outside the grid."""
        lat_f, lon_f = check_point(lat, lon)
        if abs(lat_f) == 90.0:
            lon_f = self.origin_lon  # every longitude is the same point at a pole
        row = math.floor((lat_f - self.origin_lat) / ROW_DEGREES + _HALF)
        col = math.floor(_wrap(lon_f - self.origin_lon) / self.col_degrees + _HALF)
        if not (0 <= row < CELLS_PER_SIDE and 0 <= col < CELLS_PER_SIDE):
            raise ParameterError("location", (lat, lon), self.extent(), "outside the grid")
        return row * CELLS_PER_SIDE + col

    def locate_many(self, lats: npt.ArrayLike, lons: npt.ArrayLike) -> UInt32Array:
        """Vectorized `locate`: uint32 cell ids; ParameterError naming the first point outside."""
        lat_a, lon_a = check_points(lats, lons)
        rows = np.floor((lat_a - self.origin_lat) / ROW_DEGREES + _HALF)
        lon_a = np.where(np.abs(lat_a) == 90.0, self.origin_lon, lon_a)
        dlon = np.mod(lon_a - self.origin_lon + 180.0, 360.0) - 180.0
        cols = np.floor(dlon / self.col_degrees + _HALF)
        outside = (rows < 0) | (rows >= CELLS_PER_SIDE) | (cols < 0) | (cols >= CELLS_PER_SIDE)
        if outside.any():
            first = int(np.flatnonzero(outside)[0])
            raise ParameterError(
                "location",
                (float(lat_a[first]), float(lon_a[first])),
                self.extent(),
                f"{int(outside.sum())} of {outside.size} points outside the grid, "
                f"first at index {first}",
            )
        ids = rows.astype(np.uint32) * np.uint32(CELLS_PER_SIDE) + cols.astype(np.uint32)
        return ids

    def center(self, cell: int) -> tuple[float, float]:
        """(lat, lon) of a cell's centre (for a row crossing a pole: of the part on the globe)."""
        row, col = divmod(check_cell(cell), CELLS_PER_SIDE)
        south_edge = self.origin_lat + (row - _HALF) * ROW_DEGREES
        north_edge = south_edge + ROW_DEGREES
        if south_edge >= 90.0 or north_edge <= -90.0:
            raise ParameterError("cell", cell, self.extent(), f"row {row} lies beyond a pole")
        if south_edge < -90.0 or north_edge > 90.0:  # a pole's row: centre of its on-globe part
            lat = (max(south_edge, -90.0) + min(north_edge, 90.0)) / 2
        else:
            lat = south_edge + ROW_DEGREES / 2
        lon = _wrap(self.origin_lon + (col + 0.5 - _HALF) * self.col_degrees)
        return lat, lon

    def bounds(self, cell: int) -> tuple[float, float, float, float]:
        """(south, west, north, east) of a cell in degrees, clipped to the poles.

        `east` is `west` plus one column, so near the antimeridian it may exceed 180: the square
        stays one piece for drawing.
        """
        row, col = divmod(check_cell(cell), CELLS_PER_SIDE)
        south_edge = self.origin_lat + (row - _HALF) * ROW_DEGREES
        if south_edge >= 90.0 or south_edge + ROW_DEGREES <= -90.0:
            raise ParameterError("cell", cell, self.extent(), f"row {row} lies beyond a pole")
        west = _wrap(self.origin_lon + (col - _HALF) * self.col_degrees)
        north = min(south_edge + ROW_DEGREES, 90.0)
        return max(south_edge, -90.0), west, north, west + self.col_degrees

    def targets_in_bbox(
        self, south: float, west: float, north: float, east: float
    ) -> tuple[int, ...]:
        """Ids of every cell the box touches, row-major (ascending); at most 65,536 of them.

        `west > east` means the box crosses the antimeridian. The whole box must lie in the grid.
        """
        box = check_bbox(south, west, north, east)
        row_s = math.floor((box.south - self.origin_lat) / ROW_DEGREES + _HALF)
        row_n = math.floor((box.north - self.origin_lat) / ROW_DEGREES + _HALF)
        west_offset = _wrap(box.west - self.origin_lon)
        col_w = math.floor(west_offset / self.col_degrees + _HALF)
        col_e = math.floor((west_offset + box.lon_width) / self.col_degrees + _HALF)
        if row_s < 0 or row_n >= CELLS_PER_SIDE or col_w < 0 or col_e >= CELLS_PER_SIDE:
            raise ParameterError(
                "bbox", tuple(box), self.extent(), "the box extends beyond the grid"
            )
        count = (row_n - row_s + 1) * (col_e - col_w + 1)
        check_target_count(count, "bbox", tuple(box))
        rows = np.arange(row_s, row_n + 1, dtype=np.int64)[:, None]
        cols = np.arange(col_w, col_e + 1, dtype=np.int64)[None, :]
        ids: list[int] = (rows * CELLS_PER_SIDE + cols).ravel().tolist()
        return tuple(ids)


def check_cell(cell: int) -> int:
    """Return `cell` if it is a grid id in [0, 63334**2), else raise ParameterError."""
    if isinstance(cell, bool) or not isinstance(cell, (int, np.integer)):
        raise ParameterError("cell", cell, f"an integer grid id in [0, {CELL_COUNT:,})")
    value = int(cell)
    if not 0 <= value < CELL_COUNT:
        raise ParameterError("cell", cell, f"an integer grid id in [0, {CELL_COUNT:,})")
    return value


DEFAULT_GRID: Final = Grid()
"""The grid the wire contract's GridScheme means (origin at the Eiffel Tower)."""
