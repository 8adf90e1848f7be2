"""`ldpcollect fleet run` as an operator uses it, through a real `ldpcollect serve`: a CSV fleet
sent twice is the same devices (deduplicated, not recounted), swapped lat/lon is warned
about, a Sampling Privacy query says how to answer its second round, and server messages
name the commands to type."""

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


def test_swapped_lat_lon_is_warned_about(server: str, city_csv: Path, tmp_path: Path) -> None:
    create(server, "rr", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    swapped = tmp_path / "swapped.csv"
    rows = city_csv.read_text().splitlines()[1:]
    swapped.write_text("".join(",".join(reversed(r.split(","))) + "\n" for r in rows))
    done = cli(
        "fleet", "run", "--query", "rr", "--csv", str(swapped), "--no-progress", server=server
    )
    said = words(done.stderr)
    assert f"warning: only 0% of the locations in {swapped} fall in rr's targets" in said
    assert "would with latitude and longitude swapped" in said
    fine = cli(
        "fleet", "run", "--query", "rr", "--csv", str(city_csv), "--no-progress", server=server
    )
    assert "warning" not in fine.stderr


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
    shown = json.loads(cli("query", "show", "--query", "sp", "--json", server=server).stdout)
    assert shown["completed_devices"] == 500

    early_release = cli("release", "--query", "sp", server=server, ok=False)
    assert "close it first: `ldpcollect query close --query sp`" in words(early_release.stderr)
    missing = cli("release", "--query", "nope", server=server, ok=False)
    assert "`ldpcollect query list` shows the ids" in words(missing.stderr)
