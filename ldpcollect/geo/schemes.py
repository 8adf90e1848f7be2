"""Location schemes: how a device turns its position into the location id a query asks about.

Mirrors the wire contract's `LocationScheme { GridScheme grid; H3Scheme h3 {resolution} }`.
Text form: "grid" (the paper's grid, see `ldpcollect.geo.grid`) or "h3:<resolution>".
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError
from ldpcollect.geo import grid, h3cells

UInt64Array = npt.NDArray[np.uint64]


class LocationScheme(abc.ABC):
    """Maps (lat, lon) in degrees to integer location ids in [0, 2**64), and back."""

    @abc.abstractmethod
    def locate(self, lat: float, lon: float) -> int:
        """The id of the cell containing the point; ParameterError for a point it cannot map."""

    @abc.abstractmethod
    def locate_many(self, lats: npt.ArrayLike, lons: npt.ArrayLike) -> UInt64Array:
        """Vectorized `locate` over two 1-D arrays of equal length."""

    @abc.abstractmethod
    def center(self, cell: int) -> tuple[float, float]:
        """(lat, lon) of the cell's centre; ParameterError if `cell` is not one of this scheme."""

    @abc.abstractmethod
    def validate_cell(self, cell: int) -> int:
        """Return `cell` as an int if it is a cell id of this scheme, else raise ParameterError."""

    @abc.abstractmethod
    def boundary(self, cell: int) -> list[tuple[float, float]]:
        """The cell's polygon: (lat, lon) vertices counter-clockwise, not closed."""

    @abc.abstractmethod
    def cell_json(self, cell: int) -> int | str:
        """How a person or another tool reads the id: an integer, or H3's hex string (64-bit
        integers above 2**53 lose digits in JavaScript and jq)."""

    @abc.abstractmethod
    def parse_cell(self, text: str, parameter: str = "cell") -> int:
        """A cell id from its text form (H3: hex or decimal); ParameterError if not one."""

    @abc.abstractmethod
    def targets_in_bbox(
        self, south: float, west: float, north: float, east: float
    ) -> tuple[int, ...]:
        """The box's cells as an ascending target list (at most 65,536); west > east crosses 180."""

    @abc.abstractmethod
    def describe(self) -> str:
        """The text form, accepted by `scheme_from_text`: "grid" or "h3:<resolution>"."""


@dataclass(frozen=True)
class GridScheme(LocationScheme):
    """The paper's 0.15 mile grid with the default origin (`grid.DEFAULT_GRID`); 32-bit ids."""

    def locate(self, lat: float, lon: float) -> int:
        return grid.DEFAULT_GRID.locate(lat, lon)

    def locate_many(self, lats: npt.ArrayLike, lons: npt.ArrayLike) -> UInt64Array:
        return grid.DEFAULT_GRID.locate_many(lats, lons).astype(np.uint64)

    def center(self, cell: int) -> tuple[float, float]:
        return grid.DEFAULT_GRID.center(cell)

    def validate_cell(self, cell: int) -> int:
        grid.DEFAULT_GRID.center(cell)  # rejects ids out of range and rows beyond the pole
        return grid.check_cell(cell)

    def boundary(self, cell: int) -> list[tuple[float, float]]:
        south, west, north, east = grid.DEFAULT_GRID.bounds(cell)
        return [(south, west), (south, east), (north, east), (north, west)]

    def cell_json(self, cell: int) -> int | str:
        return self.validate_cell(cell)

    def parse_cell(self, text: str, parameter: str = "cell") -> int:
        cleaned = text.strip()
        if not cleaned.isdigit():
            raise ParameterError(parameter, text, "a grid cell id: a whole number")
        try:
            return self.validate_cell(int(cleaned))
        except ParameterError as err:
            raise ParameterError(parameter, text, err.allowed, err.detail) from None

    def targets_in_bbox(
        self, south: float, west: float, north: float, east: float
    ) -> tuple[int, ...]:
        return grid.DEFAULT_GRID.targets_in_bbox(south, west, north, east)

    def describe(self) -> str:
        return "grid"


@dataclass(frozen=True)
class H3Scheme(LocationScheme):
    """H3 v4 cells at one resolution (0..15); 64-bit ids."""

    resolution: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "resolution", h3cells.check_resolution(self.resolution))

    def locate(self, lat: float, lon: float) -> int:
        return h3cells.locate(lat, lon, self.resolution)

    def locate_many(self, lats: npt.ArrayLike, lons: npt.ArrayLike) -> UInt64Array:
        return h3cells.locate_many(lats, lons, self.resolution)

    def center(self, cell: int) -> tuple[float, float]:
        return h3cells.center(self.validate_cell(cell))

    def validate_cell(self, cell: int) -> int:
        return h3cells.check_cell(cell, self.resolution)

    def boundary(self, cell: int) -> list[tuple[float, float]]:
        return h3cells.boundary(self.validate_cell(cell))

    def cell_json(self, cell: int) -> int | str:
        return h3cells.to_text(self.validate_cell(cell))

    def parse_cell(self, text: str, parameter: str = "cell") -> int:
        return h3cells.check_cell(
            h3cells.from_text(text, parameter), self.resolution, parameter=parameter
        )

    def targets_in_bbox(
        self, south: float, west: float, north: float, east: float
    ) -> tuple[int, ...]:
        return h3cells.targets_in_bbox(south, west, north, east, self.resolution)

    def targets_in_parent(self, parent: int) -> tuple[int, ...]:
        """The children of a coarser (or equal-resolution) `parent` cell, ascending."""
        return h3cells.targets_in_parent(parent, self.resolution)

    def targets_in_disk(self, center_cell: int, k: int) -> tuple[int, ...]:
        """Cells within grid distance k of `center_cell` (a cell at this resolution), ascending."""
        return h3cells.targets_in_disk(self.validate_cell(center_cell), k)

    def describe(self) -> str:
        return f"h3:{self.resolution}"


def scheme_from_text(text: str) -> LocationScheme:
    """Parse "grid" or "h3:<resolution>" (resolution 0..15) into a scheme."""
    allowed = '"grid" or "h3:<resolution 0..15>"'
    if not isinstance(text, str):
        raise ParameterError("location_scheme", text, allowed)
    normalized = text.strip().lower()
    if normalized == "grid":
        return GridScheme()
    prefix, sep, digits = normalized.partition(":")
    if prefix != "h3" or not sep or not digits.isdecimal() or len(digits) > 2:
        raise ParameterError("location_scheme", text, allowed)
    resolution = int(digits)
    if resolution > h3cells.MAX_RESOLUTION:
        raise ParameterError("location_scheme", text, allowed, "H3 resolutions run 0..15")
    return H3Scheme(resolution)
