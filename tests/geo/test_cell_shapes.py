"""Cell shapes (polygons for maps and GeoJSON) and the text form people read ids in."""

from __future__ import annotations

import h3
import pytest

from ldpcollect import geo
from ldpcollect.errors import ParameterError
from ldpcollect.geo import h3cells
from ldpcollect.geo.grid import CELLS_PER_SIDE

PARIS = geo.DEFAULT_CENTER


def _inside(point: tuple[float, float], polygon: list[tuple[float, float]]) -> bool:
    """Ray casting in (lat, lon): is the point inside the polygon?"""
    lat, lon = point
    inside = False
    for (a_lat, a_lon), (b_lat, b_lon) in zip(polygon, polygon[1:] + polygon[:1], strict=True):
        if (a_lat > lat) != (b_lat > lat):
            crossing = a_lon + (lat - a_lat) * (b_lon - a_lon) / (b_lat - a_lat)
            inside ^= lon < crossing
    return inside


def test_a_grid_cell_is_the_square_its_points_fall_in() -> None:
    scheme = geo.GridScheme()
    cell = scheme.locate(*PARIS)
    corners = scheme.boundary(cell)
    assert len(corners) == 4
    south, west = corners[0]
    north, east = corners[2]
    assert _inside(scheme.center(cell), corners)
    # points just inside each corner are in this cell; just outside, in the neighbours
    eps = 1e-9
    assert scheme.locate(south + eps, west + eps) == cell
    assert scheme.locate(north - eps, east - eps) == cell
    assert scheme.locate(south - eps, west + eps) == cell - CELLS_PER_SIDE
    assert scheme.locate(south + eps, east + eps) == cell + 1


def test_an_h3_cell_is_h3s_own_hexagon() -> None:
    scheme = geo.H3Scheme(9)
    cell = scheme.locate(*PARIS)
    shape = scheme.boundary(cell)
    expected = h3.api.basic_int.cell_to_boundary(cell)
    assert shape == [(float(lat), float(lon)) for lat, lon in expected]
    assert len(shape) == 6 and _inside(PARIS, shape)


def test_an_h3_cell_across_the_antimeridian_stays_one_polygon() -> None:
    cell = h3cells.locate(0.0, 179.999, 2)
    lons = [lon for _, lon in h3cells.boundary(cell)]
    assert max(lons) - min(lons) < 10  # no vertex jumps to the other side of the globe


def test_ids_are_read_as_integers_for_the_grid_and_hex_strings_for_h3() -> None:
    grid, hexes = geo.GridScheme(), geo.H3Scheme(9)
    grid_cell, h3_cell = grid.locate(*PARIS), hexes.locate(*PARIS)
    assert grid.cell_json(grid_cell) == grid_cell
    text = hexes.cell_json(h3_cell)
    assert text == h3.int_to_str(h3_cell) == "891fb46741bffff"
    assert hexes.parse_cell(str(text)) == h3_cell  # canonical hex
    assert hexes.parse_cell(str(h3_cell)) == h3_cell  # decimal, as older outputs printed
    assert hexes.parse_cell(" 891FB46741BFFFF ") == h3_cell
    assert grid.parse_cell(str(grid_cell)) == grid_cell


@pytest.mark.parametrize(
    ("scheme", "text", "message"),
    [
        (geo.H3Scheme(9), "zz", "an H3 cell in hex"),
        (geo.H3Scheme(8), "891fb46741bffff", "it is at resolution 9"),
        (geo.H3Scheme(9), "123", "a valid H3 cell id"),
        (geo.GridScheme(), "891fb46741bffff", "a grid cell id: a whole number"),
        (geo.GridScheme(), "9999999999", "an integer grid id in"),
    ],
)
def test_a_bad_cell_text_names_what_was_expected(
    scheme: geo.LocationScheme, text: str, message: str
) -> None:
    with pytest.raises(ParameterError, match=message):
        scheme.parse_cell(text, "--targets")
