"""A city-sized simulated population: random device locations for fleet simulation and the demo.

The default population lives in a 10 x 10 km box centred on the Eiffel Tower (lat 48.8584,
lon 2.2945): 80% of devices in four Gaussian hotspots at fixed offsets from the centre, 20%
uniform background. Offsets are in kilometres on a local flat-earth approximation (1 degree of
latitude = 111.195 km), which is accurate to well under a metre over 10 km.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError
from ldpcollect.geo.coords import check_point

DEFAULT_CENTER: Final = (48.8584, 2.2945)
"""The Eiffel Tower, the Sampling Privacy paper's running example."""
DEFAULT_BOX_KM: Final = 10.0
MAX_CENTER_LAT: Final = 85.0
KM_PER_DEGREE: Final = 6371.0088 * math.pi / 180.0


@dataclass(frozen=True)
class Hotspot:
    """A Gaussian cluster: centre offset (km east, km north), spread sigma_km, mixture weight."""

    east_km: float
    north_km: float
    sigma_km: float
    weight: float


DEFAULT_HOTSPOTS: Final = (
    Hotspot(0.0, 0.0, 0.6, 0.30),
    Hotspot(2.5, 1.0, 0.9, 0.20),
    Hotspot(-2.0, 2.5, 0.7, 0.15),
    Hotspot(1.0, -3.0, 1.2, 0.15),
)
"""Weights sum to 0.8; the remaining 0.2 of devices are uniform over the box."""

FloatArray = npt.NDArray[np.float64]


def sample_locations(
    n: int,
    center: tuple[float, float] = DEFAULT_CENTER,
    rng: np.random.Generator | None = None,
    *,
    box_km: float = DEFAULT_BOX_KM,
    hotspots: Sequence[Hotspot] = DEFAULT_HOTSPOTS,
) -> tuple[FloatArray, FloatArray]:
    """Draw n device locations (lats, lons in degrees), all inside the box_km square at center.

    Gaussian draws falling outside the box are redrawn (truncated Gaussians).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ParameterError("n", n, "an integer >= 0")
    lat0, lon0 = check_point(*center)
    if abs(lat0) > MAX_CENTER_LAT:
        raise ParameterError(
            "center", center, f"latitude within [-{MAX_CENTER_LAT:g}, {MAX_CENTER_LAT:g}]"
        )
    if not (isinstance(box_km, (int, float)) and 0 < box_km <= 100):
        raise ParameterError("box_km", box_km, "(0, 100] km")
    half = box_km / 2
    _check_hotspots(hotspots, half)
    generator = rng if rng is not None else np.random.default_rng()

    weights = [h.weight for h in hotspots]
    weights.append(max(0.0, 1.0 - sum(weights)))
    component = generator.choice(len(weights), size=int(n), p=np.asarray(weights) / sum(weights))
    east = np.empty(int(n))
    north = np.empty(int(n))
    background = component == len(hotspots)
    east[background] = generator.uniform(-half, half, int(background.sum()))
    north[background] = generator.uniform(-half, half, int(background.sum()))
    for index, spot in enumerate(hotspots):
        members = np.flatnonzero(component == index)
        while members.size:
            east[members] = generator.normal(spot.east_km, spot.sigma_km, members.size)
            north[members] = generator.normal(spot.north_km, spot.sigma_km, members.size)
            outside = (np.abs(east[members]) > half) | (np.abs(north[members]) > half)
            members = members[outside]

    lats = lat0 + north / KM_PER_DEGREE
    lons = lon0 + east / (KM_PER_DEGREE * math.cos(math.radians(lat0)))
    lons = np.mod(lons + 180.0, 360.0) - 180.0
    return lats, lons


def counts_per_target(location_ids: npt.ArrayLike, targets: Sequence[int]) -> npt.NDArray[np.int64]:
    """How many of the location ids equal each target (the true counts a query estimates)."""
    target_array = np.asarray(list(targets), dtype=np.uint64)
    if np.unique(target_array).size != target_array.size:
        raise ParameterError("targets", "(list)", "distinct cell ids", "targets repeat")
    ids = np.asarray(location_ids, dtype=np.uint64).ravel()
    order = np.argsort(target_array)
    sorted_targets = target_array[order]
    positions = np.searchsorted(sorted_targets, ids)
    positions_clipped = np.minimum(positions, max(sorted_targets.size - 1, 0))
    hit = (positions < sorted_targets.size) & (sorted_targets[positions_clipped] == ids)
    counts_sorted = np.bincount(positions[hit], minlength=sorted_targets.size)
    counts = np.empty(sorted_targets.size, dtype=np.int64)
    counts[order] = counts_sorted
    return counts


def _check_hotspots(hotspots: Sequence[Hotspot], half: float) -> None:
    total = 0.0
    for spot in hotspots:
        if not (spot.sigma_km > 0 and spot.weight >= 0):
            raise ParameterError("hotspots", spot, "sigma_km > 0 and weight >= 0")
        if abs(spot.east_km) > half or abs(spot.north_km) > half:
            raise ParameterError("hotspots", spot, f"centres within +-{half:g} km of the centre")
        total += spot.weight
    if total > 1 + 1e-9:
        raise ParameterError("hotspots", total, "total weight in [0, 1]")
