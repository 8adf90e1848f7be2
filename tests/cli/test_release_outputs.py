"""`ldpcollect release` maps and exports, through a real `ldpcollect serve` and the real CLI:
PNG and HTML maps, GeoJSON and CSV, from a live release and from a saved release JSON."""

from __future__ import annotations

import csv
import itertools
import json
import re
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import h3
import pytest

from tests.serving import run_cli, serving

TOKEN = "release-outputs-token"
BBOX = "48.85,2.28,48.87,2.31"  # 49 H3 resolution-9 cells around the Eiffel Tower


def cli(*args: str, server: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return run_cli(TOKEN, *args, server=server, ok=ok)


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An SP query over H3 cells, answered by 3,000 simulated devices, closed; the fleet's
    --json output (with the truth) saved in the returned folder."""
    folder = tmp_path_factory.mktemp("release")
    with serving(folder / "agg.db", TOKEN) as served:
        server = served.address
        cli(
            "query", "create", "--id", "paris", "--mechanism", "sp", "--sampling-rate", "0.5",
            "--bbox", BBOX, "--scheme", "h3:9", "--min-reports", "100", server=server,
        )  # fmt: skip
        fleet = cli(
            "fleet", "run", "--query", "paris", "--devices", "3000", "--advance", "--seed", "5",
            "--no-progress", "--json", server=server,
        )  # fmt: skip
        (folder / "fleet.json").write_text(fleet.stdout)
        cli("query", "close", "--query", "paris", server=server)
        cli(
            "query", "create", "--id", "untouched", "--mechanism", "rr", "--flip1", "0.85",
            "--flip2", "0.3", "--bbox", BBOX, "--scheme", "h3:9", server=server,
        )  # fmt: skip
        cli("fleet", "run", "--query", "untouched", "--devices", "50", "--no-progress",
            server=server)  # fmt: skip
        cli("query", "close", "--query", "untouched", server=server)
        yield server, folder


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_release_writes_maps_geojson_and_csv_with_hex_ids(
    released: tuple[str, Path],
) -> None:
    server, folder = released
    files = {name: folder / name for name in ("m.png", "m.html", "m.geojson", "m.csv")}
    out = cli(
        "release", "--query", "paris", "--map", str(files["m.png"]), "--map",
        str(files["m.html"]), "--geojson", str(files["m.geojson"]), "--csv", str(files["m.csv"]),
        "--truth", str(folder / "fleet.json"), "--postprocess", "clip", server=server,
    )  # fmt: skip
    for path in files.values():
        assert f"wrote {path}" in out.stdout.replace("\n", "")
    assert "against the truth: RMSE" in out.stdout and "clip: RMSE" in out.stdout
    # A trusted SP release says what its one operator learnt.
    assert "learns the exact cell of every device selected" in " ".join(out.stdout.split())

    width, height = _png_size(files["m.png"])
    assert width > 1000 and height > 400

    page = files["m.html"].read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # Nothing but basemap tiles is fetched, and those are attributed; the cells, their
    # colours and the legend are in the page itself.
    assert not re.search(r"<link|\ssrc=|@import", page)
    data = json.loads(re.search(r'id="release-data">(.*?)</script>', page, re.S)[1])  # type: ignore[index]
    assert data["tiles"] and all(
        re.fullmatch(
            r"https://[a-d]\.basemaps\.cartocdn\.com/light_all/\d+/\d+/\d+\.png", t["href"]
        )
        for t in data["tiles"]
    )
    assert "OpenStreetMap</a> contributors &copy; <a" in page and "CARTO</a>" in page
    estimate = data["layers"]["estimate"]
    assert len(estimate["fill"]) == 49 and "devices" in estimate["legend"]
    assert estimate["legend"].count("<text ") == 5  # a labelled ramp, not only its ends
    assert "from 0" in data["layers"]["95% interval width"]["legend"]

    collection = json.loads(files["m.geojson"].read_text())
    assert collection["type"] == "FeatureCollection" and len(collection["features"]) == 49
    truth = {
        g["location_id"]: g["true_count"]
        for g in json.loads((folder / "fleet.json").read_text())["ground_truth"]
    }
    for feature in collection["features"]:
        props = feature["properties"]
        cell = props["location_id"]
        assert isinstance(cell, str) and h3.is_valid_cell(cell)  # hex, not a 64-bit integer
        assert feature["geometry"]["type"] == "Polygon"
        (ring,) = feature["geometry"]["coordinates"]
        assert len(ring) == 7 and ring[0] == ring[-1]  # a closed hexagon
        area = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in itertools.pairwise(ring))
        assert area > 0  # counter-clockwise, as RFC 7946 asks
        lat, lon = h3.cell_to_latlng(cell)
        assert (props["center_lat"], props["center_lon"]) == pytest.approx((lat, lon))
        assert props["ci_low"] <= max(props["estimate"], 0) <= props["ci_high"]
        assert props["true_count"] == truth[cell]
        assert props["estimate_clip"] == max(props["estimate"], 0)

    includes_zero = [
        f
        for f in collection["features"]
        if f["properties"]["ci_low"] <= 0 <= f["properties"]["ci_high"]
    ]
    hatches = re.search(r'<g id="hatches">(.*?)</g>', page, re.S)
    assert hatches is not None and hatches[1].count("<polygon ") == len(includes_zero)
    assert page.count("<polygon ") == 49 + len(includes_zero)
    if includes_zero:
        assert f"{len(includes_zero)} of 49 cells hatched" in page
    # Every output alike: written atomically, readable by its owner only.
    assert {oct(path.stat().st_mode & 0o777) for path in files.values()} == {"0o600"}

    with files["m.csv"].open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 49
    assert list(rows[0])[:8] == [
        "location_id", "estimate", "std_error", "ci_low", "ci_high", "query_participants",
        "center_lat", "center_lon",
    ]  # fmt: skip
    assert [r["location_id"] for r in rows] == [
        f["properties"]["location_id"] for f in collection["features"]
    ]


def test_a_saved_release_maps_the_same_without_a_server(released: tuple[str, Path]) -> None:
    server, folder = released
    saved = folder / "release.json"
    saved.write_text(cli("release", "--query", "paris", "--json", server=server).stdout)
    data = json.loads(saved.read_text())
    assert data["scheme"] == "h3:9" and data["mechanism"] == "sp"
    assert all(isinstance(e["location_id"], str) for e in data["estimates"])

    cli("release", "--from-json", str(saved), "--geojson", str(folder / "again.geojson"))
    again = json.loads((folder / "again.geojson").read_text())
    live = folder / "live.geojson"
    cli("release", "--query", "paris", "--geojson", str(live), server=server)
    assert again == json.loads(live.read_text())
    cli("release", "--from-json", str(saved), "--map", str(folder / "again.png"))
    assert _png_size(folder / "again.png")[0] > 500


def test_bad_release_options_exit_2_and_write_nothing(released: tuple[str, Path]) -> None:
    server, folder = released
    target = folder / "never.geojson"
    for args, words in [
        (("--map", str(folder / "m.jpg")), "--map must be a file name ending in .png or .html"),
        (("--postprocess", "round"), "--postprocess must be clip or norm-sub"),
        (("--from-json", str(folder / "fleet.json")), "saved by `ldpcollect release --json`"),
        (("--truth", str(folder / "missing.json")), "--truth must be a readable JSON file"),
        (
            ("--truth", str(folder / "fleet.json")),
            "it is the truth of query 'paris'",  # another query's fleet: refused
        ),
    ]:
        query = () if "--from-json" in args else ("--query", "untouched")
        done = cli("release", *query, *args, "--geojson", str(target), server=server, ok=False)
        assert done.returncode == 2, done.stderr
        assert words in " ".join(done.stderr.split()), done.stderr
        assert not target.exists()
    # the refused calls released nothing: the query is still only closed
    shown = json.loads(cli("query", "show", "--query", "untouched", "--json", server=server).stdout)
    assert shown["state"] == "closed"
