"""Mechanism speed: fleet randomization, the aggregate sampler, and baselines, in one run.

    .venv/bin/python bench/mechanisms.py [--budget 60] [--json]

For RR and SP it times `fleet_counts` (every device randomized independently, exact rational
probabilities) at 10^6 and 10^7 devices x 100 and 1,000 targets; a case projected to take
longer than --budget seconds is measured on a fraction of its devices and labelled so. It
times `sample_aggregate` for 10^9 devices x 100 targets, and two baselines measured in the
same run, so the ratios hold however busy the machine is: a naive numpy implementation with
float thresholds (`rng.random() < a`) and the device half (`draw()`, the CSPRNG, per device).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy
from ldpcollect.mechanisms.targets import device_chunks

MECHANISMS: list[Mechanism] = [RandomizedResponse("0.85", "0.3"), SamplingPrivacy("0.5")]
FLEET_CASES = [(10**6, 100), (10**6, 1000), (10**7, 100), (10**7, 1000)]
AGGREGATE_DEVICES = 10**9
AGGREGATE_TARGETS = 100


@dataclass
class Row:
    mechanism: str
    what: str
    devices: int
    targets: int
    measured_devices: int
    seconds: float
    devices_per_second: float
    note: str = ""


def population(n: int, n_targets: int, rng: np.random.Generator) -> NDArray[np.uint64]:
    """Half the devices at a uniformly chosen target, half elsewhere."""
    return rng.integers(0, 2 * n_targets, size=n, dtype=np.uint64)


def timed(fn: Callable[..., object], *args: object, repeat: int = 1) -> float:
    """Best wall time of `repeat` calls (the least disturbed by other work on the machine)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def draw_many(mech: Mechanism, n: int, targets: list[int]) -> None:
    for i in range(n):
        mech.draw(i % (2 * len(targets)), targets)


def naive_float_counts(
    mech: Mechanism, locations: NDArray[np.uint64], n_targets: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """The obvious float-threshold numpy version (same chunking), the baseline for the ratio."""
    counts = np.zeros((mech.rounds, n_targets), dtype=np.int64)
    columns = np.arange(n_targets, dtype=np.uint64)
    for chunk in device_chunks(locations.size, n_targets):
        truth = locations[chunk, None] == columns[None, :]
        uniform = rng.random(truth.shape)
        if isinstance(mech, RandomizedResponse):
            threshold = np.where(truth, float(mech.yes_given_yes), float(mech.yes_given_no))
            counts[0] += np.count_nonzero(uniform < threshold, axis=0)
        else:
            selected = truth & (rng.random(truth.shape) < float(mech.sampling_rate))
            round1 = (uniform < 0.5) & ~selected
            counts[0] += np.count_nonzero(round1, axis=0)
            counts[1] += np.count_nonzero(round1 | selected, axis=0)
    return counts


def run(budget: float, progress: Progress) -> list[Row]:
    rng = np.random.default_rng(20_241_130)
    rows: list[Row] = []
    steps = len(MECHANISMS) * (len(FLEET_CASES) + 3)  # + aggregate, float, device
    task = progress.add_task("benchmarking", total=steps)
    for mech in MECHANISMS:
        mech.fleet_counts(
            population(10**6, 100, rng), np.arange(100, dtype=np.uint64), rng
        )  # warm-up
        rate_per_cell: float | None = None
        for n, n_targets in FLEET_CASES:
            progress.update(task, description=f"{mech.name} fleet_counts {n:.0e} x {n_targets}")
            targets = np.arange(n_targets, dtype=np.uint64)
            measured, note = n, ""
            if rate_per_cell is not None and n * n_targets / rate_per_cell > budget:
                measured = max(10**5, int(budget * rate_per_cell / n_targets))
                note = f"measured on {measured:,} of {n:,} devices ({measured / n:.1%})"
            locs = population(measured, n_targets, rng)
            repeat = 3 if measured <= 10**6 else 1
            if repeat > 1:
                note = (note + "; " if note else "") + f"best of {repeat}"
            seconds = timed(mech.fleet_counts, locs, targets, rng, repeat=repeat)
            rate_per_cell = measured * n_targets / seconds
            rows.append(
                Row(
                    mech.name,
                    "fleet_counts",
                    n,
                    n_targets,
                    measured,
                    seconds,
                    measured / seconds,
                    note,
                )
            )
            progress.advance(task)

        progress.update(task, description=f"{mech.name} sample_aggregate 1e9 x 100")
        truth = rng.multinomial(AGGREGATE_DEVICES // 2, np.full(AGGREGATE_TARGETS, 0.01))
        times = [timed(mech.sample_aggregate, truth, AGGREGATE_DEVICES, rng) for _ in range(21)]
        seconds = statistics.median(times)
        rows.append(
            Row(
                mech.name,
                "sample_aggregate",
                AGGREGATE_DEVICES,
                AGGREGATE_TARGETS,
                AGGREGATE_DEVICES,
                seconds,
                AGGREGATE_DEVICES / seconds,
                "median of 21 calls",
            )
        )
        progress.advance(task)

        progress.update(task, description=f"{mech.name} naive float baseline 1e6 x 100")
        locs = population(10**6, 100, rng)
        targets = np.arange(100, dtype=np.uint64)
        ours, naive = float("inf"), float("inf")
        for _ in range(5):  # interleaved, best of 5 each: both see the same machine load
            ours = min(ours, timed(mech.fleet_counts, locs, targets, rng))
            naive = min(naive, timed(naive_float_counts, mech, locs, 100, rng))
        rows.append(
            Row(
                mech.name,
                "fleet_counts (interleaved with baseline)",
                10**6,
                100,
                10**6,
                ours,
                10**6 / ours,
                "best of 5",
            )
        )
        rows.append(
            Row(
                mech.name,
                "baseline: naive float numpy",
                10**6,
                100,
                10**6,
                naive,
                10**6 / naive,
                "best of 5",
            )
        )
        progress.advance(task)

        progress.update(task, description=f"{mech.name} device half draw() x 100 targets")
        device_targets = list(range(100))
        n_draws = 2_000
        seconds = timed(draw_many, mech, n_draws, device_targets)
        rows.append(
            Row(
                mech.name,
                "baseline: device draw() (secrets)",
                n_draws,
                100,
                n_draws,
                seconds,
                n_draws / seconds,
            )
        )
        progress.advance(task)
    return rows


def ratios(rows: list[Row]) -> dict[str, float]:
    """fleet_counts at 10^6 x 100 (timed interleaved with the float baseline) per baseline."""
    out: dict[str, float] = {}
    for mech in MECHANISMS:
        mine = [r for r in rows if r.mechanism == mech.name]
        fleet = next(r for r in mine if r.what == "fleet_counts (interleaved with baseline)")
        for r in mine:
            if r.what.startswith("baseline"):
                out[f"{mech.name} fleet_counts / {r.what.removeprefix('baseline: ')}"] = (
                    fleet.devices_per_second / r.devices_per_second
                )
    return out


def seconds_text(seconds: float) -> str:
    if seconds >= 0.1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per fleet case")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    console = Console(stderr=args.json)
    if not console.is_terminal:
        console = Console(stderr=args.json, width=130)
    with Progress(console=console, transient=True) as progress:
        rows = run(args.budget, progress)
    found = ratios(rows)
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows], "ratios": found}, indent=2))
        return
    table = Table(title="ldpcollect mechanisms (this machine, this run)")
    for column in ("mech", "what", "devices x targets", "time", "devices / s", "note"):
        table.add_column(column, justify="right" if column in {"time", "devices / s"} else "left")
    for r in rows:
        table.add_row(
            r.mechanism,
            r.what,
            f"{r.devices:.0e} x {r.targets:,}",
            seconds_text(r.seconds),
            f"{r.devices_per_second:,.0f}",
            r.note,
        )
    console.print(table)
    for name, value in found.items():
        console.print(f"ratio {name}: [bold]{value:,.1f}x[/bold]")


if __name__ == "__main__":
    main()
