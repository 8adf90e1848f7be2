"""`ldpcollect fleet run`: build (or load) a fleet, answer a query through gRPC, report."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from client.admin import connect_admin
from client.channels import ClientIdentity, open_aio_channel
from client.fleet import MODES, FleetConfig, FleetResult, new_fleet, run_query
from client.fleet_state import FleetState, read_locations_csv
from client.progress import fleet_progress
from ldpcollect import geo
from ldpcollect.errors import ParameterError
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect_cli.service_render import print_json


@dataclass(frozen=True)
class FleetRequest:
    query_id: str
    devices: int
    mode: str
    concurrency: int
    batch_size: int
    csv: Path | None
    seed: int | None
    center: str
    state: Path | None
    device_budget: float | None
    device_budget_delta: float
    advance: bool
    progress: bool
    server: str
    admin_token: str
    tls_ca: Path | None
    json_out: bool


def parse_center(text: str) -> tuple[float, float]:
    try:
        lat, lon = (float(part) for part in text.split(","))
    except ValueError:
        raise ParameterError("--center", text, "lat,lon in degrees") from None
    return lat, lon


def build_fleet(request: FleetRequest, rng: np.random.Generator) -> FleetState:
    """The fleet: from the state file if it exists, else from the CSV or the simulated city."""
    if request.state is not None and request.state.exists():
        fleet = FleetState.load(request.state)
        asked = (request.device_budget, request.device_budget_delta)
        saved = (fleet.budget_epsilon, fleet.budget_delta)
        if request.device_budget is not None and asked != saved:
            raise ParameterError(
                "--device-budget/--device-budget-delta",
                asked,
                f"the budget saved in {request.state} {saved}",
            )
        return fleet
    if request.csv is not None:
        lats, lons = read_locations_csv(request.csv)
    else:
        lats, lons = geo.sample_locations(request.devices, parse_center(request.center), rng)
    return new_fleet(lats, lons, request.device_budget, request.device_budget_delta)


def run_fleet_command(request: FleetRequest, console: Console) -> None:
    if request.mode not in MODES:
        raise ParameterError("--mode", request.mode, "unary, stream or batch")
    if request.advance and not request.admin_token:
        raise ParameterError("--admin-token", "", "a token: --advance calls AdvanceRound")
    config = FleetConfig(
        mode=request.mode,
        concurrency=request.concurrency,
        batch_size=request.batch_size,
    )
    rng = np.random.default_rng(request.seed)
    fleet = build_fleet(request, rng)
    try:
        result = asyncio.run(_run(request, fleet, config, rng))
    finally:
        if request.state is not None:
            fleet.save(request.state)
    if request.json_out:
        print_json(result.to_json())
    else:
        console.print(result_table(result))


async def _run(
    request: FleetRequest, fleet: FleetState, config: FleetConfig, rng: np.random.Generator
) -> FleetResult:
    identity = ClientIdentity.from_environment()
    with ExitStack() as stack:
        advance = None
        if request.advance:
            admin = stack.enter_context(
                connect_admin(
                    request.server, request.admin_token, tls_ca=request.tls_ca, identity=identity
                )
            )

            async def advance_round(query_id: str) -> pb.Query:
                return await asyncio.to_thread(admin.advance, query_id)

            advance = advance_round
        async with open_aio_channel(request.server, request.tls_ca, identity=identity) as channel:
            with fleet_progress(
                f"{request.query_id} ({request.mode})", enabled=request.progress
            ) as bar:
                return await run_query(
                    channel, fleet, request.query_id, config, rng, advance=advance, progress=bar
                )


def result_table(result: FleetResult) -> Table:
    table = Table(
        title=f"fleet of {result.devices} devices on {result.query_id} ({result.mechanism})"
    )
    for column in ("round", "mode", "sent", "accepted", "duplicates", "failed", "retries", "rate"):
        table.add_column(column, justify="right")
    for r in result.rounds:
        table.add_row(
            str(r.round),
            r.mode,
            str(r.sent),
            str(r.accepted),
            str(r.duplicates),
            str(r.failed),
            str(r.retries),
            f"{r.reports_per_second:,.0f}/s",
        )
    table.caption = (
        f"answering {result.answering}, declined (device budget) {result.declined}, "
        f"completed {result.completed}, in no target {result.outside_targets}, "
        f"true count in targets {int(result.ground_truth.sum())}"
    )
    return table
