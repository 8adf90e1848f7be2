"""`ldpcollect fleet run`: build (or load) a fleet, answer a query through gRPC, report."""

from __future__ import annotations

import asyncio
import hashlib
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import numpy as np
from rich.console import Console
from rich.table import Table

from client.admin import connect_admin
from client.channels import ClientIdentity, open_aio_channel
from client.fleet import MODES, FleetConfig, FleetResult, new_fleet, run_query
from client.fleet_state import FleetState
from client.fleet_tokens import FleetTokens
from client.locations_csv import read_locations_csv
from client.progress import fleet_progress
from client.query_info import QueryInfo
from client.swap_check import check_swap
from ldpcollect import geo
from ldpcollect.errors import ParameterError
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect_cli.service_render import print_json

DEFAULT_DEVICES = 1000


@dataclass(frozen=True)
class FleetRequest:
    query_id: str
    devices: int | None  # None: the default (a CSV has one device per row)
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
    # Admission tokens: the issuer's address and its enrollment key file (the fleet enrolls
    # its simulated devices as <device_prefix>-<i>).
    issuer: str | None = None
    enrollment_key: Path | None = None
    device_prefix: str = "sim"
    # A secure query (the server is a leader): where the devices take the helper's HPKE key.
    helper: str | None = None
    helper_config: Path | None = None
    helper_tls_ca: Path | None = None


def fleet_tokens(request: FleetRequest) -> FleetTokens | None:
    return load_fleet_tokens(
        request.issuer, request.enrollment_key, request.device_prefix, request.tls_ca
    )


def load_fleet_tokens(
    issuer: str | None, enrollment_key: Path | None, device_prefix: str, tls_ca: Path | None
) -> FleetTokens | None:
    """`--issuer` and `--enrollment-key` as a fleet's token source (None without --issuer)."""
    if issuer is None:
        return None
    if enrollment_key is None:
        raise ParameterError(
            "--enrollment-key",
            None,
            "given with --issuer",
            "the issuer's enrollment.key (in its --state-dir) enrolls the simulated devices",
        )
    try:
        key = enrollment_key.read_bytes()
    except OSError as exc:
        raise ParameterError("--enrollment-key", str(enrollment_key), "a readable file") from exc
    return FleetTokens(issuer, key, device_prefix, tls_ca)


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
        rows = read_locations_csv(request.csv)
        fleet = new_fleet(rows.lats, rows.lons, request.device_budget, request.device_budget_delta)
        fleet.identity = csv_identity(rows.sha256, request.seed)
        return fleet
    devices = DEFAULT_DEVICES if request.devices is None else request.devices
    lats, lons = geo.sample_locations(devices, parse_center(request.center), rng)
    return new_fleet(lats, lons, request.device_budget, request.device_budget_delta)


def csv_identity(file_sha256: bytes, seed: int | None) -> bytes:
    """Who a CSV fleet's devices are: the file's content and the seed (0 when not given)."""
    return hashlib.sha256(
        b"ldpcollect csv fleet\0" + file_sha256 + str(seed or 0).encode()
    ).digest()


def run_fleet_command(request: FleetRequest, console: Console) -> None:
    if request.mode not in MODES:
        raise ParameterError("--mode", request.mode, "unary, stream or batch")
    if request.advance and not request.admin_token:
        raise ParameterError(
            "--admin-token",
            "",
            "given with --advance",
            "advancing a query is the operator's: pass the token or set LDPCOLLECT_ADMIN_TOKEN",
        )
    warn = Console(stderr=True)
    if request.csv is not None and request.devices is not None:
        warn.print(f"note: --devices is ignored with --csv: one device per row of {request.csv}")
    config = FleetConfig(
        mode=request.mode,
        concurrency=request.concurrency,
        batch_size=request.batch_size,
        tokens=fleet_tokens(request),
    )
    rng = np.random.default_rng(request.seed)
    fleet = build_fleet(request, rng)
    try:
        result = asyncio.run(_run(request, fleet, config, rng, warn))
    finally:
        if request.state is not None:
            fleet.save(request.state)
    if request.json_out:
        print_json(result.to_json())
    else:
        console.print(result_table(result))
    for line in next_steps(request, result):
        warn.print(line)


def next_steps(request: FleetRequest, result: FleetResult) -> list[str]:
    """What the person should know after the run: a round still to answer, a repeated run."""
    lines: list[str] = []
    last = result.rounds[-1]
    if last.sent and last.duplicates == last.sent:
        lines.append(
            f"note: every report was already acknowledged: this fleet answered {result.query_id} "
            "before (the same CSV and --seed are the same devices); another --seed is a new set "
            "of devices"
        )
    if last.round < result.rounds_total:
        again = "this command again"
        if request.csv is None:
            again += " with the same --state FILE" if request.state else " with --state FILE"
        lines.append(
            f"note: {result.query_id} has {result.rounds_total} rounds and only devices that "
            f"answer all of them are counted: run `ldpcollect query advance --query "
            f"{result.query_id}`, then {again}; or answer every round in one run with --advance"
        )
    return lines


def swap_warning(request: FleetRequest, info: QueryInfo, fleet: FleetState) -> str | None:
    check = check_swap(info, fleet.lats, fleet.lons)
    if not check.looks_swapped:
        return None
    source = f"locations in {request.csv}" if request.csv is not None else "simulated locations"
    return (
        f"warning: only {check.inside:.0%} of the {source} fall in {info.query_id}'s targets, "
        f"but {check.inside_swapped:.0%} would with latitude and longitude swapped: check the "
        "order of the CSV's columns (a header row lat,lon names them) and of the query's --bbox "
        "(south,west,north,east)"
    )


async def _run(
    request: FleetRequest,
    fleet: FleetState,
    config: FleetConfig,
    rng: np.random.Generator,
    warn: Console,
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
            try:
                query = await pb_grpc.CollectorStub(channel).GetQuery(
                    pb.GetQueryRequest(query_id=request.query_id), timeout=config.retry.rpc_timeout
                )
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                # A leader of two aggregators: the query is a secure one.
                return await _run_secure(request, fleet, config, rng, warn, channel)
            warning = swap_warning(request, QueryInfo.from_proto(query), fleet)
            if warning is not None:
                warn.print(warning)
            with fleet_progress(
                f"{request.query_id} ({request.mode})", enabled=request.progress
            ) as bar:
                return await run_query(
                    channel, fleet, request.query_id, config, rng, advance=advance, progress=bar
                )


async def _run_secure(
    request: FleetRequest,
    fleet: FleetState,
    config: FleetConfig,
    rng: np.random.Generator,
    warn: Console,
    channel: grpc.aio.Channel,
) -> FleetResult:
    """The fleet against a leader: each device seals every round's answers into one upload
    (`--advance` changes nothing: there is no round to advance)."""
    from client.secure_admin import as_query
    from client.secure_fleet import run_secure_query
    from client.secure_keys import helper_config_of
    from ldpcollect.v1 import secure_pb2 as spb
    from ldpcollect.v1 import secure_pb2_grpc as spb_grpc

    helper = await asyncio.to_thread(
        helper_config_of,
        request.helper,
        request.helper_config,
        request.helper_tls_ca,
        ClientIdentity.from_environment(),
    )
    query = await spb_grpc.SecureCollectorStub(channel).GetSecureQuery(
        spb.GetSecureQueryRequest(query_id=request.query_id), timeout=config.retry.rpc_timeout
    )
    warning = swap_warning(request, QueryInfo.from_proto(as_query(query)), fleet)
    if warning is not None:
        warn.print(warning)
    with fleet_progress(f"{request.query_id} (seal + upload)", enabled=request.progress) as bar:
        return await run_secure_query(channel, fleet, query, helper, config, rng, progress=bar)


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
