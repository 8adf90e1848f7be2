"""H3 cells (h3 v4) as 64-bit location ids at a chosen resolution (0..15).

Uses h3's integer API (`h3.api.basic_int`): ids are Python ints in [0, 2**64). Target lists are
sorted ascending so the same region always gives the same order. A bounding box selects the
cells whose centres lie inside it (H3's polygon fill; the box's edges are lines of constant
latitude and longitude); a box crossing the antimeridian is split there, and pieces wider than
90 degrees are split further, so that H3 never reads an edge the short way round the globe.
"""

from __future__ import annotations

import itertools
import math
from typing import Final

import h3
import numpy as np
import numpy.typing as npt
from h3.api import basic_int as h3i

from ldpcollect.errors import ParameterError
from ldpcollect.geo.coords import (
    MAX_TARGETS,
    check_bbox,
    check_point,
    check_points,
    check_target_count,
)

MIN_RESOLUTION: Final = 0
MAX_RESOLUTION: Final = 15
EARTH_RADIUS_KM: Final = 6371.0088
_MAX_PIECE_DEGREES: Final = 90.0

UInt64Array = npt.NDArray[np.uint64]


def check_resolution(resolution: int) -> int:
    """Return `resolution` if it is an int in [0, 15], else raise ParameterError."""
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)):
        raise ParameterError("resolution", resolution, "an integer in [0, 15]")
    if not MIN_RESOLUTION <= int(resolution) <= MAX_RESOLUTION:
        raise ParameterError("resolution", resolution, "an integer in [0, 15]")
    return int(resolution)


def check_cell(cell: int, resolution: int | None = None, parameter: str = "cell") -> int:
    """Return `cell` if it is a valid H3 cell id (at `resolution`, if given), else raise."""
    allowed = "a valid H3 cell id in [0, 2**64)"
    if resolution is not None:
        allowed = f"a valid H3 cell id at resolution {resolution}"
    if isinstance(cell, bool) or not isinstance(cell, (int, np.integer)):
        raise ParameterError(parameter, cell, allowed)
    value = int(cell)
    if not 0 <= value < 2**64 or not h3i.is_valid_cell(value):
        raise ParameterError(parameter, cell, allowed)
    if resolution is not None and h3i.get_resolution(value) != resolution:
        raise ParameterError(
            parameter, cell, allowed, f"it is at resolution {h3i.get_resolution(value)}"
        )
    return value


def locate(lat: float, lon: float, resolution: int) -> int:
    """The H3 cell id containing (lat, lon) at `resolution`."""
    lat_f, lon_f = check_point(lat, lon)
    return int(h3i.latlng_to_cell(lat_f, lon_f, check_resolution(resolution)))


def locate_many(lats: npt.ArrayLike, lons: npt.ArrayLike, resolution: int) -> UInt64Array:
    """Vectorized `locate` (uint64). h3-py has no array API, so this loops (~1 us per point)."""
    res = check_resolution(resolution)
    lat_a, lon_a = check_points(lats, lons)
    to_cell = h3i.latlng_to_cell
    cells = (to_cell(a, b, res) for a, b in zip(lat_a.tolist(), lon_a.tolist(), strict=True))
    return np.fromiter(cells, dtype=np.uint64, count=lat_a.size)


def center(cell: int) -> tuple[float, float]:
    """(lat, lon) of the cell's centre."""
    lat, lon = h3i.cell_to_latlng(check_cell(cell))
    return float(lat), float(lon)


def boundary(cell: int) -> list[tuple[float, float]]:
    """The cell's polygon as (lat, lon) vertices, counter-clockwise, not closed.

    Longitudes are unwrapped from the first vertex, so a cell crossing the antimeridian stays
    one polygon (some longitudes then lie beyond +-180).
    """
    vertices = h3i.cell_to_boundary(check_cell(cell))
    first_lon = float(vertices[0][1])
    return [(float(lat), _near(float(lon), first_lon)) for lat, lon in vertices]


def to_text(cell: int) -> str:
    """H3's canonical form of a cell id: lower-case hex, e.g. "891fb46741bffff"."""
    return format(check_cell(cell), "x")


def from_text(text: str, parameter: str = "cell") -> int:
    """A cell from its hex string (canonical) or its decimal 64-bit integer.

    Decimal H3 ids have 18 or more digits and hex ones at most 16 characters, so the two
    forms never collide.
    """
    cleaned = text.strip().lower().removeprefix("0x")
    try:
        value = int(cleaned) if cleaned.isdigit() and len(cleaned) > 16 else int(cleaned, 16)
    except ValueError:
        raise ParameterError(
            parameter, text, "an H3 cell in hex, e.g. 891fb46741bffff (or its decimal id)"
        ) from None
    return check_cell(value, parameter=parameter)


def _near(lon: float, reference: float) -> float:
    """`lon`, or `lon` +- 360 when that is nearer `reference` (unchanged when within 180)."""
    if lon - reference > 180.0:
        return lon - 360.0
    if reference - lon > 180.0:
        return lon + 360.0
    return lon


def targets_in_bbox(
    south: float, west: float, north: float, east: float, resolution: int
) -> tuple[int, ...]:
    """Cells at `resolution` whose centres lie in the box, ascending; 1 to 65,536 of them.

    Centre containment (H3's rule) means boxes that tile the map give disjoint target lists.
    `west > east` means the box crosses the antimeridian. Raises ParameterError (before
    computing anything large) when the box holds more than 65,536 cells, or none.
    """
    res = check_resolution(resolution)
    box = check_bbox(south, west, north, east)
    estimate = _estimated_cells(box.south, box.north, box.lon_width, res)
    if estimate > 3 * MAX_TARGETS:  # cell areas vary < 3x around the average: surely too many
        check_target_count(round(estimate), "bbox", tuple(box), approximate=True)
    cells: set[int] = set()
    for piece_west, piece_east in _split_longitudes(box.west, box.east):
        if piece_west == piece_east or box.south == box.north:
            continue  # no area, so (almost surely) no cell centre; H3 rejects such polygons
        cells.update(_fill_box(box.south, piece_west, box.north, piece_east, res))
    check_target_count(len(cells), "bbox", tuple(box))
    if not cells:
        raise ParameterError(
            "bbox",
            tuple(box),
            f"a box holding at least one H3 cell centre at resolution {res}",
            "use a larger box or a finer resolution",
        )
    return tuple(sorted(cells))


def targets_in_parent(parent: int, resolution: int) -> tuple[int, ...]:
    """The children of a coarser `parent` cell at `resolution`, ascending; at most 65,536."""
    res = check_resolution(resolution)
    parent_id = check_cell(parent, parameter="parent")
    parent_res = h3i.get_resolution(parent_id)
    if parent_res > res:
        raise ParameterError(
            "parent", parent, f"a cell at resolution <= {res}", f"it is at resolution {parent_res}"
        )
    check_target_count(int(h3i.cell_to_children_size(parent_id, res)), "parent", parent)
    return tuple(sorted(int(c) for c in h3i.cell_to_children(parent_id, res)))


def targets_in_disk(center_cell: int, k: int) -> tuple[int, ...]:
    """Cells within grid distance k of `center_cell` (same resolution), ascending."""
    cell = check_cell(center_cell, parameter="center")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ParameterError("k", k, "an integer >= 0")
    check_target_count(3 * int(k) * (int(k) + 1) + 1, "k", k)
    return tuple(sorted(int(c) for c in h3i.grid_disk(cell, int(k))))


def _fill_box(south: float, west: float, north: float, east: float, res: int) -> list[int]:
    """Cells whose centres lie in a box that does not cross lon 180 and is at most 90 deg wide.

    H3's classic polygon fill sometimes fails with E_FAILED at high latitudes (uber/h3 issues
    #945, #1000, #1051); then we try the newer algorithm (h3 >= 4.2), and failing that fill the
    four quarters of the box separately (centre containment makes the union the same set).
    """
    outer = [(south, west), (south, east), (north, east), (north, west)]
    polygon = h3.LatLngPoly(outer)
    try:
        return [int(c) for c in h3i.h3shape_to_cells(polygon, res)]
    except h3.H3FailedError:
        pass
    experimental = getattr(h3i, "polygon_to_cells_experimental", None)
    if experimental is not None:
        try:
            return [int(c) for c in experimental(polygon, res, contain="center")]
        except h3.H3FailedError:
            pass
    if (north - south) + (east - west) < 1e-9:
        raise ParameterError(
            "bbox", (south, west, north, east), "a box H3 can fill", "H3's polygon fill failed"
        )
    mid_lat, mid_lon = (south + north) / 2, (west + east) / 2
    quarters = [
        (south, west, mid_lat, mid_lon),
        (south, mid_lon, mid_lat, east),
        (mid_lat, west, north, mid_lon),
        (mid_lat, mid_lon, north, east),
    ]
    return [cell for quarter in quarters for cell in _fill_box(*quarter, res)]


def _estimated_cells(south: float, north: float, lon_width: float, res: int) -> float:
    area_km2 = (
        EARTH_RADIUS_KM**2
        * math.radians(lon_width)
        * (math.sin(math.radians(north)) - math.sin(math.radians(south)))
    )
    return area_km2 / float(h3.average_hexagon_area(res, unit="km^2"))


def _split_longitudes(west: float, east: float) -> list[tuple[float, float]]:
    """[west, east] as intervals that never cross lon 180, each at most 90 degrees wide."""
    spans = [(west, east)] if west <= east else [(west, 180.0), (-180.0, east)]
    pieces: list[tuple[float, float]] = []
    for lo, hi in spans:
        count = max(1, math.ceil((hi - lo) / _MAX_PIECE_DEGREES))
        edges = [lo + (hi - lo) * i / count for i in range(count)] + [hi]
        pieces.extend(itertools.pairwise(edges))
    return pieces
