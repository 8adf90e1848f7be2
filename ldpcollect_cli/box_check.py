"""A bounding box as a person can check it, and the signs that it is not the box meant.

`query create --bbox` prints the box it understood (corners, centre, size in km, cells) and
refuses a box that looks swapped, before the query exists: devices of a swapped box answer
"not here" for the whole campaign. Two signs, either enough:
- the box is all water while, read the other way (lon,lat), it would be mostly land
  (`ldpcollect_cli.land`; skipped without the land data);
- the last CSV fleet read on this machine (`remember_fleet_points`) has no point in the box but
  would have many in the swapped box, or all of its points are far (1,000 km) from the box.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from client.atomic import write_atomic
from client.fleet_identity import state_dir

EARTH_RADIUS_KM = 6371.0088
KM_PER_DEGREE = math.pi * EARTH_RADIUS_KM / 180
GRID = 9  # points a side sampled in a box for the land check
FAR_KM = 1000.0  # a box this far from every point of the last fleet is probably not for it
FLEET_FILE = "last-fleet.json"
FLEET_SAMPLE = 500


@dataclass(frozen=True)
class Box:
    south: float
    west: float
    north: float
    east: float

    @property
    def centre(self) -> tuple[float, float]:
        return (self.south + self.north) / 2, (self.west + self.east) / 2

    def size_km(self) -> tuple[float, float]:
        """(east-west at the centre's latitude, north-south) in km."""
        lat = math.radians(self.centre[0])
        width = (self.east - self.west) * KM_PER_DEGREE * math.cos(lat)
        return width, (self.north - self.south) * KM_PER_DEGREE

    def swapped(self) -> Box | None:
        """The box read the other way round (west,south,east,north), when that is a box."""
        if max(abs(self.west), abs(self.east)) > 90:
            return None
        return Box(self.west, self.south, self.east, self.north)

    def grid(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        lats, lons = np.meshgrid(
            np.linspace(self.south, self.north, GRID), np.linspace(self.west, self.east, GRID)
        )
        return lats.reshape(-1), lons.reshape(-1)

    def contains(
        self, lats: npt.NDArray[np.float64], lons: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.bool_]:
        return (
            (lats >= self.south) & (lats <= self.north) & (lons >= self.west) & (lons <= self.east)
        )


def describe(box: Box, cells: int, scheme: str) -> str:
    """One line a person can check against a map."""
    lat, lon = box.centre
    width, height = box.size_km()
    return (
        f"box: south-west corner {box.south:g},{box.west:g}, north-east corner "
        f"{box.north:g},{box.east:g} (lat,lon); centre {lat:.5g},{lon:.5g}; "
        f"{width:,.1f} km east-west x {height:,.1f} km north-south; {cells:,} {scheme} cells"
    )


@dataclass(frozen=True)
class BoxProblem:
    reason: str
    # The box read lon,lat, when that reading is what would fix it (else None: the box is
    # simply far from the last fleet, and swapping is no hint).
    swapped: Box | None


def box_problem(box: Box) -> BoxProblem | None:
    """Why the box looks given longitude first, or away from the last fleet; None if fine."""
    other = box.swapped()
    reason = None if other is None else _water_not_land(box, other)
    if reason is not None:
        return BoxProblem(reason, other)
    return _away_from_fleet(box, other)


def _water_not_land(box: Box, other: Box) -> str | None:
    from ldpcollect_cli.land import is_land

    here = is_land(*box.grid())
    there = is_land(*other.grid())
    if here is None or there is None:
        return None
    if here.mean() == 0 and there.mean() >= 0.3:
        return (
            f"the box is all water, but read as lon,lat it would be {there.mean():.0%} land "
            f"(centre {other.centre[0]:.5g},{other.centre[1]:.5g})"
        )
    return None


def _away_from_fleet(box: Box, other: Box | None) -> BoxProblem | None:
    points = last_fleet_points()
    if points is None:
        return None
    source, lats, lons = points
    inside = box.contains(lats, lons).mean()
    if inside > 0:
        return None
    swapped_inside = 0.0 if other is None else float(other.contains(lats, lons).mean())
    if swapped_inside >= 0.3:
        return BoxProblem(
            f"none of the points of {source} (the last CSV fleet) fall in the box, but "
            f"{swapped_inside:.0%} would if it were read as lon,lat",
            other,
        )
    nearest = float(distances_km(box.centre, lats, lons).min())
    if nearest > FAR_KM:
        return BoxProblem(
            f"the box's centre is {nearest:,.0f} km from the nearest point of {source} "
            "(the last CSV fleet)",
            None,
        )
    return None


def distances_km(
    centre: tuple[float, float], lats: npt.NDArray[np.float64], lons: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Great-circle distances from `centre` (haversine)."""
    lat0, lon0 = np.radians(centre[0]), np.radians(centre[1])
    la, lo = np.radians(lats), np.radians(lons)
    a = np.sin((la - lat0) / 2) ** 2 + np.cos(lat0) * np.cos(la) * np.sin((lo - lon0) / 2) ** 2
    return np.asarray(2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0, 1))))


def remember_fleet_points(
    source: str, lats: npt.NDArray[np.float64], lons: npt.NDArray[np.float64]
) -> None:
    """Keep a sample of a CSV fleet's points, for checking the next box against them."""
    picked = np.random.default_rng(0).permutation(lats.size)[:FLEET_SAMPLE]
    body = {
        "source": source,
        "lats": [round(float(x), 5) for x in lats[picked]],
        "lons": [round(float(x), 5) for x in lons[picked]],
    }
    with contextlib.suppress(OSError):  # a check the next box goes without
        write_atomic(state_dir() / FLEET_FILE, json.dumps(body).encode())


def last_fleet_points() -> tuple[str, npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
    try:
        body = json.loads((state_dir() / FLEET_FILE).read_text())
        lats = np.asarray(body["lats"], dtype=float)
        lons = np.asarray(body["lons"], dtype=float)
        source = str(body["source"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if lats.size == 0 or lats.shape != lons.shape:
        return None
    return source, lats, lons
