"""`ldpcollect demo --secure`: the secure mode end to end on one machine.

Starts a helper and a leader (`ldpcollect serve --role ...`) as separate processes on
temporary SQLite files, creates randomized response (0.85/0.3) and Sampling Privacy (s = 0.5,
discrete Gaussian noise sigma 2 added by EACH aggregator) over the 10 x 10 block of grid cells
around the simulated city's busiest hotspot; simulated devices draw locally, shard and seal
their answers (worker processes) and upload once to the leader; the collector closes,
collects both sealed shares, opens, debiases and prints the estimates beside the truth, the
three views of each release, and stops both servers. The device side (the FLP proof in
Python) is about half of the CPU time: see docs/secure-mode.md for the figures.

With `--tokens` an issuer process runs too, both aggregators accept its tokens, both queries
require them, and each simulated device (enrolled as demo-<i>, K = 2) fetches one token per
query before it uploads (a blind signature each: use -n 500 or so).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from client.fleet_tokens import FleetTokens
from client.secure_collector import create_secure_query, release_secure_query
from client.secure_device import SecureDevice, fetch_query, report_challenge, upload
from client.secure_keys import fetch_helper_config
from ldpcollect import geo
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy
from ldpcollect.secure.sealing import HpkeConfig
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect_cli.demo import (
    DEMO_BUDGET,
    block_targets,
    directory_file,
    estimate_rows,
    estimates_table,
    issuer_subprocess,
)
from ldpcollect_cli.secure_release import release_message, views_json
from ldpcollect_cli.secure_subprocess import secure_deployment
from ldpcollect_cli.service_render import print_json, privacy_table, release_json

NOISE_SIGMA = "2"
LABELS = {"rr": "RR 0.85/0.3", "sp": f"SP s=0.5 + noise {NOISE_SIGMA} per aggregator"}
UPLOAD_BATCH = 250
# The size. On this shared 2-core machine it takes 75-95 s (up to 2 minutes when other
# work loads it): each device's sealing costs ~0.65 ms for RR and ~1.5 ms for an SP pair in
# Python, and both servers' verification shares the same two cores (docs/secure-mode.md,
# "Speed"). `-n 3000` for a quick look (about 20 s).
SECURE_DEMO_DEVICES = 20_000
TOKENS_PER_DEVICE = 2  # with --tokens: one per query (RR, SP pair)


@dataclass(frozen=True)
class SecureDemoSettings:
    devices: int = SECURE_DEMO_DEVICES
    seed: int = 2024
    top: int = 10
    json_out: bool = False
    workers: int = 2
    tokens: bool = False  # run an issuer; both queries require its tokens


def seal_chunk(query_bytes: bytes, helper_config: bytes, locations: list[int]) -> list[bytes]:
    """Worker process: each device's local draw, sharded and sealed (the query from the
    leader, the helper's key from the helper)."""
    device = SecureDevice(spb.SecureQuery.FromString(query_bytes), HpkeConfig.decode(helper_config))
    return device.seal_many([device.draw(location) for location in locations])


def run_secure_demo(settings: SecureDemoSettings, console: Console) -> None:
    started = time.perf_counter()
    center = geo.DEFAULT_CENTER
    targets = block_targets(center)
    rng = np.random.default_rng(settings.seed)
    lats, lons = geo.sample_locations(settings.devices, center, rng)
    locations = [int(c) for c in geo.GridScheme().locate_many(lats, lons)]
    truth = {t: 0 for t in targets}
    for cell in locations:
        if cell in truth:
            truth[cell] += 1
    say = console.print if not settings.json_out else (lambda *a, **k: None)
    with ExitStack() as stack:
        tokens, directory = None, None
        if settings.tokens:
            state = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "issuer"
            issuer = stack.enter_context(issuer_subprocess(state, TOKENS_PER_DEVICE))
            directory = directory_file(state)
            tokens = FleetTokens(issuer, (state / "enrollment.key").read_bytes(), "demo")
            say(f"token issuer on {issuer}: K = {TOKENS_PER_DEVICE} tokens per device")
        run = stack.enter_context(
            secure_deployment("ldpcollect-secure-demo-", DEMO_BUDGET, directory)
        )
        channel, admin, collector = run.channel, run.admin_token, run.collector
        say(
            f"helper on {run.helper}, leader on {run.leader} "
            f"(separate processes, SQLite in {run.folder})"
        )
        mechanisms: dict[str, tuple[Mechanism, str]] = {
            "rr": (RandomizedResponse("0.85", "0.3"), ""),
            "sp": (SamplingPrivacy("0.5"), NOISE_SIGMA),
        }
        releases: dict[str, pb.QueryRelease] = {}
        for name, (mechanism, sigma) in mechanisms.items():
            created = create_secure_query(
                channel,
                admin,
                collector,
                mechanism,
                targets,
                100,
                sigma,
                f"demo-secure-{name}",
                require_tokens=settings.tokens,
            )
            query = fetch_query(channel, created.query_id)
            with grpc.insecure_channel(run.helper) as to_helper:
                helper_config = fetch_helper_config(to_helper)
            SecureDevice(query, helper_config)  # refuses here when the two keys differ
            _upload_fleet(channel, query, helper_config, locations, settings, console, tokens)
            release = release_secure_query(
                channel, admin, collector, query.query_id, expected=created
            )
            releases[name] = release_message(release, release.claims)
        seconds = time.perf_counter() - started
    _show(settings, console, targets, truth, releases, seconds)


def _upload_fleet(
    channel: grpc.Channel,
    query: spb.SecureQuery,
    helper_config: HpkeConfig,
    locations: list[int],
    settings: SecureDemoSettings,
    console: Console,
    tokens: FleetTokens | None = None,
) -> None:
    chunks = [locations[i : i + UPLOAD_BATCH] for i in range(0, len(locations), UPLOAD_BATCH)]
    by_device: dict[int, bytes] = {}
    if tokens is not None:
        by_device, failures = asyncio.run(
            tokens.fetch_for(lambda key: report_challenge(key, query), range(len(locations)))
        )
        if failures:
            raise OSError(f"the issuer refused {sum(failures.values())} tokens: {failures}")
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    progress = Progress(*columns, console=Console(stderr=True), disable=settings.json_out)
    with progress, ProcessPoolExecutor(settings.workers) as pool:
        task = progress.add_task(f"{query.query_id}: seal + upload", total=len(locations))
        query_bytes, helper = query.SerializeToString(), helper_config.encode()
        sent = 0
        for bodies in pool.map(
            seal_chunk, [query_bytes] * len(chunks), [helper] * len(chunks), chunks
        ):
            held = [by_device[d] for d in range(sent, sent + len(bodies))] if by_device else []
            sent += len(bodies)
            done = upload(channel, bodies, tokens=held)
            if done.rejected:
                raise OSError(f"the leader refused {len(done.rejected)} honest reports")
            progress.advance(task, len(bodies))


def _coverage(release: pb.QueryRelease, truth: dict[int, int]) -> tuple[float, float]:
    inside = sum(e.ci_low <= truth[int(e.location_id)] <= e.ci_high for e in release.estimates)
    squares = sum((e.estimate - truth[int(e.location_id)]) ** 2 for e in release.estimates)
    n = len(release.estimates)
    return inside / n, (squares / n) ** 0.5


def _show(
    settings: SecureDemoSettings,
    console: Console,
    targets: list[int],
    truth: dict[int, int],
    releases: dict[str, pb.QueryRelease],
    seconds: float,
) -> None:
    rows = estimate_rows(targets, releases, lambda _name: truth, truth)
    coverage = {name: _coverage(r, truth) for name, r in releases.items()}
    views = {name: views_json(list(r.claims)) for name, r in releases.items()}
    if settings.json_out:
        print_json(
            {
                "devices": settings.devices,
                "seconds": round(seconds, 2),
                "targets": targets,
                "busiest": rows[: settings.top],
                "coverage_95": {name: c for name, (c, _) in coverage.items()},
                "rmse": {name: r for name, (_, r) in coverage.items()},
                "releases": {name: release_json(r) for name, r in releases.items()},
                "views": views,
            }
        )
        return
    title = (
        f"secure mode: busiest {settings.top} of {len(targets)} cells, "
        f"{settings.devices} devices: estimate [95% interval]"
    )
    console.print(estimates_table(title, rows[: settings.top], list(releases), LABELS))
    for name, (share, rmse) in coverage.items():
        console.print(
            f"{LABELS[name]}: 95% intervals hold the truth in {share:.0%} of {len(targets)} "
            f"cells; RMSE {rmse:.1f}"
        )
    console.print()
    console.print(privacy_table(releases.values(), None))
    for name, by_view in views.items():
        console.print(f"[bold]{LABELS[name]}[/bold]")
        for view in by_view.values():
            epsilon = view["epsilon"]
            number = "unbounded" if epsilon is None else f"epsilon {epsilon:.3g}"
            console.print(f"  {view['words']}: {number} (delta {view['delta']:g})")
    console.print(f"secure demo finished in {seconds:.1f} s; leader and helper stopped")
