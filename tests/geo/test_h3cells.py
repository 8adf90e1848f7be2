"""H3 cells: 64-bit ids at a resolution, centres, boxes, parents and disks as target lists."""

from __future__ import annotations

import math

import h3
import numpy as np
import pytest
from h3.api import basic_int as h3i
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.errors import ParameterError
from ldpcollect.geo import h3cells
from ldpcollect.geo.coords import MAX_TARGETS
from tests.geo.conftest import haversine_miles

EIFFEL = (48.8584, 2.2945)


def cell_radius_miles(cell: int) -> float:
    """Largest centre-to-vertex distance: any point of the cell is at most this far."""
    c_lat, c_lon = h3i.cell_to_latlng(cell)
    return max(haversine_miles(c_lat, c_lon, a, b) for a, b in h3i.cell_to_boundary(cell))


def assert_round_trip(lat: float, lon: float, resolution: int) -> None:
    cell = h3cells.locate(lat, lon, resolution)
    assert h3i.is_valid_cell(cell) and h3i.get_resolution(cell) == resolution
    assert 0 <= cell < 2**64
    center = h3cells.center(cell)
    assert h3cells.locate(*center, resolution) == cell
    assert haversine_miles(lat, lon, *center) <= cell_radius_miles(cell) * (1 + 1e-6) + 1e-9


def test_eiffel_tower_matches_h3_string_api() -> None:
    cell = h3cells.locate(*EIFFEL, 8)
    assert cell == h3.str_to_int(h3.latlng_to_cell(*EIFFEL, 8))
    assert cell > 2**32  # needs the 64-bit id space
    assert_round_trip(*EIFFEL, 8)


@pytest.mark.parametrize("resolution", [0, 5, 8, 15])
def test_locate_many_matches_locate(resolution: int) -> None:
    rng = np.random.default_rng(11)
    lats = rng.uniform(-90, 90, 1000)
    lons = rng.uniform(-180, 180, 1000)
    cells = h3cells.locate_many(lats, lons, resolution)
    assert cells.dtype == np.uint64
    expected = [h3cells.locate(a, b, resolution) for a, b in zip(lats, lons, strict=True)]
    assert [int(c) for c in cells] == expected  # no precision lost through uint64


@pytest.mark.parametrize("lat", [90.0, -90.0])
def test_poles(lat: float) -> None:
    cells = {h3cells.locate(lat, lon, 7) for lon in (-180.0, -45.0, 0.0, 123.0, 180.0)}
    assert len(cells) == 1
    assert_round_trip(lat, 0.0, 7)


def test_antimeridian_point() -> None:
    assert h3cells.locate(10.0, 180.0, 6) == h3cells.locate(10.0, -180.0, 6)
    for lon in (180.0, -180.0, 179.9999, -179.9999):
        assert_round_trip(10.0, lon, 6)


@pytest.mark.parametrize("resolution", [-1, 16, True, 1.0, "8"])
def test_invalid_resolution(resolution: object) -> None:
    with pytest.raises(ParameterError, match=r"resolution must be an integer in \[0, 15\]"):
        h3cells.locate(0.0, 0.0, resolution)  # type: ignore[arg-type]


@pytest.mark.parametrize(("lat", "lon"), [(91.0, 0.0), (0.0, -180.5), (math.nan, 0.0)])
def test_invalid_coordinates(lat: float, lon: float) -> None:
    with pytest.raises(ParameterError):
        h3cells.locate(lat, lon, 8)
    with pytest.raises(ParameterError, match="first at index 0"):
        h3cells.locate_many([lat], [lon], 8)


@pytest.mark.parametrize("cell", [0, -1, 2**64, 2**64 - 1, 12345, True, 1.5])
def test_invalid_cells(cell: object) -> None:
    with pytest.raises(ParameterError, match="valid H3 cell id"):
        h3cells.center(cell)  # type: ignore[arg-type]


def test_cell_at_wrong_resolution() -> None:
    cell = h3cells.locate(*EIFFEL, 7)
    assert h3cells.check_cell(cell, 7) == cell
    with pytest.raises(ParameterError, match="it is at resolution 7"):
        h3cells.check_cell(cell, 8)


def test_bbox_cells_have_centres_inside_and_are_sorted() -> None:
    south, west, north, east = 48.82, 2.25, 48.90, 2.42
    targets = h3cells.targets_in_bbox(south, west, north, east, 8)
    assert list(targets) == sorted(set(targets)) and len(targets) > 50
    for cell in targets:
        lat, lon = h3i.cell_to_latlng(cell)
        assert south <= lat <= north and west <= lon <= east
    # every point well inside the box (more than a cell away from its edges) is covered
    margin = 0.02
    rng = np.random.default_rng(3)
    lats = rng.uniform(south + margin, north - margin, 300)
    lons = rng.uniform(west + margin, east - margin, 300)
    assert {int(c) for c in h3cells.locate_many(lats, lons, 8)} <= set(targets)


def test_bbox_over_the_whole_globe_is_every_cell() -> None:
    assert len(h3cells.targets_in_bbox(-90, -180, 90, 180, 0)) == 122
    assert set(h3cells.targets_in_bbox(-90, -180, 90, 180, 1)) == set(
        c for base in h3i.get_res0_cells() for c in h3i.cell_to_children(base, 1)
    )


@pytest.mark.parametrize(
    "box", [(48.0, 2.0, 48.0, 3.0), (48.0, 2.0, 49.0, 2.0), (0.0, 180.0, 1.0, -180.0)]
)
def test_bbox_without_area_holds_no_centre(box: tuple[float, float, float, float]) -> None:
    with pytest.raises(ParameterError, match="at least one H3 cell centre"):
        h3cells.targets_in_bbox(*box, 5)


def test_bbox_around_a_pole_contains_the_pole_cell() -> None:
    targets = h3cells.targets_in_bbox(85.0, -180.0, 90.0, 180.0, 3)
    assert h3cells.locate(90.0, 0.0, 3) in targets


def test_bbox_crossing_the_antimeridian_is_the_union_of_both_sides() -> None:
    crossing = h3cells.targets_in_bbox(-5.0, 175.0, 5.0, -175.0, 4)
    west_half = h3cells.targets_in_bbox(-5.0, 175.0, 5.0, 180.0, 4)
    east_half = h3cells.targets_in_bbox(-5.0, -180.0, 5.0, -175.0, 4)
    assert set(crossing) == set(west_half) | set(east_half)
    assert list(crossing) == sorted(set(crossing))
    assert west_half and east_half
    # H3 must not read the crossing box as the 350 degree wide box the other way round
    assert h3cells.locate(0.0, 0.0, 4) not in crossing
    assert len(crossing) < 2 * (len(west_half) + len(east_half))


def test_wide_bbox_is_not_read_the_short_way_round() -> None:
    wide = h3cells.targets_in_bbox(-1.0, -170.0, 1.0, 170.0, 2)
    assert h3cells.locate(0.0, 0.0, 2) in wide
    assert h3cells.locate(0.0, 180.0, 2) not in wide


def test_bbox_cap_reports_count_and_limit() -> None:
    with pytest.raises(ParameterError, match=r"about [\d,]+ cells") as estimated:
        h3cells.targets_in_bbox(-90, -180, 90, 180, 10)
    assert "65,536" in str(estimated.value)
    with pytest.raises(ParameterError, match=r"it covers [\d,]+ cells") as exact:
        h3cells.targets_in_bbox(40.0, 0.0, 42.0, 3.0, 8)  # about 78,000 cells, exactly counted
    assert "65,536" in str(exact.value) and "about" not in str(exact.value)


def test_parent_region() -> None:
    parent = h3cells.locate(*EIFFEL, 6)
    children = h3cells.targets_in_parent(parent, 8)
    assert len(children) == 49
    assert list(children) == sorted(set(children))
    assert {h3i.cell_to_parent(c, 6) for c in children} == {parent}
    assert h3cells.locate(*EIFFEL, 8) in children
    assert h3cells.targets_in_parent(parent, 6) == (parent,)


def test_parent_region_errors() -> None:
    parent = h3cells.locate(*EIFFEL, 6)
    with pytest.raises(ParameterError, match="resolution <= 5"):
        h3cells.targets_in_parent(parent, 5)
    with pytest.raises(ParameterError, match="it covers 117,649 cells"):
        h3cells.targets_in_parent(parent, 12)  # 7**6 children
    with pytest.raises(ParameterError, match="parent"):
        h3cells.targets_in_parent(0, 8)


def test_disk_region() -> None:
    center = h3cells.locate(*EIFFEL, 9)
    disk = h3cells.targets_in_disk(center, 3)
    assert len(disk) == 3 * 3 * 4 + 1
    assert list(disk) == sorted(set(disk))
    assert all(h3i.grid_distance(center, c) <= 3 for c in disk)
    assert h3cells.targets_in_disk(center, 0) == (center,)


def test_disk_errors() -> None:
    center = h3cells.locate(*EIFFEL, 9)
    for k in (-1, True, 2.0):
        with pytest.raises(ParameterError, match="k must be an integer >= 0"):
            h3cells.targets_in_disk(center, k)  # type: ignore[arg-type]
    assert len(h3cells.targets_in_disk(center, 147)) <= MAX_TARGETS
    with pytest.raises(ParameterError, match="65,536"):
        h3cells.targets_in_disk(center, 148)


@settings(max_examples=300, deadline=None)
@given(
    lat=st.floats(min_value=-90.0, max_value=90.0),
    lon=st.floats(min_value=-180.0, max_value=180.0),
    resolution=st.integers(min_value=0, max_value=15),
)
def test_round_trip_property(lat: float, lon: float, resolution: int) -> None:
    assert_round_trip(lat, lon, resolution)
    assert int(h3cells.locate_many([lat], [lon], resolution)[0]) == h3cells.locate(
        lat, lon, resolution
    )


RES2_CENTRES = {
    cell: h3i.cell_to_latlng(cell)
    for base in h3i.get_res0_cells()
    for cell in h3i.cell_to_children(base, 2)
}


def centre_in_box(lat: float, lon: float, box: tuple[float, float, float, float]) -> bool:
    south, west, north, east = box
    in_lon = west <= lon <= east if west <= east else lon >= west or lon <= east
    return south <= lat <= north and in_lon


@settings(max_examples=150, deadline=None)
@given(
    lats=st.tuples(st.floats(-90.0, 90.0), st.floats(-90.0, 90.0)),
    west=st.floats(-180.0, 180.0),
    east=st.floats(-180.0, 180.0),
)
def test_bbox_is_exactly_the_cells_with_centres_inside(
    lats: tuple[float, float], west: float, east: float
) -> None:
    """Oracle: every resolution-2 cell (5,882 of them) tested against the box directly."""
    box = (min(lats), west, max(lats), east)
    expected = sorted(c for c, (a, b) in RES2_CENTRES.items() if centre_in_box(a, b, box))
    if not expected:
        with pytest.raises(ParameterError, match="at least one H3 cell centre"):
            h3cells.targets_in_bbox(*box, 2)
        return
    assert list(h3cells.targets_in_bbox(*box, 2)) == expected


# H3's classic polygon fill fails (E_FAILED) on this box: uber/h3 issues #945, #1000, #1051.
HIGH_LATITUDE_BOX = (58.2179407976528, -46.686505155362696, 85.01568678796724, 41.42629836133224)


def test_box_that_h3s_classic_fill_fails_on() -> None:
    expected = sorted(
        c for c, (a, b) in RES2_CENTRES.items() if centre_in_box(a, b, HIGH_LATITUDE_BOX)
    )
    assert list(h3cells.targets_in_bbox(*HIGH_LATITUDE_BOX, 2)) == expected


def test_box_fill_falls_back_to_quarters_without_the_new_h3_algorithm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on h3 4.1, which lacks polygon_to_cells_experimental."""
    south, west, north, east = HIGH_LATITUDE_BOX
    try:
        h3i.h3shape_to_cells(
            h3.LatLngPoly([(south, west), (south, east), (north, east), (north, west)]), 2
        )
    except h3.H3FailedError:
        pass
    else:
        pytest.skip("this h3 no longer fails on the box, so the fallback is not exercised")
    monkeypatch.delattr(h3i, "polygon_to_cells_experimental")
    expected = sorted(
        c for c, (a, b) in RES2_CENTRES.items() if centre_in_box(a, b, HIGH_LATITUDE_BOX)
    )
    assert list(h3cells.targets_in_bbox(*HIGH_LATITUDE_BOX, 2)) == expected
