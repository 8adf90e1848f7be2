"""The LocationScheme interface devices and the aggregator share, and its text form."""

from __future__ import annotations

import numpy as np
import pytest

from ldpcollect.errors import ParameterError
from ldpcollect.geo import (
    DEFAULT_GRID,
    GridScheme,
    H3Scheme,
    LocationScheme,
    h3cells,
    scheme_from_text,
)

EIFFEL = (48.8584, 2.2945)
SCHEMES: list[LocationScheme] = [GridScheme(), H3Scheme(0), H3Scheme(8), H3Scheme(15)]


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_text_form_round_trips(scheme: LocationScheme) -> None:
    assert scheme_from_text(scheme.describe()) == scheme


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("grid", GridScheme()),
        ("h3:8", H3Scheme(8)),
        (" H3:15 ", H3Scheme(15)),
        ("h3:0", H3Scheme(0)),
    ],
)
def test_scheme_from_text(text: str, expected: LocationScheme) -> None:
    assert scheme_from_text(text) == expected


@pytest.mark.parametrize(
    "text", ["", "h3", "h3:", "h3:16", "h3:-1", "h3:x", "h3:8.0", "s2:8", "grid:1"]
)
def test_scheme_from_text_rejects(text: str) -> None:
    with pytest.raises(ParameterError, match=r'location_scheme must be "grid" or "h3:'):
        scheme_from_text(text)


def test_h3_scheme_validates_resolution() -> None:
    with pytest.raises(ParameterError, match="resolution"):
        H3Scheme(16)


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_interface_round_trip_and_vectorized(scheme: LocationScheme) -> None:
    rng = np.random.default_rng(5)
    lats = rng.uniform(40.0, 55.0, 200)
    lons = rng.uniform(-5.0, 15.0, 200)
    cells = scheme.locate_many(lats, lons)
    assert cells.dtype == np.uint64
    assert [int(c) for c in cells] == [scheme.locate(a, b) for a, b in zip(lats, lons, strict=True)]
    for cell in {int(c) for c in cells}:
        assert scheme.validate_cell(cell) == cell
        assert scheme.locate(*scheme.center(cell)) == cell


@pytest.mark.parametrize("scheme", [GridScheme(), H3Scheme(8)], ids=lambda s: s.describe())
def test_interface_bbox_targets(scheme: LocationScheme) -> None:
    targets = scheme.targets_in_bbox(48.80, 2.20, 48.92, 2.40)
    assert targets and list(targets) == sorted(set(targets))
    assert all(scheme.validate_cell(t) == t for t in targets)


def test_h3_box_without_a_cell_centre_is_an_error() -> None:
    with pytest.raises(ParameterError, match="at least one H3 cell centre at resolution 0"):
        H3Scheme(0).targets_in_bbox(48.80, 2.20, 48.92, 2.40)


def test_grid_scheme_is_the_default_grid_and_32_bit() -> None:
    scheme = GridScheme()
    assert scheme.locate(*EIFFEL) == DEFAULT_GRID.locate(*EIFFEL) < 2**32
    assert int(scheme.locate_many([EIFFEL[0]], [EIFFEL[1]]).max()) < 2**32


def test_h3_scheme_rejects_cells_of_another_scheme() -> None:
    scheme = H3Scheme(8)
    grid_cell = GridScheme().locate(*EIFFEL)
    coarse = h3cells.locate(*EIFFEL, 7)
    for cell in (grid_cell, coarse):
        with pytest.raises(ParameterError, match="resolution 8"):
            scheme.center(cell)
    with pytest.raises(ParameterError, match="resolution 8"):
        scheme.targets_in_disk(coarse, 1)
    assert scheme.locate(*EIFFEL) in scheme.targets_in_parent(coarse)
    with pytest.raises(ParameterError, match="grid id"):
        GridScheme().validate_cell(scheme.locate(*EIFFEL))


def test_grid_scheme_rejects_cells_no_location_can_have() -> None:
    beyond_the_pole = 63334**2 - 1  # last row, north of the pole for the default origin
    with pytest.raises(ParameterError, match="beyond a pole"):
        GridScheme().validate_cell(beyond_the_pole)
    with pytest.raises(ParameterError, match="grid id"):
        GridScheme().validate_cell(63334**2)
