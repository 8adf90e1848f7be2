"""A secure query through the same commands as a trusted one, with the real CLI against a real
leader and helper (separate processes, SQLite): `query create --secure` with a bounding box on
H3 cells, `query list|show|advance|close`, `fleet run --csv` with real locations (twice: the
second run is deduplicated), `release` with maps, GeoJSON, CSV, --truth and --json, the saved
release mapped again with --from-json, and the ledger. The release JSON has the trusted
release's shape plus `secure` and `views`."""

from __future__ import annotations

import csv
import json
import subprocess
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ldpcollect import geo
from ldpcollect.intervals import release_intervals
from ldpcollect.mechanisms import SamplingPrivacy
from tests.secure.roles import ADMIN, Pair, secure_pair
from tests.serving import run_cli, serving

BBOX = "48.85,2.28,48.87,2.31"  # H3 resolution-8 cells around the Eiffel Tower
DEVICES = 1200


def cli(*args: str, server: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return run_cli(ADMIN, *args, server=server, ok=ok)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with secure_pair(tmp_path_factory.mktemp("pair")) as running:
        yield running


@pytest.fixture(scope="module")
def city_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Device locations around the Eiffel Tower, lat,lon rows with a header."""
    lats, lons = geo.sample_locations(DEVICES, geo.DEFAULT_CENTER, np.random.default_rng(8))
    path = tmp_path_factory.mktemp("csv") / "city.csv"
    rows = (f"{a:.6f},{b:.6f}\n" for a, b in zip(lats, lons, strict=True))
    path.write_text("lat,lon\n" + "".join(rows))
    return path


def sp_query(query_id: str, *extra: str) -> list[str]:
    return [
        "query", "create", "--id", query_id, "--mechanism", "sp", "--sampling-rate", "0.5",
        "--bbox", BBOX, "--scheme", "h3:8", "--min-reports", "100", "--noise-sigma", "2",
        *extra, "--json",
    ]  # fmt: skip


def test_a_csv_fleet_runs_through_the_query_commands_and_releases_maps_and_files(
    pair: Pair, city_csv: Path, tmp_path: Path
) -> None:
    leader = pair.leader.address
    key = str(tmp_path / "collector.key")
    created = json.loads(
        cli(*sp_query("sp", "--secure", "--collector-key", key), server=leader).stdout
    )
    assert created["secure"] is True and created["scheme"] == "h3:8"
    assert created["mechanism"] == "sp" and created["rounds"] == 2
    assert created["upload_round"] == 2 and created["noise_sigma"] == "2"
    assert all(isinstance(cell, str) for cell in created["targets"])  # H3 cells as hex

    listed = json.loads(cli("query", "list", "--json", server=leader).stdout)
    assert [q["query_id"] for q in listed] == ["sp"] and listed[0]["secure"] is True
    shown = cli("query", "show", "--query", "sp", server=leader).stdout
    assert "2 aggregators" in shown.replace("\n", "")
    advance = cli("query", "advance", "--query", "sp", server=leader, ok=False)
    assert advance.returncode == 2
    assert "no round to advance" in " ".join(advance.stderr.split())

    run = ("fleet", "run", "--query", "sp", "--csv", str(city_csv), "--no-progress", "--json",
           "--helper", pair.helper.address)  # fmt: skip
    first = json.loads(cli(*run, server=leader).stdout)
    (tmp_path / "fleet.json").write_text(json.dumps(first))
    [upload] = first["rounds"]
    assert upload["round"] == 2 and upload["accepted"] == first["answering"] == DEVICES
    assert first["completed"] == DEVICES and upload["failed"] == 0
    # The same devices again (same file and seed: the same report ids, sealed afresh): the
    # leader holds each already, and the fleet counts every one as a duplicate.
    repeated = cli(*run, server=leader)
    [again] = json.loads(repeated.stdout)["rounds"]
    assert (again["sent"], again["duplicates"], again["accepted"]) == (DEVICES, DEVICES, 0)
    assert "already acknowledged" in " ".join(repeated.stderr.split())

    closed = json.loads(cli("query", "close", "--query", "sp", "--json", server=leader).stdout)
    assert closed["state"] == "closed"
    files = {name: tmp_path / name for name in ("m.png", "m.html", "m.geojson", "m.csv")}
    out = cli(
        "release", "--query", "sp", "--collector-key", key, "--map", str(files["m.png"]),
        "--map", str(files["m.html"]), "--geojson", str(files["m.geojson"]), "--csv",
        str(files["m.csv"]), "--truth", str(tmp_path / "fleet.json"), server=leader,
    )  # fmt: skip
    text = out.stdout.replace("\n", "")
    for path in files.values():
        assert f"wrote {path}" in text
    assert "against the truth: RMSE" in out.stdout and "one aggregator alone" in text
    assert files["m.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    features = json.loads(files["m.geojson"].read_text())["features"]
    truth = {g["location_id"]: g["true_count"] for g in first["ground_truth"]}
    assert {f["properties"]["location_id"] for f in features} == set(truth)
    assert all(f["properties"]["true_count"] == truth[f["id"]] for f in features)
    with files["m.csv"].open() as handle:
        assert len(list(csv.DictReader(handle))) == len(truth)

    released = json.loads(
        cli("release", "--query", "sp", "--collector-key", key, "--json", server=leader).stdout
    )
    assert released["secure"] is True and released["participants"] == DEVICES
    assert set(released["views"]) == {"aggregator", "collector+aggregator", "public"}
    inside = sum(
        e["ci_low"] <= truth[e["location_id"]] <= e["ci_high"] for e in released["estimates"]
    )
    assert inside >= 0.7 * len(truth)  # 95% intervals; a loose floor for a few cells
    # They are the exact intervals through both aggregators' noise (sigma 2 each), as a
    # trusted release's are through its one noise, not the plug-in ones.
    counts = np.array([e["round_counts"] for e in released["estimates"]], dtype=np.int64).T
    low, high = release_intervals(SamplingPrivacy("0.5"), counts, DEVICES, [Fraction(2)] * 2)
    assert [e["ci_low"] for e in released["estimates"]] == low.tolist()
    assert [e["ci_high"] for e in released["estimates"]] == high.tolist()
    saved = tmp_path / "release.json"
    saved.write_text(json.dumps(released))
    again_map = cli("release", "--from-json", str(saved), "--map", str(tmp_path / "again.png"))
    assert "wrote" in again_map.stdout and (tmp_path / "again.png").stat().st_size > 1000

    ledger = json.loads(cli("ledger", "--json", server=leader).stdout)
    assert [e["query_id"] for e in ledger["entries"]] == ["sp"]

    with serving(tmp_path / "trusted.db", ADMIN) as trusted:
        cli(*sp_query("t"), server=trusted.address)
        cli("fleet", "run", "--query", "t", "--csv", str(city_csv), "--advance",
            "--no-progress", server=trusted.address)  # fmt: skip
        cli("query", "close", "--query", "t", server=trusted.address)
        plain = json.loads(cli("release", "--query", "t", "--json", server=trusted.address).stdout)
    assert set(released) - set(plain) == {"secure", "views"} and set(plain) <= set(released)
    assert set(released["estimates"][0]) == set(plain["estimates"][0])
    assert set(released["claims"][0]) == set(plain["claims"][0])


def test_secure_create_options_and_wrong_servers_are_refused_in_words(
    pair: Pair, tmp_path: Path
) -> None:
    leader = pair.leader.address
    key = str(tmp_path / "collector.key")
    plain = cli(*sp_query("x"), server=leader, ok=False)
    assert plain.returncode == 2 and "add --secure" in " ".join(plain.stderr.split())
    with serving(tmp_path / "trusted.db", ADMIN) as trusted:
        wrong = cli(*sp_query("y", "--secure", "--collector-key", key), server=trusted.address,
                    ok=False)  # fmt: skip
    assert wrong.returncode == 2 and "trusted aggregator" in " ".join(wrong.stderr.split())
    outside = cli(
        "query", "create", "--secure", "--collector-key", key, "--mechanism", "rr",
        "--flip1", "0.85", "--flip2", "0.3", "--targets", "1,2", "--scheme", "h3:8",
        server=leader, ok=False,
    )  # fmt: skip
    assert outside.returncode == 2 and "--targets" in outside.stderr
    rr = cli(
        "query", "create", "--secure", "--collector-key", key, "--id", "rr", "--mechanism",
        "rr", "--flip1", "0.85", "--flip2", "0.3", "--targets", "5,6,7", "--min-reports", "3",
        "--require-tokens", server=leader, ok=False,
    )  # fmt: skip
    assert rr.returncode == 1 and "FAILED_PRECONDITION" in rr.stderr  # no --token-directory
