"""Location ids: the Sampling Privacy paper's 0.15 mile grid (32-bit) and H3 cells (64-bit).

`LocationScheme` is the interface devices and the aggregator use; `scheme_from_text` parses
"grid" / "h3:8". `sample_locations` draws a city-sized simulated population and
`counts_per_target` the true counts a query over it should estimate.

Target lists are ascending and duplicate-free. A bounding box means, for the grid, every cell
the box touches (a rectangle of rows x columns); for H3, every cell whose centre lies in the
box (H3's rule: boxes that tile the map give disjoint lists). H3 regions: `H3Scheme`'s
`targets_in_parent` (a coarser cell's children) and `targets_in_disk` (k rings round a cell).
Bad input raises `ldpcollect.errors.ParameterError` naming the parameter and allowed range.
"""

from ldpcollect.geo.coords import MAX_TARGETS
from ldpcollect.geo.grid import DEFAULT_GRID, Grid
from ldpcollect.geo.population import DEFAULT_CENTER, counts_per_target, sample_locations
from ldpcollect.geo.schemes import GridScheme, H3Scheme, LocationScheme, scheme_from_text

__all__ = [
    "DEFAULT_CENTER",
    "DEFAULT_GRID",
    "MAX_TARGETS",
    "Grid",
    "GridScheme",
    "H3Scheme",
    "LocationScheme",
    "counts_per_target",
    "sample_locations",
    "scheme_from_text",
]
