"""`query create`'s ways to name targets: a list, a bounding box, or an H3 region."""

from __future__ import annotations

import h3
import pytest

from ldpcollect.errors import ParameterError
from ldpcollect_cli.service import _targets

EIFFEL_RES5 = h3.latlng_to_cell(48.8584, 2.2945, 5)
EIFFEL_RES9 = h3.latlng_to_cell(48.8584, 2.2945, 9)


def test_h3_parent_gives_its_children_at_the_query_resolution() -> None:
    cells = _targets("h3:7", None, None, h3_parent=EIFFEL_RES5)
    assert len(cells) == 49  # aperture 7, two levels down
    assert cells == sorted(cells)
    assert {h3.cell_to_parent(h3.int_to_str(c), 5) for c in cells} == {EIFFEL_RES5}
    assert {h3.get_resolution(h3.int_to_str(c)) for c in cells} == {7}


def test_h3_disk_gives_the_cells_within_k_steps() -> None:
    cells = _targets("h3:9", None, None, h3_disk=f"{EIFFEL_RES9},2")
    assert len(cells) == 19  # 1 + 6 + 12
    assert h3.str_to_int(EIFFEL_RES9) in cells
    expected = sorted(h3.str_to_int(c) for c in h3.grid_disk(EIFFEL_RES9, 2))
    assert cells == expected


@pytest.mark.parametrize(
    ("scheme", "kwargs", "names"),
    [
        ("grid", {"h3_parent": EIFFEL_RES5}, "--scheme"),
        ("h3:7", {"h3_parent": "not-a-cell"}, "--h3-parent"),
        ("h3:9", {"h3_disk": EIFFEL_RES9}, "--h3-disk"),
        ("h3:9", {"h3_disk": f"{EIFFEL_RES9},-1"}, "--h3-disk"),
        ("h3:9", {"h3_disk": f"{EIFFEL_RES9},1", "h3_parent": EIFFEL_RES5}, "exactly one"),
        ("h3:9", {}, "exactly one"),
    ],
)
def test_bad_region_options_name_the_option(
    scheme: str, kwargs: dict[str, str], names: str
) -> None:
    with pytest.raises(ParameterError, match=names):
        _targets(scheme, None, None, **kwargs)


def test_h3_targets_are_accepted_in_hex_or_decimal() -> None:
    decimal = str(h3.str_to_int(EIFFEL_RES9))
    neighbour = sorted(h3.grid_ring(EIFFEL_RES9, 1))[0]
    cells = _targets("h3:9", f"{EIFFEL_RES9}, {decimal},{neighbour.upper()}", None)
    assert cells == [h3.str_to_int(EIFFEL_RES9)] * 2 + [h3.str_to_int(neighbour)]


@pytest.mark.parametrize(
    ("scheme", "targets", "words"),
    [
        ("h3:8", EIFFEL_RES9, "--targets must be a valid H3 cell id at resolution 8"),
        ("h3:9", "zz", "--targets must be an H3 cell in hex"),
        ("grid", EIFFEL_RES9, "--targets must be a grid cell id: a whole number"),
    ],
)
def test_bad_targets_name_the_option_and_the_form(scheme: str, targets: str, words: str) -> None:
    with pytest.raises(ParameterError, match=words):
        _targets(scheme, targets, None)
