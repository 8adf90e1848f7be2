"""A release in the formats GIS tools and spreadsheets read: GeoJSON and CSV.

GeoJSON (RFC 7946): one Feature per target cell, its polygon as a closed counter-clockwise ring
of [lon, lat] positions, and its estimate, standard error, 95% interval, the query's
participants and centre as properties (plus the truth and the post-processed estimate when
known). `query_participants` is the devices that answered the query, the same on every row:
each of them answered for every cell (a local-privacy answer says nothing of where a device
is), so a cell has no participants of its own. H3 cells are written as hex strings, grid
cells as integers, in both files. Both are written like the maps: atomically, mode 0600.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from client.atomic import write_atomic
from ldpcollect_cli.release_view import CellRow, ReleaseView

Ring = list[list[float]]


def ring(vertices: list[tuple[float, float]]) -> Ring:
    """(lat, lon) vertices as a closed GeoJSON ring of [lon, lat], counter-clockwise."""
    positions = [[lon, lat] for lat, lon in vertices]
    if _signed_area(positions) < 0:
        positions.reverse()
    return [*positions, positions[0]]


def _signed_area(positions: Ring) -> float:
    """Shoelace formula: positive for a counter-clockwise ring (x = lon, y = lat)."""
    pairs = zip(positions, positions[1:] + positions[:1], strict=True)
    return sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in pairs) / 2


def cell_properties(view: ReleaseView, row: CellRow) -> dict[str, object]:
    lat, lon = view.scheme.center(row.cell)
    properties: dict[str, object] = {
        "location_id": view.cell_json(row.cell),
        "estimate": row.estimate,
        "std_error": row.std_error,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "query_participants": row.participants,
        "center_lat": lat,
        "center_lon": lon,
    }
    if row.truth is not None:
        properties["true_count"] = row.truth
    if view.postprocess is not None:
        properties[f"estimate_{view.postprocess.replace('-', '_')}"] = row.adjusted
    return properties


def geojson(view: ReleaseView) -> dict[str, object]:
    return {
        "type": "FeatureCollection",
        "query_id": view.query_id,
        "scheme": view.scheme.describe(),
        "mechanism": view.mechanism,
        "privacy": view.privacy,
        "features": [
            {
                "type": "Feature",
                "id": view.cell_json(row.cell),
                "geometry": {
                    "type": "Polygon",
                    "coordinates": [ring(view.scheme.boundary(row.cell))],
                },
                "properties": cell_properties(view, row),
            }
            for row in view.rows
        ],
    }


def write_geojson(view: ReleaseView, path: Path) -> None:
    write_atomic(path, (json.dumps(geojson(view), indent=1, allow_nan=False) + "\n").encode())


def write_csv(view: ReleaseView, path: Path) -> None:
    """One row per target cell; columns as `cell_properties` names them."""
    rows = [cell_properties(view, row) for row in view.rows]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, text.getvalue().encode())
