"""Where land and water are, coarsely: for checking a box and for a map's light outline.

The data is the `global-land-mask` package's 1 km mask of the GLOBE data set (MIT). Importing
that package unpacks its 0.9 GB array, so this module never imports it: it reads the package's
compressed file once, as a stream, keeping every 12th row and column (0.1 degree, about 11 km),
and caches that (0.8 MB, packed bits) in the CLI's cache folder (`cache_dir`). The first use
takes a few seconds; later ones read the cache. Without the package (or its file) there is no
mask, and callers go on without it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from client.atomic import write_atomic
from client.fleet_identity import cache_dir

STEP = 12  # of the 1/120-degree source grid: 0.1 degree cells
ROWS, COLUMNS = 21_600 // STEP, 43_200 // STEP
DEGREES = STEP / 120
CACHE_NAME = "land-mask-0.1deg.npy"


@cache
def land_mask() -> npt.NDArray[np.bool_] | None:
    """True where there is land, on a (1800, 3600) grid of 0.1-degree cells whose row 0 starts
    at latitude 90 and column 0 at longitude -180; None when the data is not installed."""
    cached = cache_dir() / CACHE_NAME
    try:
        packed = np.load(cached, allow_pickle=False)
        return np.unpackbits(packed, count=ROWS * COLUMNS).astype(bool).reshape(ROWS, COLUMNS)
    except (OSError, ValueError):
        pass
    source = _source_file()
    if source is None:
        return None
    try:
        land = _downsampled(source)
    except (OSError, ValueError, zipfile.BadZipFile):
        return None
    with contextlib.suppress(OSError):  # no cache: the next use reads the package again
        write_atomic(cached, _npy_bytes(np.packbits(land.reshape(-1))))
    return land


def is_land(lats: npt.ArrayLike, lons: npt.ArrayLike) -> npt.NDArray[np.bool_] | None:
    """Whether each point is on land (None without the mask)."""
    mask = land_mask()
    if mask is None:
        return None
    rows, cols = grid_index(np.asarray(lats, dtype=float), np.asarray(lons, dtype=float))
    return np.asarray(mask[rows, cols], dtype=bool)


def land_window(
    west: float, east: float, south: float, north: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]] | None:
    """(cell-centre longitudes, latitudes, land) of the mask's cells over a box, a cell beyond
    it on each side; None without the mask."""
    mask = land_mask()
    if mask is None:
        return None
    r0 = max(int((90 - north) / DEGREES) - 1, 0)
    r1 = min(int((90 - south) / DEGREES) + 2, ROWS)
    c0 = max(int((west + 180) / DEGREES) - 1, 0)
    c1 = min(int((east + 180) / DEGREES) + 2, COLUMNS)
    lats = 90 - (np.arange(r0, r1, dtype=np.float64) + 0.5) * DEGREES
    lons = -180 + (np.arange(c0, c1, dtype=np.float64) + 0.5) * DEGREES
    return lons, lats, mask[r0:r1, c0:c1]


def grid_index(
    lats: npt.NDArray[np.float64], lons: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    rows = np.clip(((90.0 - lats) / DEGREES).astype(np.intp), 0, ROWS - 1)
    cols = np.clip(((lons + 180.0) / DEGREES).astype(np.intp), 0, COLUMNS - 1)
    return rows, cols


def _source_file() -> Path | None:
    spec = importlib.util.find_spec("global_land_mask")  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "globe_combined_mask_compressed.npz"
    return path if path.exists() else None


def _downsampled(source: Path) -> npt.NDArray[np.bool_]:
    """Every STEP-th row and column of the package's ocean mask, as land, read as a stream."""
    with zipfile.ZipFile(source) as archive, archive.open("mask.npy") as stream:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        if tuple(shape) != (ROWS * STEP, COLUMNS * STEP) or fortran or dtype != np.bool_:
            raise ValueError(f"unexpected land mask layout {shape} {dtype}")
        width = COLUMNS * STEP
        land = np.empty((ROWS, COLUMNS), dtype=bool)
        for row in range(ROWS):
            block = stream.read(width * STEP)  # STEP source rows; the first one is kept
            if len(block) != width * STEP:
                raise ValueError("the land mask file is cut short")
            ocean = np.frombuffer(block, dtype=np.uint8, count=width)[::STEP]
            land[row] = ocean == 0
    return land


def _npy_bytes(array: npt.NDArray[np.uint8]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()
