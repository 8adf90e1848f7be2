"""`ldpcollect fleet run` as an operator uses it, through a real `ldpcollect serve`: a CSV fleet
sent twice, reordered or corrected is the same devices (deduplicated or refused, never
recounted), swapped lat/lon or locations outside the box are refused before anything is sent,
a Sampling Privacy query is answered over two runs (a simulated fleet keeps its devices by
default), and server messages name the commands to type."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ldpcollect import geo
from tests.serving import run_cli, serving

TOKEN = "fleet-cli-token"
BBOX = "48.85,2.28,48.87,2.31"


def cli(*args: str, server: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return run_cli(TOKEN, *args, server=server, ok=ok)


def words(text: str) -> str:
    """Rich wraps long lines at the terminal width: compare words, not line breaks."""
    return " ".join(text.split())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path / "agg.db", TOKEN) as served:
        yield served.address


@pytest.fixture
def city_csv(tmp_path: Path) -> Path:
    """500 device locations around the Eiffel Tower, as lat,lon rows with a header."""
    lats, lons = geo.sample_locations(500, geo.DEFAULT_CENTER, np.random.default_rng(8))
    path = tmp_path / "city.csv"
    rows = (f"{a:.6f},{b:.6f}\n" for a, b in zip(lats, lons, strict=True))
    path.write_text("lat,lon\n" + "".join(rows))
    return path


def create(server: str, query_id: str, *mechanism: str) -> None:
    cli(
        "query", "create", "--id", query_id, *mechanism, "--bbox", BBOX, "--scheme", "h3:8",
        server=server,
    )  # fmt: skip


def test_the_same_csv_twice_is_the_same_devices(server: str, city_csv: Path) -> None:
    create(server, "rr", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    run = ("fleet", "run", "--query", "rr", "--csv", str(city_csv), "--no-progress")
    first = json.loads(cli(*run, "--json", server=server).stdout)
    assert first["rounds"][0]["accepted"] == 500
    second = cli(*run, "--devices", "7", server=server)
    assert "--devices is ignored with --csv" in words(second.stderr)
    assert "every report was already acknowledged" in words(second.stderr)
    again = json.loads(cli(*run, "--json", server=server).stdout)
    assert again["rounds"][0]["duplicates"] == 500 and again["rounds"][0]["accepted"] == 0
    assert again["ground_truth"] == first["ground_truth"]
    other_seed = json.loads(cli(*run, "--seed", "2", "--json", server=server).stdout)
    assert other_seed["rounds"][0]["accepted"] == 500  # another seed: other devices
    shown = json.loads(cli("query", "show", "--query", "rr", "--json", server=server).stdout)
    assert shown["completed_devices"] == 1000


def completed(server: str, query_id: str) -> int:
    shown = json.loads(cli("query", "show", "--query", query_id, "--json", server=server).stdout)
    return int(shown["completed_devices"])


def test_swapped_lat_lon_is_refused_before_sending(
    server: str, city_csv: Path, tmp_path: Path
) -> None:
    create(server, "rr", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    swapped = tmp_path / "swapped.csv"
    rows = city_csv.read_text().splitlines()[1:]
    swapped.write_text("".join(",".join(reversed(r.split(","))) + "\n" for r in rows))
    run = ("fleet", "run", "--query", "rr", "--no-progress")
    refused = cli(*run, "--csv", str(swapped), server=server, ok=False)
    assert refused.returncode == 2
    said = words(refused.stderr)
    assert f"only 0% of the locations in {swapped} fall in rr's targets" in said
    assert "would with latitude and longitude swapped" in said
    assert "nothing was sent" in said and "--send-anyway" in said
    assert completed(server, "rr") == 0

    fixed = json.loads(cli(*run, "--csv", str(city_csv), "--json", server=server).stdout)
    assert fixed["rounds"][0]["accepted"] == 500
    # Sent anyway, the swapped file is the same 500 people (the coordinates are an unordered
    # pair in a device's name): duplicates, nobody counted twice.
    anyway = cli(*run, "--csv", str(swapped), "--send-anyway", "--json", server=server)
    assert "sending anyway" in words(anyway.stderr)
    assert json.loads(anyway.stdout)["rounds"][0]["accepted"] == 0
    assert completed(server, "rr") == 500


def test_locations_outside_the_box_are_refused(server: str, tmp_path: Path) -> None:
    create(server, "rr", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    lyon = tmp_path / "lyon.csv"
    lyon.write_text("lat,lon\n" + "45.76,4.83\n" * 50)
    refused = cli(
        "fleet", "run", "--query", "rr", "--csv", str(lyon), "--no-progress", server=server,
        ok=False,
    )  # fmt: skip
    assert "only 0% of the locations" in words(refused.stderr)
    assert "nothing was sent" in words(refused.stderr)
    assert completed(server, "rr") == 0


def test_a_corrected_or_reordered_csv_counts_nobody_twice(
    server: str, city_csv: Path, tmp_path: Path
) -> None:
    create(server, "rr", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    rows = city_csv.read_text().splitlines()[1:]
    run = ("fleet", "run", "--query", "rr", "--no-progress", "--json")
    cli(*run, "--csv", str(city_csv), server=server)
    reordered = tmp_path / "reordered.csv"
    reordered.write_text("lon,lat\n" + "".join(
        ",".join(reversed(r.split(","))) + "\n" for r in reversed(rows)
    ))  # fmt: skip
    again = json.loads(cli(*run, "--csv", str(reordered), server=server).stdout)
    assert again["rounds"][0]["duplicates"] == 500
    assert completed(server, "rr") == 500

    # With a device id column, a corrected location is the same device: the aggregator keeps
    # its first report and refuses the new one, so the count does not move.
    create(server, "ids", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    with_ids = tmp_path / "ids.csv"
    with_ids.write_text("device_id,lat,lon\n" + "".join(
        f"d{k},{r}\n" for k, r in enumerate(rows)
    ))  # fmt: skip
    first = json.loads(cli(*run[:3], "ids", *run[4:], "--csv", str(with_ids), server=server).stdout)
    assert first["rounds"][0]["accepted"] == 500
    corrected = tmp_path / "corrected.csv"
    moved = [f"d{k},48.8600,2.3000" if k < 10 else f"d{k},{r}" for k, r in enumerate(rows)]
    corrected.write_text("device_id,lat,lon\n" + "\n".join(moved) + "\n")
    redo = cli(*run[:3], "ids", *run[4:], "--csv", str(corrected), server=server)
    result = json.loads(redo.stdout)["rounds"][0]
    assert result["accepted"] == 0
    assert result["duplicates"] + result["failed"] == 500
    # Only moved devices can send other answers (the others draw the same ones again); a
    # moved device's new answers may match its old ones by chance, and count as duplicates.
    assert 1 <= result["failed"] <= 10 and result["duplicates"] >= 490, result["failures"]
    assert "their first reports stand and nobody was counted twice" in words(redo.stderr)
    assert completed(server, "ids") == 500


def test_an_sp_query_answered_in_two_runs(server: str, city_csv: Path) -> None:
    create(server, "sp", "--mechanism", "sp", "--sampling-rate", "0.5")
    run = ("fleet", "run", "--query", "sp", "--csv", str(city_csv), "--no-progress")
    first = cli(*run, server=server)
    assert "run `ldpcollect query advance --query sp`, then this command again" in words(
        first.stderr
    )
    early = cli("query", "close", "--query", "sp", server=server, ok=False)
    assert early.returncode == 1
    assert "advance it first: `ldpcollect query advance --query sp`" in words(early.stderr)
    assert "AdvanceRound" not in early.stderr

    cli("query", "advance", "--query", "sp", server=server)
    second = json.loads(cli(*run, "--json", server=server).stdout)
    assert second["rounds"][0]["round"] == 2 and second["rounds"][0]["accepted"] == 500
    assert second["completed"] == 500
    assert completed(server, "sp") == 500

    early_release = cli("release", "--query", "sp", server=server, ok=False)
    assert "close it first: `ldpcollect query close --query sp`" in words(early_release.stderr)
    missing = cli("release", "--query", "nope", server=server, ok=False)
    assert "`ldpcollect query list` shows the ids" in words(missing.stderr)


def test_a_simulated_sp_fleet_keeps_its_devices_between_runs(server: str) -> None:
    create(server, "sp", "--mechanism", "sp", "--sampling-rate", "0.5")
    run = ("fleet", "run", "--query", "sp", "-n", "300", "--no-progress")
    first = cli(*run, server=server)
    assert "the fleet's devices are kept in" in words(first.stderr)
    cli("query", "advance", "--query", "sp", server=server)
    second = json.loads(cli(*run, "--json", server=server).stdout)
    assert second["rounds"][0]["round"] == 2 and second["rounds"][0]["accepted"] == 300
    assert completed(server, "sp") == 300


def test_a_bad_run_is_deleted_and_redone_before_release(server: str, city_csv: Path) -> None:
    create(server, "rr", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    cli("fleet", "run", "--query", "rr", "--csv", str(city_csv), "--no-progress", server=server)
    unconfirmed = cli("query", "delete", "--query", "rr", server=server, ok=False)
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    assert completed(server, "rr") == 500
    gone = json.loads(
        cli("query", "delete", "--query", "rr", "--yes", "--json", server=server).stdout
    )
    assert gone["reports_deleted"] == 500 and gone["deleted"]["query_id"] == "rr"
    listed = json.loads(cli("query", "list", "--json", server=server).stdout)
    assert [q["query_id"] for q in listed] == []
    ledger = json.loads(cli("ledger", "--json", server=server).stdout)
    assert ledger["entries"] == [] and ledger["spent"] == 0  # nothing released, nothing charged

    create(server, "rr", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    redo = json.loads(
        cli("fleet", "run", "--query", "rr", "--csv", str(city_csv), "--no-progress", "--json",
            server=server).stdout
    )  # fmt: skip
    assert redo["rounds"][0]["accepted"] == 500  # a fresh query: the same devices, counted once
    cli("query", "close", "--query", "rr", server=server)
    cli("release", "--query", "rr", server=server)
    refused = cli("query", "delete", "--query", "rr", "--yes", server=server, ok=False)
    assert refused.returncode == 1
    assert "FAILED_PRECONDITION" in refused.stderr
    assert "a release cannot be undone" in words(refused.stderr)


def test_query_create_shows_its_box_and_refuses_one_given_longitude_first(
    server: str, city_csv: Path
) -> None:
    lon_first = ("--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3", "--scheme", "h3:8")
    made = cli("query", "create", "--id", "ok", *lon_first, "--bbox", BBOX, server=server)
    said = words(made.stderr)
    assert "box: south-west corner 48.85,2.28, north-east corner 48.87,2.31 (lat,lon)" in said
    assert "centre 48.86,2.295; 2.2 km east-west x 2.2 km north-south;" in said
    refused = cli(
        "query", "create", "--id", "swapped", *lon_first, "--bbox", "2.28,48.85,2.31,48.87",
        server=server, ok=False,
    )  # fmt: skip
    assert refused.returncode == 2
    said = words(refused.stderr)
    assert "the box is all water, but read as lon,lat it would be 100% land" in said
    assert "Latitude first it reads 48.85,2.28,48.87,2.31" in said
    listed = json.loads(cli("query", "list", "--json", server=server).stdout)
    assert [q["query_id"] for q in listed] == ["ok"]  # nothing was created
    anyway = cli(
        "query", "create", "--id", "swapped", *lon_first, "--bbox", "2.28,48.85,2.31,48.87",
        "--accept-box", server=server,
    )  # fmt: skip
    assert "creating it anyway" in words(anyway.stderr)

    # Far from the last CSV fleet's points (Paris): a box in New York is refused.
    cli("fleet", "run", "--query", "ok", "--csv", str(city_csv), "--no-progress", server=server)
    far = cli(
        "query", "create", "--id", "nyc", *lon_first, "--bbox", "40.70,-74.02,40.72,-74.00",
        server=server, ok=False,
    )  # fmt: skip
    assert f"km from the nearest point of {city_csv}" in words(far.stderr)
    # Swapping would not help here: the message does not suggest it.
    assert "Given longitude first" not in words(far.stderr)
    assert "another place than the last fleet's" in words(far.stderr)
