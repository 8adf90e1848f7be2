"""Catch latitude and longitude given the wrong way round, before a fleet answers a query.

Swapped coordinates are usually still valid (2.294,48.858 is a point in Somalia), so nothing
fails: devices just answer "not here" everywhere. The tell is that most devices fall outside
the query's targets while, swapped, clearly more would fall inside (the same holds when the
query's bounding box was the one swapped).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from client.query_info import QueryInfo

SAMPLE = 20_000  # enough points to tell "most" from "few"


@dataclass(frozen=True)
class SwapCheck:
    checked: int
    inside: float  # share of devices in a target, as given
    inside_swapped: float  # share that would be in a target with lat and lon swapped

    @property
    def looks_swapped(self) -> bool:
        """Most devices are outside the targets, and swapped, clearly more would be inside
        (by chance a swapped point almost never lands in a target: it is another continent)."""
        return self.inside < 0.5 and self.inside_swapped > max(2 * self.inside, 0.05)


def check_swap(
    info: QueryInfo, lats: npt.NDArray[np.float64], lons: npt.NDArray[np.float64]
) -> SwapCheck:
    """How many devices land in the query's targets as given and with lat and lon swapped (a
    fixed sample of at most SAMPLE devices)."""
    n = lats.size
    if n > SAMPLE:
        picked = np.random.default_rng(0).choice(n, SAMPLE, replace=False)
        lats, lons = lats[picked], lons[picked]
    targets = np.asarray(info.targets, dtype=np.uint64)
    inside = np.isin(info.locate_many(lats, lons), targets)
    can_swap = np.abs(lons) <= 90.0  # a longitude beyond 90 cannot be a latitude
    swapped = np.zeros(lats.size, dtype=bool)
    swapped[can_swap] = np.isin(info.locate_many(lons[can_swap], lats[can_swap]), targets)
    count = max(int(lats.size), 1)
    return SwapCheck(int(lats.size), float(inside.sum() / count), float(swapped.sum() / count))
