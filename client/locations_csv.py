"""Device locations from a CSV file: lat,lon rows, errors named by the file's own line numbers.

A header row is optional; named columns (lat/latitude, lon/lng/longitude, and optionally a
device id: device_id/device/id) may come in any order. Each row keeps its identity content
(`contents`): its device id when the file has that column, else the row's cells with the two
coordinates as an unordered pair (so a file corrected for swapped lat/lon is the same devices);
`client.fleet_identity` turns these into device names.
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError

Float64s = npt.NDArray[np.float64]

LAT_NAMES = ("lat", "latitude")
LON_NAMES = ("lon", "lng", "long", "longitude")
ID_NAMES = ("device_id", "device", "id")


@dataclass(frozen=True)
class LocationsCsv:
    path: Path
    lats: Float64s
    lons: Float64s
    sha256: bytes
    contents: list[bytes]  # per row: what names the device (see the module docstring)
    has_ids: bool = False


def read_locations_csv(path: Path | str) -> LocationsCsv:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParameterError(
            "--csv", str(path), "a readable CSV file of lat,lon", str(exc)
        ) from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParameterError("--csv", str(path), "a UTF-8 text file", str(exc)) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    lat_col, lon_col, id_col = 0, 1, -1
    lats: list[float] = []
    lons: list[float] = []
    contents: list[bytes] = []
    ids_seen: dict[str, int] = {}
    first = True
    for row in reader:
        if not row or not any(cell.strip() for cell in row):
            continue
        line = reader.line_num
        if first:
            first = False
            if not _is_number(row[0]):
                lat_col, lon_col, id_col = _header_columns(row, path, line)
                continue
        lat, lon = _point(row, lat_col, lon_col, path, line)
        lats.append(lat)
        lons.append(lon)
        if id_col >= 0:
            device = row[id_col].strip() if id_col < len(row) else ""
            if not device or device in ids_seen:
                why = f"repeats line {ids_seen[device]}" if device else "is empty"
                raise ParameterError(
                    f"--csv {path} line {line}: device id", device, "unique per row", why
                )
            ids_seen[device] = line
            contents.append(b"id\0" + device.encode())
        else:
            contents.append(_row_content(row, lat_col, lon_col, lat, lon))
    if not lats:
        raise ParameterError(
            "--csv",
            str(path),
            "a file with at least one lat,lon row",
            "the file is empty" if first else "it has a header but no rows",
        )
    return LocationsCsv(
        path,
        np.asarray(lats),
        np.asarray(lons),
        hashlib.sha256(data).digest(),
        contents,
        has_ids=id_col >= 0,
    )


def _row_content(row: list[str], lat_col: int, lon_col: int, lat: float, lon: float) -> bytes:
    """A row without a device id, as it names its device: the coordinates as an unordered pair
    (rounded to 1e-7 degrees, about a centimetre) and every other cell as written."""
    pair = sorted((round(lat, 7), round(lon, 7)))
    rest = [cell.strip() for k, cell in enumerate(row) if k not in (lat_col, lon_col)]
    return "\x1f".join([f"{pair[0]:.7f}", f"{pair[1]:.7f}", *rest]).encode()


def _header_columns(row: list[str], path: Path, line: int) -> tuple[int, int, int]:
    names = [cell.strip().lower() for cell in row]
    lat_col = next((names.index(n) for n in LAT_NAMES if n in names), None)
    lon_col = next((names.index(n) for n in LON_NAMES if n in names), None)
    id_col = next((names.index(n) for n in ID_NAMES if n in names), -1)
    if lat_col is None or lon_col is None:
        if len(names) >= 2 and lat_col is None and lon_col is None:
            return 0, 1, -1  # an unnamed header: lat,lon as the first two columns
        raise ParameterError(
            "--csv",
            f"{path} line {line}: {row!r}",
            "a header naming both lat and lon columns (or no header: lat,lon rows)",
        )
    return lat_col, lon_col, id_col


def _point(
    row: list[str], lat_col: int, lon_col: int, path: Path, line: int
) -> tuple[float, float]:
    where = f"--csv {path} line {line}"
    try:
        lat, lon = float(row[lat_col]), float(row[lon_col])
    except (IndexError, ValueError):
        raise ParameterError(where, ",".join(row), "two numbers: lat,lon in degrees") from None
    if not -90.0 <= lat <= 90.0:
        hint = "lat,lon look swapped" if abs(lon) <= 90.0 < abs(lat) <= 180.0 else ""
        raise ParameterError(f"{where}: lat", lat, "[-90, 90] degrees", hint)
    if not -180.0 <= lon <= 180.0:
        raise ParameterError(f"{where}: lon", lon, "[-180, 180] degrees")
    return lat, lon


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
