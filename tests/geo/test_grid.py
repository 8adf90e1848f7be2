"""The paper's grid: 0.15 mile cells, 9,500 mile square, ids row * 63334 + col in 32 bits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.errors import ParameterError
from ldpcollect.geo.coords import MAX_TARGETS
from ldpcollect.geo.grid import (
    CELL_COUNT,
    CELLS_PER_SIDE,
    DEFAULT_GRID,
    MAX_ORIGIN_LAT,
    ROW_DEGREES,
    Grid,
    check_cell,
)
from tests.geo.conftest import haversine_miles, lon_diff

EIFFEL = (48.8584, 2.2945)
EQUATOR_GRID = Grid(0.0, 0.0)  # every row on the globe: good for testing all four edges
PACIFIC_GRID = Grid(10.0, 175.0)  # straddles the antimeridian


def assert_within_half_cell(grid: Grid, lat: float, lon: float) -> None:
    c_lat, c_lon = grid.center(grid.locate(lat, lon))
    assert abs(c_lat - lat) <= ROW_DEGREES / 2 * (1 + 1e-9)
    if abs(lat) < 90.0:  # at a pole every longitude is the same point
        assert abs(lon_diff(c_lon, lon)) <= grid.col_degrees / 2 * (1 + 1e-9)


def test_id_space_is_the_papers_and_fits_32_bits() -> None:
    assert CELLS_PER_SIDE == 63334 == math.ceil(9500 / 0.15)
    assert CELL_COUNT == 63334**2
    assert CELL_COUNT - 1 < 2**32 <= CELL_COUNT * 2  # fits, and uses most of the 32 bits
    assert EQUATOR_GRID.locate(*EQUATOR_GRID.center(CELL_COUNT - 1)) == CELL_COUNT - 1


def test_cells_measure_point_15_miles_at_the_origin() -> None:
    cell = DEFAULT_GRID.locate(*EIFFEL)
    here = DEFAULT_GRID.center(cell)
    north = DEFAULT_GRID.center(cell + CELLS_PER_SIDE)
    east = DEFAULT_GRID.center(cell + 1)
    assert haversine_miles(*here, *north) == pytest.approx(0.15, rel=1e-9)
    assert haversine_miles(*here, *east) == pytest.approx(0.15, rel=1e-4)


def test_square_is_9500_miles_along_its_central_meridian() -> None:
    south = EQUATOR_GRID.center(CELLS_PER_SIDE // 2)[0]
    north = EQUATOR_GRID.center((CELLS_PER_SIDE - 1) * CELLS_PER_SIDE + CELLS_PER_SIDE // 2)[0]
    assert haversine_miles(south, 0.0, north, 0.0) == pytest.approx(9500, abs=0.2)


def test_eiffel_tower_round_trip() -> None:
    cell = DEFAULT_GRID.locate(*EIFFEL)
    assert 0 <= cell < 2**32
    assert DEFAULT_GRID.locate(*DEFAULT_GRID.center(cell)) == cell
    assert_within_half_cell(DEFAULT_GRID, *EIFFEL)
    row, col = divmod(cell, CELLS_PER_SIDE)
    assert (row, col) == (CELLS_PER_SIDE // 2, CELLS_PER_SIDE // 2)  # the origin is the middle


def test_ids_increase_east_then_north() -> None:
    lat, lon = EIFFEL
    cell = DEFAULT_GRID.locate(lat, lon)
    assert DEFAULT_GRID.locate(lat, lon + 1.5 * DEFAULT_GRID.col_degrees) == cell + 1
    assert DEFAULT_GRID.locate(lat + 1.5 * ROW_DEGREES, lon) == cell + CELLS_PER_SIDE


@pytest.mark.parametrize("grid", [DEFAULT_GRID, EQUATOR_GRID, PACIFIC_GRID])
def test_locate_many_matches_locate(grid: Grid) -> None:
    rng = np.random.default_rng(20240501)
    lats = grid.origin_lat + rng.uniform(-60, 40, 2000)
    lons = (grid.origin_lon + rng.uniform(-60, 60, 2000) + 180) % 360 - 180
    ids = grid.locate_many(lats, lons)
    assert ids.dtype == np.uint32
    assert ids.tolist() == [grid.locate(a, b) for a, b in zip(lats, lons, strict=True)]


def test_locate_many_of_nothing_is_empty() -> None:
    assert DEFAULT_GRID.locate_many([], []).shape == (0,)


def test_equator_grid_edges_last_row_and_column_are_valid() -> None:
    south = -CELLS_PER_SIDE / 2 * ROW_DEGREES
    west = -CELLS_PER_SIDE / 2 * EQUATOR_GRID.col_degrees
    inset_lat, inset_lon = ROW_DEGREES * 1e-3, EQUATOR_GRID.col_degrees * 1e-3
    assert EQUATOR_GRID.locate(south + inset_lat, west + inset_lon) == 0
    assert EQUATOR_GRID.locate(-south - inset_lat, -west - inset_lon) == CELL_COUNT - 1
    assert EQUATOR_GRID.locate(south + inset_lat, -west - inset_lon) == CELLS_PER_SIDE - 1
    for beyond in [
        (south - inset_lat, 0.0),
        (-south + inset_lat, 0.0),
        (0.0, west - inset_lon),
        (0.0, -west + inset_lon),
    ]:
        with pytest.raises(ParameterError, match="outside the grid") as info:
            EQUATOR_GRID.locate(*beyond)
        assert "lat [-68.7" in str(info.value) and "lon [-" in str(info.value)


def test_default_grid_covers_the_north_pole_but_not_the_south() -> None:
    pole = DEFAULT_GRID.locate(90.0, DEFAULT_GRID.origin_lon)
    for lon in (-180.0, -90.0, 0.0, 45.0, 180.0):
        assert DEFAULT_GRID.locate(90.0, lon) == pole
        assert_within_half_cell(DEFAULT_GRID, 90.0, lon)
    assert DEFAULT_GRID.locate_many([90.0, 90.0], [-180.0, 100.0]).tolist() == [pole, pole]
    assert DEFAULT_GRID.locate(*DEFAULT_GRID.center(pole)) == pole
    assert haversine_miles(*DEFAULT_GRID.center(pole), 90.0, 0.0) < 0.15
    with pytest.raises(ParameterError, match=r"lat \[-19\.8898, 90\.0000\]"):
        DEFAULT_GRID.locate(-20.0, 0.0)
    with pytest.raises(ParameterError, match="outside the grid"):
        DEFAULT_GRID.locate(-90.0, 0.0)


def test_rows_beyond_the_pole_have_no_centre() -> None:
    with pytest.raises(ParameterError, match="beyond a pole"):
        DEFAULT_GRID.center(CELL_COUNT - 1)


def test_default_grid_east_and_west_edges() -> None:
    west = DEFAULT_GRID.origin_lon - CELLS_PER_SIDE / 2 * DEFAULT_GRID.col_degrees
    east = DEFAULT_GRID.origin_lon + CELLS_PER_SIDE / 2 * DEFAULT_GRID.col_degrees
    eps = DEFAULT_GRID.col_degrees * 1e-3
    assert DEFAULT_GRID.locate(0.0, west + eps) % CELLS_PER_SIDE == 0
    assert DEFAULT_GRID.locate(0.0, east - eps) % CELLS_PER_SIDE == CELLS_PER_SIDE - 1
    for lon in (west - eps, east + eps, 180.0, -180.0):
        with pytest.raises(ParameterError, match=r"lon \[-102\.1984, 106\.7874\)"):
            DEFAULT_GRID.locate(0.0, lon)


def test_antimeridian_inside_a_pacific_grid() -> None:
    width = PACIFIC_GRID.col_degrees
    left = PACIFIC_GRID.locate(10.0, 180.0 - 2.5 * width)
    right = PACIFIC_GRID.locate(10.0, -180.0 + 2.5 * width)
    assert right == left + 5  # five columns east, across lon 180, same row
    assert PACIFIC_GRID.locate(10.0, 180.0) == PACIFIC_GRID.locate(10.0, -180.0)
    for lon in (180.0 - 1e-4, -180.0 + 1e-4, 180.0):
        assert_within_half_cell(PACIFIC_GRID, 10.0, lon)
    assert "lon [" in PACIFIC_GRID.extent() and "or [-180" in PACIFIC_GRID.extent()


@pytest.mark.parametrize(
    ("lat", "lon", "parameter"),
    [
        (90.0001, 0.0, "lat"),
        (-91.0, 0.0, "lat"),
        (0.0, 180.0001, "lon"),
        (0.0, -181.0, "lon"),
        (math.nan, 0.0, "lat"),
        (0.0, math.nan, "lon"),
        (math.inf, 0.0, "lat"),
    ],
)
def test_invalid_coordinates_are_rejected(lat: float, lon: float, parameter: str) -> None:
    with pytest.raises(ParameterError) as info:
        DEFAULT_GRID.locate(lat, lon)
    assert info.value.parameter == parameter
    with pytest.raises(ParameterError) as many:
        DEFAULT_GRID.locate_many([48.0, lat], [2.0, lon])
    assert many.value.parameter == parameter + "s"
    assert "first at index 1" in str(many.value)


def test_locate_many_names_the_first_point_outside() -> None:
    with pytest.raises(ParameterError, match="2 of 3 points outside the grid, first at index 1"):
        DEFAULT_GRID.locate_many([48.0, -50.0, -60.0], [2.0, 2.0, 2.0])


def test_mismatched_arrays_are_rejected() -> None:
    with pytest.raises(ParameterError, match="same length"):
        DEFAULT_GRID.locate_many([1.0, 2.0], [1.0])


@pytest.mark.parametrize("cell", [-1, CELL_COUNT, 2**32, True, 1.0, "5"])
def test_invalid_cell_ids_are_rejected(cell: object) -> None:
    with pytest.raises(ParameterError, match="cell must be an integer grid id"):
        check_cell(cell)  # type: ignore[arg-type]


def test_origin_latitude_is_limited() -> None:
    assert 67.5 < MAX_ORIGIN_LAT < 67.6
    Grid(67.5, 0.0)
    with pytest.raises(ParameterError, match="origin_lat"):
        Grid(67.6, 0.0)


def test_bbox_targets_are_row_major_complete_and_unique() -> None:
    south, west, north, east = 48.85, 2.28, 48.87, 2.31
    targets = DEFAULT_GRID.targets_in_bbox(south, west, north, east)
    assert list(targets) == sorted(set(targets))
    rows = {t // CELLS_PER_SIDE for t in targets}
    cols = {t % CELLS_PER_SIDE for t in targets}
    assert len(targets) == len(rows) * len(cols)
    assert max(rows) - min(rows) + 1 == len(rows) and max(cols) - min(cols) + 1 == len(cols)
    rng = np.random.default_rng(7)
    lats = rng.uniform(south, north, 500)
    lons = rng.uniform(west, east, 500)
    assert set(DEFAULT_GRID.locate_many(lats, lons).tolist()) <= set(targets)
    corners = [(south, west), (south, east), (north, west), (north, east)]
    assert {DEFAULT_GRID.locate(*c) for c in corners} == {
        targets[0],
        targets[len(cols) - 1],
        targets[-len(cols)],
        targets[-1],
    }


def test_bbox_crossing_the_antimeridian() -> None:
    targets = PACIFIC_GRID.targets_in_bbox(9.99, 179.99, 10.01, -179.99)
    assert list(targets) == sorted(set(targets))
    assert PACIFIC_GRID.locate(10.0, 180.0) in targets
    assert PACIFIC_GRID.locate(10.0, 179.995) in targets
    assert PACIFIC_GRID.locate(10.0, -179.995) in targets
    with pytest.raises(ParameterError, match="beyond the grid"):
        DEFAULT_GRID.targets_in_bbox(9.99, 179.99, 10.01, -179.99)


def test_bbox_target_cap() -> None:
    side = math.sqrt(MAX_TARGETS) * ROW_DEGREES  # about 256 rows and 256 columns
    with pytest.raises(ParameterError, match=r"65,536") as info:
        DEFAULT_GRID.targets_in_bbox(48.0, 2.0, 48.0 + side * 1.01, 2.0 + side * 1.01 * 1.52)
    assert "it covers" in str(info.value)
    small = DEFAULT_GRID.targets_in_bbox(48.0, 2.0, 48.0 + side * 0.9, 2.0 + side * 0.9 * 1.5)
    assert 0 < len(small) <= MAX_TARGETS


def test_bbox_validation() -> None:
    with pytest.raises(ParameterError, match="south <= north"):
        DEFAULT_GRID.targets_in_bbox(49.0, 2.0, 48.0, 3.0)
    with pytest.raises(ParameterError, match="beyond the grid"):
        DEFAULT_GRID.targets_in_bbox(-25.0, 2.0, -19.0, 2.1)
    with pytest.raises(ParameterError) as info:
        DEFAULT_GRID.targets_in_bbox(48.0, 2.0, 48.1, math.nan)
    assert info.value.parameter == "lon"


def test_single_point_bbox_is_one_cell() -> None:
    assert DEFAULT_GRID.targets_in_bbox(*EIFFEL, *EIFFEL) == (DEFAULT_GRID.locate(*EIFFEL),)


@settings(max_examples=300, deadline=None)
@given(
    lat=st.floats(min_value=-19.88, max_value=90.0),
    lon=st.floats(min_value=-102.19, max_value=106.78),
)
def test_round_trip_property(lat: float, lon: float) -> None:
    cell = DEFAULT_GRID.locate(lat, lon)
    assert 0 <= cell < CELL_COUNT
    assert DEFAULT_GRID.locate(*DEFAULT_GRID.center(cell)) == cell
    assert_within_half_cell(DEFAULT_GRID, lat, lon)
    assert DEFAULT_GRID.locate_many([lat], [lon]).tolist() == [cell]


@settings(max_examples=200, deadline=None)
@given(
    lat=st.floats(min_value=-90.0, max_value=90.0, allow_nan=False),
    lon=st.floats(min_value=-180.0, max_value=180.0, allow_nan=False),
)
def test_any_valid_point_either_locates_or_says_where_the_grid_ends(lat: float, lon: float) -> None:
    try:
        cell = DEFAULT_GRID.locate(lat, lon)
    except ParameterError as error:
        assert "outside the grid" in str(error) and "lon [-102.1984" in str(error)
    else:
        assert DEFAULT_GRID.locate(*DEFAULT_GRID.center(cell)) == cell


@pytest.mark.parametrize("origin_lat", [48.8584, 48.8584 + ROW_DEGREES / 2, 30.0, -30.0, -61.0])
def test_rows_crossing_a_pole_round_trip(origin_lat: float) -> None:
    grid = Grid(origin_lat, 10.0)
    pole = 90.0 if origin_lat > 0 else -90.0
    just_off_pole = pole - math.copysign(1e-9, pole)
    for lon in (-20.0, 10.0, 40.0):
        cell = grid.locate(just_off_pole, lon)
        c_lat, c_lon = grid.center(cell)
        assert -90.0 <= c_lat <= 90.0 and abs(c_lat - just_off_pole) <= ROW_DEGREES
        assert grid.locate(c_lat, c_lon) == cell
    pole_cell = grid.locate(pole, 123.0)
    assert grid.locate(*grid.center(pole_cell)) == pole_cell


@settings(max_examples=300, deadline=None)
@given(
    origin_lat=st.floats(min_value=-67.5, max_value=67.5),
    origin_lon=st.floats(min_value=-180.0, max_value=180.0),
    north_fraction=st.floats(min_value=-0.4999, max_value=0.4999),
    east_fraction=st.floats(min_value=-0.4999, max_value=0.4999),
)
def test_round_trip_property_for_any_origin(
    origin_lat: float, origin_lon: float, north_fraction: float, east_fraction: float
) -> None:
    grid = Grid(origin_lat, origin_lon)
    lat = origin_lat + north_fraction * CELLS_PER_SIDE * ROW_DEGREES
    lon = (origin_lon + east_fraction * CELLS_PER_SIDE * grid.col_degrees + 180) % 360 - 180
    if abs(lat) > 90.0:
        with pytest.raises(ParameterError):
            grid.locate(lat, lon)
        return
    cell = grid.locate(lat, lon)
    assert grid.locate(*grid.center(cell)) == cell
    assert_within_half_cell(grid, lat, lon)
    assert grid.locate_many([lat], [lon]).tolist() == [cell]


def test_bbox_reaching_the_north_pole() -> None:
    targets = DEFAULT_GRID.targets_in_bbox(89.9, 2.0, 90.0, 3.0)
    assert DEFAULT_GRID.locate(90.0, -150.0) in targets  # the pole lies in the central column
    assert DEFAULT_GRID.locate(89.95, 2.5) in targets
    assert list(targets) == sorted(set(targets))
