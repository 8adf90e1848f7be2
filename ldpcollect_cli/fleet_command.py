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

from client import fleet_identity
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
from ldpcollect_cli.box_check import remember_fleet_points
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
    # The operator's fleet key (named devices of a CSV); None: the default file.
    fleet_key: Path | None = None
    # Send even when the locations look swapped or mostly outside the query's targets.
    send_anyway: bool = False


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


def build_fleet(
    request: FleetRequest, rng: np.random.Generator, state: Path | None = None
) -> FleetState:
    """The fleet: from the state file if it exists, else from the CSV or the simulated city."""
    state = request.state if state is None else state
    if state is not None and state.exists():
        fleet = FleetState.load(state)
        asked = (request.device_budget, request.device_budget_delta)
        saved = (fleet.budget_epsilon, fleet.budget_delta)
        if request.device_budget is not None and asked != saved:
            raise ParameterError(
                "--device-budget/--device-budget-delta",
                asked,
                f"the budget saved in {state} {saved}",
            )
    elif request.csv is not None:
        rows = read_locations_csv(request.csv)
        remember_fleet_points(str(request.csv), rows.lats, rows.lons)
        fleet = new_fleet(rows.lats, rows.lons, request.device_budget, request.device_budget_delta)
        fleet.names = fleet_identity.row_names(rows.contents, request.seed)
    else:
        devices = DEFAULT_DEVICES if request.devices is None else request.devices
        lats, lons = geo.sample_locations(devices, parse_center(request.center), rng)
        return new_fleet(lats, lons, request.device_budget, request.device_budget_delta)
    if fleet.names is not None:
        key_path = request.fleet_key or fleet_identity.default_fleet_key_path()
        fleet.fleet_key = fleet_identity.load_or_create_fleet_key(key_path)
    return fleet


def default_state_path(request: FleetRequest, query: pb.Query) -> Path | None:
    """Where a simulated fleet answering a multi-round query in several runs keeps its devices
    when no --state is given: one file per (server, query, creation time) in the state folder,
    so the next run (after `query advance`) is the same devices. None when not needed."""
    if request.state is not None:
        return request.state
    if request.csv is not None or request.advance or query.rounds < 2:
        return None
    created = query.created_at.ToJsonString() if query.HasField("created_at") else ""
    key = "\0".join((request.server, query.query_id, created)).encode()
    name = f"{query.query_id[:40]}-{hashlib.sha256(key).hexdigest()[:16]}.npz"
    return fleet_identity.state_dir() / "fleets" / name


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
    run = _FleetRun(request, config, rng, warn)
    try:
        result = asyncio.run(run.run())
    finally:
        if run.fleet is not None and run.state is not None:
            run.fleet.save(run.state)
    if request.json_out:
        print_json(result.to_json())
    else:
        console.print(result_table(result))
    for line in next_steps(request, result, run.state):
        warn.print(line)


def next_steps(request: FleetRequest, result: FleetResult, state: Path | None = None) -> list[str]:
    """What the person should know after the run: a round still to answer, a repeated run,
    devices that had already reported other answers."""
    lines: list[str] = []
    last = result.rounds[-1]
    if last.sent and last.duplicates == last.sent:
        lines.append(
            f"note: every report was already acknowledged: this fleet answered {result.query_id} "
            "before (the same CSV rows and --seed are the same devices); another --seed is a "
            "new set of devices"
        )
    already = sum(count for (code, _), count in last.failures.items() if code == "ALREADY_EXISTS")
    if already and request.csv is not None:
        lines.append(
            f"note: {already} devices of {request.csv} had already reported to "
            f"{result.query_id} (an earlier version of the file): their first reports stand "
            "and nobody was counted twice; to redo the query from scratch before its release: "
            f"`ldpcollect query delete --query {result.query_id}`, create it again, then rerun"
        )
    if last.round < result.rounds_total:
        again = "this command again"
        if request.csv is None and state is not None:
            again += f" (the fleet's devices are kept in {state})"
        lines.append(
            f"note: {result.query_id} has {result.rounds_total} rounds and only devices that "
            f"answer all of them are counted: run `ldpcollect query advance --query "
            f"{result.query_id}`, then {again}; or answer every round in one run with --advance"
        )
    return lines


class LocationsRefused(ParameterError):
    """The fleet's locations look wrong for the query: nothing was sent."""


def location_problem(request: FleetRequest, info: QueryInfo, fleet: FleetState) -> str | None:
    """Why these locations look wrong for the query (swapped; for a CSV also almost all
    outside its targets), or None. Checked before anything is sent."""
    check = check_swap(info, fleet.lats, fleet.lons)
    source = f"locations in {request.csv}" if request.csv is not None else "simulated locations"
    if check.looks_swapped:
        return (
            f"only {check.inside:.0%} of the {source} fall in {info.query_id}'s targets, but "
            f"{check.inside_swapped:.0%} would with latitude and longitude swapped: check the "
            "order of the CSV's columns (a header row lat,lon names them) and of the query's "
            "--bbox (south,west,north,east)"
        )
    if check.inside < MIN_INSIDE and request.csv is not None:
        return (
            f"only {check.inside:.0%} of the {source} fall in {info.query_id}'s targets: the "
            "query's box (see `ldpcollect query show`) or the locations are not where you think"
        )
    return None


MIN_INSIDE = 0.05  # below this share of locations in the targets (almost none), a run is refused


class _FleetRun:
    """One `fleet run`: fetch the query, build (or load) the fleet, check its locations, send."""

    def __init__(
        self,
        request: FleetRequest,
        config: FleetConfig,
        rng: np.random.Generator,
        warn: Console,
    ) -> None:
        self.request = request
        self.config = config
        self.rng = rng
        self.warn = warn
        self.fleet: FleetState | None = None
        self.state: Path | None = request.state

    async def run(self) -> FleetResult:
        request = self.request
        identity = ClientIdentity.from_environment()
        with ExitStack() as stack:
            advance = None
            if request.advance:
                admin = stack.enter_context(
                    connect_admin(
                        request.server,
                        request.admin_token,
                        tls_ca=request.tls_ca,
                        identity=identity,
                    )
                )

                async def advance_round(query_id: str) -> pb.Query:
                    return await asyncio.to_thread(admin.advance, query_id)

                advance = advance_round
            async with open_aio_channel(
                request.server, request.tls_ca, identity=identity
            ) as channel:
                try:
                    query = await pb_grpc.CollectorStub(channel).GetQuery(
                        pb.GetQueryRequest(query_id=request.query_id),
                        timeout=self.config.retry.rpc_timeout,
                    )
                except grpc.aio.AioRpcError as error:
                    if error.code() != grpc.StatusCode.UNIMPLEMENTED:
                        raise
                    # A leader of two aggregators: the query is a secure one.
                    return await self.run_secure(channel)
                self.state = default_state_path(request, query)
                fleet = build_fleet(request, self.rng, self.state)
                self.fleet = fleet
                self.check_locations(QueryInfo.from_proto(query), fleet)
                with fleet_progress(
                    f"{request.query_id} ({request.mode})", enabled=request.progress
                ) as bar:
                    return await run_query(
                        channel,
                        fleet,
                        request.query_id,
                        self.config,
                        self.rng,
                        advance=advance,
                        progress=bar,
                    )

    async def run_secure(self, channel: grpc.aio.Channel) -> FleetResult:
        """The fleet against a leader: each device seals every round's answers into one
        upload (`--advance` changes nothing: there is no round to advance)."""
        from client.secure_admin import as_query
        from client.secure_fleet import run_secure_query
        from client.secure_keys import helper_config_of
        from ldpcollect.v1 import secure_pb2 as spb
        from ldpcollect.v1 import secure_pb2_grpc as spb_grpc

        request = self.request
        helper = await asyncio.to_thread(
            helper_config_of,
            request.helper,
            request.helper_config,
            request.helper_tls_ca,
            ClientIdentity.from_environment(),
        )
        query = await spb_grpc.SecureCollectorStub(channel).GetSecureQuery(
            spb.GetSecureQueryRequest(query_id=request.query_id),
            timeout=self.config.retry.rpc_timeout,
        )
        as_trusted = as_query(query)
        self.state = default_state_path(request, as_trusted)
        fleet = build_fleet(request, self.rng, self.state)
        self.fleet = fleet
        self.check_locations(QueryInfo.from_proto(as_trusted), fleet)
        with fleet_progress(f"{request.query_id} (seal + upload)", enabled=request.progress) as bar:
            return await run_secure_query(
                channel, fleet, query, helper, self.config, self.rng, progress=bar
            )

    def check_locations(self, info: QueryInfo, fleet: FleetState) -> None:
        problem = location_problem(self.request, info, fleet)
        if problem is None:
            return
        if self.request.csv is None:  # a simulated city: the person chose it, a warning
            self.warn.print(f"warning: {problem}")
            return
        if self.request.send_anyway:
            self.warn.print(f"warning: {problem} (sending anyway: --send-anyway)")
            return
        self.fleet = None  # nothing sent: keep no state of this fleet
        raise LocationsRefused(
            "--csv",
            str(self.request.csv),
            "locations that fall in the query's targets",
            f"nothing was sent: {problem}; --send-anyway sends them regardless",
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
