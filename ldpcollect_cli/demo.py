"""`ldpcollect demo`: the whole protocol end to end on one machine, in seconds.

Over the 5 x 5 block of grid cells around the simulated city's busiest hotspot, one fleet
of simulated devices answers three queries through gRPC:

- randomized response (flip1 0.85, flip2 0.3) at a trusted aggregator (one process on a
  temporary SQLite file): RR's one round is private on its own, so one aggregator will do;
- Sampling Privacy (s = 0.5), and the same with discrete Gaussian release noise (sigma 2 at
  each aggregator), on two aggregators (a leader and a helper, two more processes): one
  aggregator would see both rounds of every device and learn the cell of each device selected
  at its own cell; two see only secret shares.

It closes and releases the queries, prints the busiest cells' estimates and 95% intervals
beside the ground truth, each release's privacy cost (every view, in plain words) and the
trusted ledger's odometer, and stops the servers. With `--postprocess` it also reports the
error of the post-processed estimates, and with `--maps DIR` it draws each release beside the
truth (PNG and HTML).
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import cast

import grpc
import grpc.aio
import numpy as np
from rich.console import Console
from rich.table import Table

from client.admin import AdminClient
from client.fleet import FleetConfig, FleetResult, Mode, new_fleet, run_query
from client.fleet_state import FleetState
from client.fleet_tokens import FleetTokens
from client.progress import fleet_progress
from client.retry import error_details
from client.secure_admin import SecureAdminClient, as_query
from client.secure_fleet import run_secure_query
from client.secure_keys import fetch_helper_config
from ldpcollect import geo, wire
from ldpcollect.errors import ParameterError
from ldpcollect.geo.grid import CELLS_PER_SIDE
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.postprocess import METHODS
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect_cli.release_html import write_html
from ldpcollect_cli.release_map import write_png
from ldpcollect_cli.release_view import ReleaseView
from ldpcollect_cli.secure_release import release_message
from ldpcollect_cli.secure_subprocess import secure_deployment
from ldpcollect_cli.serve_subprocess import cli_subprocess, serve_subprocess
from ldpcollect_cli.service_render import (
    bound,
    ledger_json,
    print_json,
    privacy_table,
    release_json,
)
from ldpcollect_cli.serving import READY_PREFIX

BLOCK = 10  # 10 x 10 target cells (demo --secure)
# `ldpcollect demo`: the 5 x 5 busiest block. A Sampling Privacy pair costs a device about
# 1 ms to seal per 25 targets (the FLP proof in Python) and both aggregators as much to
# verify, so a small block keeps the demo to seconds.
DEMO_BLOCK = 5
# With --tokens: one token per upload of each query (RR 1, SP pair 1, SP pair with noise 1).
TOKENS_PER_DEVICE = 3
ISSUER_READY = "ldpcollect issuer serving on "
NOISE_SIGMA = "2"
# The trusted aggregator's budget, fixed before its first release (`serve --budget`): the
# Renyi filter admits the count-level RR release. The SP queries run on two aggregators,
# whose ledger is the leader's (docs/secure-mode.md).
DEMO_BUDGET = "6,1e-6,renyi"
LABELS = {"rr": "RR 0.85/0.3", "sp": "SP s=0.5", "sp_noise": f"SP s=0.5 + noise {NOISE_SIGMA}"}
# The demo's size: the SP queries' devices seal secret shares (about 1.5 ms each in Python)
# and both aggregators verify them, so the default stays at a few seconds.
DEMO_DEVICES = 2000
WHY_TWO = (
    "SP runs on two aggregators (leader and helper, separate processes): one aggregator would "
    "see both rounds of every device and learn the cell of each device selected at its own cell"
)


@dataclass(frozen=True)
class DemoSettings:
    devices: int = DEMO_DEVICES
    seed: int = 2024
    mode: str = "batch"
    top: int = 10
    json_out: bool = False
    postprocess: str | None = None  # also show clipped / Norm-Sub estimates and their error
    maps: Path | None = None  # folder for each release's map (PNG and HTML) with the truth
    # Admission: run an issuer, require tokens in every query, enroll the simulated devices.
    tokens: bool = False


def block_targets(center: tuple[float, float], side: int = BLOCK) -> list[int]:
    """The side x side block of grid cells around `center` (row-major, south-west first)."""
    row, col = divmod(geo.GridScheme().locate(*center), CELLS_PER_SIDE)
    first_row, first_col = row - side // 2, col - side // 2
    return [
        (first_row + dr) * CELLS_PER_SIDE + (first_col + dc)
        for dr in range(side)
        for dc in range(side)
    ]


@contextmanager
def aggregator_subprocess(db: Path, token: str, *extra: str) -> Iterator[str]:
    """`ldpcollect serve` on 127.0.0.1:0 in a child process; yields its address; stops it."""
    args = ["--db", str(db), "--listen", "127.0.0.1:0", *extra]
    env = {"LDPCOLLECT_ADMIN_TOKEN": token}
    with serve_subprocess(args, env, READY_PREFIX, "aggregator") as address:
        yield address


@contextmanager
def issuer_subprocess(state_dir: Path, tokens_per_epoch: int) -> Iterator[str]:
    """`ldpcollect issuer serve` on 127.0.0.1:0, its directory written beside its state."""
    command = ["issuer", "serve", "--state-dir", str(state_dir), "--listen", "127.0.0.1:0"]
    command += ["-k", str(tokens_per_epoch), "--directory-out", str(directory_file(state_dir))]
    with cli_subprocess(command, {}, ISSUER_READY, "issuer") as address:
        yield address


def directory_file(state_dir: Path) -> Path:
    return state_dir.parent / "issuer-directory.json"


def run_demo(settings: DemoSettings, console: Console) -> None:
    if settings.postprocess is not None and settings.postprocess not in METHODS:
        raise ParameterError("--postprocess", settings.postprocess, "clip or norm-sub")
    started = time.perf_counter()
    center = geo.DEFAULT_CENTER
    targets = block_targets(center, DEMO_BLOCK)
    rng = np.random.default_rng(settings.seed)
    lats, lons = geo.sample_locations(settings.devices, center, rng)
    fleet = new_fleet(lats, lons)
    token = secrets.token_urlsafe(24)
    say = console.print if not settings.json_out else (lambda *a, **k: None)
    with tempfile.TemporaryDirectory(prefix="ldpcollect-demo-") as tmp, ExitStack() as stack:
        db, issuer_state = Path(tmp) / "aggregator.db", Path(tmp) / "issuer"
        extra: tuple[str, ...] = ()
        tokens, directory = None, None
        if settings.tokens:
            issuer = stack.enter_context(issuer_subprocess(issuer_state, TOKENS_PER_DEVICE))
            directory = directory_file(issuer_state)
            extra = ("--token-directory", str(directory))
            key = (issuer_state / "enrollment.key").read_bytes()
            tokens = FleetTokens(issuer, key, "demo")
            say(f"token issuer on {issuer}: K = {TOKENS_PER_DEVICE} tokens per device")
        budget = ("--budget", DEMO_BUDGET)
        address = stack.enter_context(aggregator_subprocess(db, token, *extra, *budget))
        # The leader opts out of a budget: demo-sp shows SP without noise, whose public view
        # no budget can admit (its release says it is unbounded and had no budget).
        pair = stack.enter_context(secure_deployment("ldpcollect-demo-secure-", None, directory))
        say(f"trusted aggregator on {address} (RR), SQLite {db}")
        say(f"leader on {pair.leader}, helper on {pair.helper}: {WHY_TWO}")
        channel = stack.enter_context(grpc.insecure_channel(address))
        admin = AdminClient(channel, token)
        secure = SecureAdminClient(pair.channel, pair.admin_token)
        rr = admin.create_query(
            RandomizedResponse("0.85", "0.3"),
            "grid",
            targets,
            query_id="demo-rr",
            description="demo: randomized response 0.85/0.3",
            min_reports=100,
            require_tokens=settings.tokens,
        )
        grid = wire.scheme_from_text("grid")
        sp_queries = {
            name: secure.create_query(
                pair.collector,
                SamplingPrivacy("0.5"),
                grid,
                targets,
                query_id=query_id,
                description=f"demo: Sampling Privacy s = 0.5{words}, two aggregators",
                min_reports=100,
                noise_sigma=sigma,
                require_tokens=settings.tokens,
            )
            for name, query_id, sigma, words in (
                ("sp", "demo-sp", None, ""),
                ("sp_noise", "demo-sp-noise", Fraction(NOISE_SIGMA), f", noise {NOISE_SIGMA}"),
            )
        }
        say(f"queries demo-rr, demo-sp, demo-sp-noise over {len(targets)} grid cells")
        results = asyncio.run(
            _run_fleet(
                address,
                pair.leader,
                pair.helper,
                admin,
                fleet,
                rr,
                sp_queries,
                settings,
                rng,
                tokens,
            )
        )
        admin.close(rr.query_id)
        releases: dict[str, pb.QueryRelease] = {}
        refused: dict[str, str] = {}
        try:
            releases["rr"] = admin.release(rr.query_id)
        except grpc.RpcError as error:  # the budget's filter said no
            refused["rr"] = error_details(error)
            say(f"[yellow]{rr.query_id} not released:[/yellow] {refused['rr']}")
        queries = {"rr": admin.get_query(rr.query_id)}
        for name, created in sp_queries.items():
            opened = secure.release(pair.collector, created.query_id)
            releases[name] = release_message(opened, opened.claims)
            queries[name] = as_query(opened.query)
        ledger = admin.ledger()
        seconds = time.perf_counter() - started
    views = {
        name: ReleaseView.from_json(release_json(releases[name], queries[name]))
        .with_truth(results[name].truth_by_location())
        .with_postprocess(settings.postprocess)
        for name in releases
    }
    if settings.maps is not None:
        for view in views.values():
            write_png(view, settings.maps / f"{view.query_id}.png")
            write_html(view, settings.maps / f"{view.query_id}.html")
            say(f"wrote {settings.maps / view.query_id}.png and .html")
    _show(settings, console, targets, results, releases, refused, views, ledger, seconds)


async def _run_fleet(
    address: str,
    leader: str,
    helper: str,
    admin: AdminClient,
    fleet: FleetState,
    rr: pb.Query,
    sp_queries: dict[str, spb.SecureQuery],
    settings: DemoSettings,
    rng: np.random.Generator,
    tokens: FleetTokens | None = None,
) -> dict[str, FleetResult]:
    """RR through the trusted aggregator (both rounds of nothing: one round), then each SP
    query through the leader (every device seals both rounds into one upload)."""
    config = FleetConfig(
        mode=cast(Mode, settings.mode), concurrency=4, batch_size=1000, tokens=tokens
    )
    results: dict[str, FleetResult] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        with fleet_progress(rr.query_id, enabled=not settings.json_out) as bar:
            results["rr"] = await run_query(channel, fleet, rr.query_id, config, rng, progress=bar)
    with grpc.insecure_channel(helper) as to_helper:
        helper_config = fetch_helper_config(to_helper)  # the helper's key, from the helper
    async with grpc.aio.insecure_channel(leader) as channel:
        for name, query in sp_queries.items():
            with fleet_progress(query.query_id, enabled=not settings.json_out) as bar:
                # Sealing here, not in worker processes: starting them costs more than they
                # save at this size, and the two servers use the other core meanwhile.
                results[name] = await run_secure_query(
                    channel,
                    fleet,
                    query,
                    helper_config,
                    config,
                    rng,
                    progress=bar,
                    workers=0,
                )
    return results


def estimates_table(
    title: str, rows: list[dict[str, object]], names: list[str], labels: Mapping[str, str]
) -> Table:
    """`estimate_rows` as a table: cell, truth, then "estimate [95% interval]" per release."""
    table = Table(title=title)
    table.add_column("cell", justify="right")
    table.add_column("truth", justify="right")
    for name in names:
        table.add_column(labels[name], justify="right")
    for row in rows:
        cells = [str(row["location_id"]), str(row["ground_truth"])]
        for name in names:
            e = row[name]
            assert isinstance(e, dict)
            cells.append(f"{e['estimate']:.0f} [{e['ci_low']:.0f}, {e['ci_high']:.0f}]")
        table.add_row(*cells)
    return table


def estimate_rows(
    targets: list[int],
    releases: dict[str, pb.QueryRelease],
    truth_of: Callable[[str], Mapping[int, int]],
    order: Mapping[int, int],
) -> list[dict[str, object]]:
    """One row per target cell: each release's estimate and interval beside the true count
    its devices held (`truth_of(release name)`), busiest first by `order` (the demos' table
    and JSON)."""
    by_name = {
        name: {int(e.location_id): e for e in release.estimates}
        for name, release in releases.items()
    }
    rows: list[dict[str, object]] = []
    for cell in targets:
        row: dict[str, object] = {"location_id": cell, "ground_truth": order[cell]}
        for name in releases:
            e = by_name[name][cell]
            row[name] = {
                "estimate": e.estimate,
                "std_error": e.std_error,
                "ci_low": e.ci_low,
                "ci_high": e.ci_high,
                "ground_truth": truth_of(name)[cell],
            }
        rows.append(row)
    rows.sort(key=lambda r: -order[int(str(r["location_id"]))])
    return rows


def _coverage(rows: list[dict[str, object]], name: str) -> tuple[float, float]:
    """(share of cells whose 95% interval holds the truth, RMSE) over all target cells."""
    inside, squares = 0, 0.0
    for row in rows:
        e = row[name]
        assert isinstance(e, dict)
        truth = e["ground_truth"]
        inside += e["ci_low"] <= truth <= e["ci_high"]
        squares += (e["estimate"] - truth) ** 2
    return inside / len(rows), (squares / len(rows)) ** 0.5


def _show(
    settings: DemoSettings,
    console: Console,
    targets: list[int],
    results: dict[str, FleetResult],
    releases: dict[str, pb.QueryRelease],
    refused: dict[str, str],
    views: dict[str, ReleaseView],
    ledger: pb.Ledger,
    seconds: float,
) -> None:
    rows = estimate_rows(
        targets,
        releases,
        lambda name: results[name].truth_by_location(),
        results["sp"].truth_by_location(),
    )
    coverage = {name: _coverage(rows, name) for name in releases}
    errors = {name: view.errors() or {} for name, view in views.items()}
    if settings.json_out:
        print_json(
            {
                "devices": settings.devices,
                "seconds": round(seconds, 2),
                "targets": targets,
                "busiest": rows[: settings.top],
                "coverage_95": {name: c for name, (c, _) in coverage.items()},
                "rmse": {name: r for name, (_, r) in coverage.items()},
                "errors": errors,
                "fleet": {name: r.to_json() for name, r in results.items()},
                "releases": {name: release_json(r) for name, r in releases.items()},
                "refused": refused,
                "ledger": ledger_json(ledger),
            }
        )
        return
    title = (
        f"busiest {settings.top} of {len(targets)} cells, {settings.devices} devices: "
        "estimate [95% interval]"
    )
    console.print(estimates_table(title, rows[: settings.top], list(releases), LABELS))
    for name in releases:
        share, rmse = coverage[name]
        line = (
            f"{LABELS[name]}: 95% intervals hold the truth in {share:.0%} of {len(rows)} cells; "
            f"RMSE {rmse:.1f}"
        )
        if settings.postprocess is not None:
            line += (
                f"; {settings.postprocess} RMSE {errors[name][f'rmse_{settings.postprocess}']:.1f}"
            )
        console.print(line)
    if settings.postprocess is not None:
        console.print(
            f"[dim]{settings.postprocess}: the released estimates made non-negative after "
            "release (post-processing: no privacy cost)[/dim]"
        )
    console.print()
    console.print(privacy_table(releases.values(), ledger.reporting_delta))
    console.print(
        f"ledger: {_budget_words(ledger)}. Odometer, the public's loss over everything "
        f"released so far: epsilon {bound(ledger.odometer_epsilon)} at delta "
        f"{bound(ledger.odometer_delta, 6)} [dim]({ledger.odometer_method})[/dim]"
    )
    console.print(f"demo finished in {seconds:.1f} s; server stopped")


def _budget_words(ledger: pb.Ledger) -> str:
    if ledger.budget_mode == "none":
        return "no budget set (releases recorded, none refused)"
    return (
        f"budget epsilon {ledger.budget_epsilon:g} at delta {ledger.budget_delta:g}, "
        f"spent {ledger.currency} {bound(ledger.spent)}"
    )
