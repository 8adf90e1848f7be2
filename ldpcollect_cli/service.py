"""Commands: query create|list|show|advance|close|delete, fleet run, release, demo (and `serve` from
`serve_command`, the ledger commands from `ledger_command`).

Every command that prints results takes `--json`. gRPC failures print the status code and the
server's message and exit 1 (no traceback); bad parameters exit 2 naming the parameter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from client.admin import AdminClient
from client.secure_admin import SecureAdminClient
from ldpcollect import geo, wire
from ldpcollect.errors import ParameterError
from ldpcollect.geo import h3cells
from ldpcollect.mechanisms import Mechanism, mechanism_from_params
from ldpcollect.rational import parse_rational_text
from ldpcollect.release_noise import NOISE_SIGMA_RANGE, validate_noise_sigma
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect_cli import ledger_command, release_command, serve_command
from ldpcollect_cli.query_kinds import with_either, with_secure
from ldpcollect_cli.service_errors import guarded
from ldpcollect_cli.service_options import (
    DEFAULT_COLLECTOR_KEY,
    DEFAULT_SERVER,
    CollectorKey,
    DevicePrefix,
    EnrollmentKey,
    HelperAddress,
    HelperConfigFile,
    HelperTlsCa,
    Json,
    Server,
    TlsCa,
    Token,
)
from ldpcollect_cli.service_render import (
    print_json,
    queries_table,
    query_json,
    secure_query_json,
    trusted_sp_warning,
)

console = Console()
stderr_console = Console(stderr=True)

QueryId = Annotated[str, typer.Option("--query", "-q", help="Query id.")]


def _parse_floats(text: str, parameter: str, count: int) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        values = ()
    if len(values) != count:
        raise ParameterError(parameter, text, f"{count} comma-separated numbers")
    return values


def _parse_targets(text: str, scheme: geo.LocationScheme) -> list[int]:
    """Comma-separated cell ids: grid ids as integers, H3 cells as hex (or decimal)."""
    return [scheme.parse_cell(part, "--targets") for part in text.split(",") if part.strip()]


# ---------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------
query_app = typer.Typer(
    help="Create and manage queries (operator, Admin RPCs).", no_args_is_help=True
)


@query_app.command("create")
def query_create(
    mechanism: Annotated[str, typer.Option("--mechanism", help="rr or sp.")],
    flip1: Annotated[str | None, typer.Option("--flip1", help="RR: P(truthful), (0,1].")] = None,
    flip2: Annotated[str | None, typer.Option("--flip2", help="RR: P(Yes) otherwise.")] = None,
    sampling_rate: Annotated[
        str | None, typer.Option("--sampling-rate", help="SP: sampling rate s, (0,1].")
    ] = None,
    targets: Annotated[
        str | None,
        typer.Option(
            "--targets",
            help="Comma-separated location ids: grid ids, or H3 cells in hex (891fb46741bffff).",
        ),
    ] = None,
    bbox: Annotated[
        str | None, typer.Option("--bbox", help="south,west,north,east: every cell in the box.")
    ] = None,
    h3_parent: Annotated[
        str | None,
        typer.Option(
            "--h3-parent",
            help="H3 region: every child (at --scheme's resolution) of "
            "this coarser cell (hex, e.g. 851fb467fffffff).",
        ),
    ] = None,
    h3_disk: Annotated[
        str | None,
        typer.Option("--h3-disk", help="H3 region: CELL,K = every cell within K steps of CELL."),
    ] = None,
    scheme: Annotated[str, typer.Option("--scheme", help="grid or h3:<resolution>.")] = "grid",
    min_reports: Annotated[
        int,
        typer.Option(
            "--min-reports",
            min=1,
            help="Devices that must answer every round before the query can be released. "
            "For randomized response it also sets the public's epsilon (count level: the "
            "others' random answers hide each device; more reports, smaller epsilon; assumes "
            "honest devices, see --require-tokens). `ldpcollect privacy plan` finds it.",
        ),
    ] = 1,
    noise_sigma: Annotated[
        str | None,
        typer.Option(
            "--noise-sigma",
            help="Discrete Gaussian release noise sigma, in [1/10, 1000] (omit for none).",
        ),
    ] = None,
    require_tokens: Annotated[
        bool,
        typer.Option(
            "--require-tokens",
            help="Accept a report only with a fresh admission token bound to this query and "
            "round (the aggregator needs --token-directory); see docs/admission.md.",
        ),
    ] = False,
    allow_no_privacy: Annotated[
        bool,
        typer.Option(
            "--allow-no-privacy",
            help="Allow parameters without any privacy (RR flip1=1 or flip2 0 or 1, SP "
            "sampling rate 1); refused otherwise. The ledger records it.",
        ),
    ] = False,
    accept_box: Annotated[
        bool,
        typer.Option(
            "--accept-box",
            help="Create the query even when the --bbox looks given longitude first (all "
            "water, but land read the other way) or lies far from the last CSV fleet's points.",
        ),
    ] = False,
    query_id: Annotated[str, typer.Option("--id", help="Query id (server picks if empty).")] = "",
    description: Annotated[
        str, typer.Option("--description", help="Free text shown with the query (its purpose).")
    ] = "",
    secure: Annotated[
        bool,
        typer.Option(
            "--secure",
            help="Two aggregators (--server is the leader): devices seal secret shares, neither "
            "aggregator sees an answer, each adds --noise-sigma at release; the shares are "
            "sealed to --collector-key (docs/secure-mode.md).",
        ),
    ] = False,
    collector_key: CollectorKey = DEFAULT_COLLECTOR_KEY,
    server: Server = DEFAULT_SERVER,
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """Create a query: mechanism, location scheme and targets (a list, a bounding box or an H3
    region); with --secure, at a leader of two aggregators."""

    def work() -> None:
        mech = _mechanism(mechanism, flip1, flip2, sampling_rate)
        target_list = _targets(scheme, targets, bbox, h3_parent, h3_disk)
        if bbox is not None:
            _check_box(bbox, len(target_list), scheme, accept_box)
        sigma = None
        if noise_sigma is not None:
            option = "--noise-sigma"
            sigma = parse_rational_text(option, noise_sigma, NOISE_SIGMA_RANGE)
            validate_noise_sigma(sigma, option)
        options: dict[str, Any] = {
            "query_id": query_id,
            "description": description,
            "min_reports": min_reports,
            "noise_sigma": sigma,
            "allow_no_privacy": allow_no_privacy,
            "require_tokens": require_tokens,
        }
        if secure:
            from ldpcollect.secure.key_file import load_or_create_key_pair

            collector = load_or_create_key_pair(collector_key)
            created = with_secure(
                server,
                admin_token,
                tls_ca,
                lambda client: client.create_query(
                    collector, mech, wire.scheme_from_text(scheme), target_list, **options
                ),
            )
            _print_queries([created], json_out, single=True)
            return
        query = with_either(
            server,
            admin_token,
            tls_ca,
            lambda admin: admin.create_query(mech, scheme, target_list, **options),
            _leader_needs_secure,
        )
        _print_queries([query], json_out, single=True)
        if mech.name == "sp":
            stderr_console.print(trusted_sp_warning(query.query_id, mech.params()["sampling_rate"]))

    guarded(work)


def _leader_needs_secure(client: SecureAdminClient) -> pb.Query:
    raise ParameterError(
        "--secure",
        False,
        "given to create a query at a leader",
        "this server is the leader of two aggregators: add --secure (and --collector-key)",
    )


def _print_queries(
    queries: Sequence[pb.Query | spb.SecureQuery], json_out: bool, single: bool = False
) -> None:
    """Both kinds alike: a table, or JSON (one object with `single`, else a list)."""
    if not json_out:
        console.print(queries_table(queries))
        return
    data = [
        secure_query_json(q) if isinstance(q, spb.SecureQuery) else query_json(q) for q in queries
    ]
    print_json(data[0] if single else data)


def _no_secure_delete(client: SecureAdminClient) -> Any:
    raise ParameterError(
        "--query",
        "a secure query",
        "a query of a trusted aggregator",
        "this server is the leader of two aggregators, whose queries cannot be deleted before "
        "their release yet: close it and create a new query instead (nothing is released or "
        "charged until `ldpcollect release`)",
    )


def _check_box(text: str, cells: int, scheme: str, accept: bool) -> None:
    """Print the box as understood; refuse one that looks given longitude first."""
    from ldpcollect_cli.box_check import Box, box_problem, describe

    box = Box(*_parse_floats(text, "--bbox", 4))
    notes = Console(stderr=True)
    notes.print(describe(box, cells, scheme), soft_wrap=True)
    problem = box_problem(box)
    if problem is None:
        return
    if accept:
        notes.print(f"warning: {problem.reason} (creating it anyway: --accept-box)", soft_wrap=True)
        return
    raise ParameterError(
        "--bbox",
        text,
        "south,west,north,east (latitude first)",
        f"it does not look like the box meant: {problem.reason}; nothing was created. "
        + (
            f"Given longitude first? Latitude first it reads "
            f"{box.west:g},{box.south:g},{box.east:g},{box.north:g}. "
            if problem.swapped is not None
            else "A query for another place than the last fleet's? "
        )
        + "--accept-box creates it as given",
    )


def _mechanism(
    name: str, flip1: str | None, flip2: str | None, sampling_rate: str | None
) -> Mechanism:
    if name == "rr":
        if flip1 is None or flip2 is None:
            raise ParameterError("--flip1/--flip2", (flip1, flip2), "both given for rr")
        return mechanism_from_params("rr", {"flip1": flip1, "flip2": flip2})
    if name == "sp":
        if sampling_rate is None:
            raise ParameterError("--sampling-rate", None, "(0, 1], required for sp")
        return mechanism_from_params("sp", {"sampling_rate": sampling_rate})
    raise ParameterError("--mechanism", name, "rr or sp")


def _targets(
    scheme: str,
    targets: str | None,
    bbox: str | None,
    h3_parent: str | None = None,
    h3_disk: str | None = None,
) -> list[int]:
    given = {"--targets": targets, "--bbox": bbox, "--h3-parent": h3_parent, "--h3-disk": h3_disk}
    chosen = [name for name, value in given.items() if value is not None]
    if len(chosen) != 1:
        raise ParameterError("/".join(given), chosen, "exactly one of them")
    location_scheme = geo.scheme_from_text(scheme)
    if targets is not None:
        return _parse_targets(targets, location_scheme)
    if bbox is not None:
        south, west, north, east = _parse_floats(bbox, "--bbox", 4)
        return list(location_scheme.targets_in_bbox(south, west, north, east))
    if not isinstance(location_scheme, geo.H3Scheme):
        raise ParameterError("--scheme", scheme, "h3:<resolution> when an H3 region is given")
    if h3_parent is not None:
        return list(location_scheme.targets_in_parent(_parse_h3_cell(h3_parent, "--h3-parent")))
    assert h3_disk is not None
    cell_text, sep, k_text = h3_disk.partition(",")
    if not sep or not k_text.strip().isdigit():
        raise ParameterError("--h3-disk", h3_disk, "CELL,K with K a whole number >= 0")
    cell = _parse_h3_cell(cell_text, "--h3-disk")
    return list(location_scheme.targets_in_disk(cell, int(k_text)))


def _parse_h3_cell(text: str, option: str) -> int:
    """An H3 cell as its usual 15-character hex string (or a decimal 64-bit integer)."""
    return h3cells.from_text(text, option)


@query_app.command("list")
def query_list(
    server: Server = DEFAULT_SERVER,
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """Every query and its state (at a leader: its secure queries)."""

    def work() -> None:
        queries: Sequence[pb.Query | spb.SecureQuery] = with_either(
            server,
            admin_token,
            tls_ca,
            lambda admin: admin.list_queries(),
            lambda client: client.list_queries(),
        )
        _print_queries(queries, json_out)

    guarded(work)


def _secure_action(action: str, query_id: str) -> Callable[[SecureAdminClient], spb.SecureQuery]:
    def call(client: SecureAdminClient) -> spb.SecureQuery:
        if action == "advance":
            raise ParameterError(
                "query advance",
                query_id,
                "a trusted query",
                f"{query_id} is a secure query: each device answers every round at once and "
                "uploads one sealed report (a Sampling Privacy pair: both rounds, drawn once), "
                "so there is no round to advance; close it once the devices are done",
            )
        return client.close(query_id) if action == "close" else client.get_query(query_id)

    return call


def _one(
    action: str,
) -> Callable[[str, str, str, Path | None, bool], None]:
    def command(
        query: QueryId,
        server: Server = DEFAULT_SERVER,
        admin_token: Token = "",
        tls_ca: TlsCa = None,
        json_out: Json = False,
    ) -> None:
        def work() -> None:
            def call(admin: AdminClient) -> pb.Query:
                method = {"show": admin.get_query, "advance": admin.advance, "close": admin.close}
                return method[action](query)

            result: pb.Query | spb.SecureQuery = with_either(
                server, admin_token, tls_ca, call, _secure_action(action, query)
            )
            _print_queries([result], json_out, single=True)

        guarded(work)

    command.__doc__ = {
        "show": "Show one query.",
        "advance": "Advance a query to its next round (trusted SP: round 1 -> 2; a secure "
        "query has one upload and nothing to advance).",
        "close": "Close a query: no more reports; it can then be released.",
    }[action]
    return command


for _action in ("show", "advance", "close"):
    query_app.command(_action)(_one(_action))


@query_app.command("delete")
def query_delete(
    query: QueryId,
    yes: Annotated[
        bool, typer.Option("--yes", help="Delete without asking (needed when not at a terminal).")
    ] = False,
    server: Server = DEFAULT_SERVER,
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """Delete a query that has not been released, with every report it holds (undo a bad run:
    nothing was released, so nothing is charged). A released query is refused."""

    def work() -> None:
        if not yes:
            if not sys.stdin.isatty():
                raise ParameterError(
                    "--yes", False, "given to delete without a terminal to confirm at"
                )
            typer.confirm(f"Delete query {query} and every report it holds?", abort=True)
        done = with_either(
            server, admin_token, tls_ca, lambda admin: admin.delete(query), _no_secure_delete
        )
        if json_out:
            print_json({"deleted": query_json(done.query), "reports_deleted": done.reports_deleted})
            return
        console.print(
            f"deleted query {query} and its {done.reports_deleted:,} reports; it was never "
            "released, so nothing was charged to the privacy ledger. The id is free: "
            f"`ldpcollect query create --id {query} ...` makes it again"
        )

    guarded(work)


# ---------------------------------------------------------------------------------------------
fleet_app = typer.Typer(
    help="Simulated device fleets through the real gRPC service.", no_args_is_help=True
)


@fleet_app.command("run")
def fleet_run(
    query: QueryId,
    devices: Annotated[
        int | None,
        typer.Option(
            "--devices",
            "-n",
            min=1,
            max=10_000_000,
            help="Simulated devices around --center (default 1000); ignored with --csv, which "
            "has one device per row.",
        ),
    ] = None,
    mode: Annotated[str, typer.Option("--mode", help="unary, stream or batch.")] = "batch",
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=10_000)] = 8,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, max=100_000)] = 500,
    csv: Annotated[
        Path | None,
        typer.Option(
            "--csv",
            help="Device locations: lat,lon rows (header optional; a device_id column names "
            "the devices, else each row's content does). The same rows and --seed are the "
            "same devices: a rerun, or a corrected file, is deduplicated, never recounted.",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Seed for locations and answers; with --csv it also names the devices."
        ),
    ] = None,
    center: Annotated[
        str, typer.Option("--center", help="lat,lon of the simulated city.")
    ] = f"{geo.DEFAULT_CENTER[0]},{geo.DEFAULT_CENTER[1]}",
    state: Annotated[
        Path | None,
        typer.Option(
            "--state",
            help="Fleet state file (one .npz): reuse draws and report ids. A simulated fleet "
            "on a two-round (SP) query without --advance keeps one in the state folder "
            "($LDPCOLLECT_STATE_DIR, default ~/.local/state/ldpcollect) by default.",
        ),
    ] = None,
    fleet_key: Annotated[
        Path | None,
        typer.Option(
            "--fleet-key",
            help="The operator's secret that keys a CSV's device names per query (created on "
            "first use; default fleet.key in the state folder). Copy it to rerun elsewhere.",
        ),
    ] = None,
    send_anyway: Annotated[
        bool,
        typer.Option(
            "--send-anyway",
            help="Send even when the locations look swapped (lat/lon) or mostly fall outside "
            "the query's targets; refused by default, before anything is sent.",
        ),
    ] = False,
    device_budget: Annotated[
        float | None, typer.Option("--device-budget", help="Each device's local epsilon budget.")
    ] = None,
    device_budget_delta: Annotated[
        float,
        typer.Option("--device-budget-delta", help="Each device's delta budget (SP costs (0, s))."),
    ] = 0.0,
    advance: Annotated[
        bool,
        typer.Option(
            "--advance",
            help="Answer every round, advancing the query between them (needs the admin token). "
            "A Sampling Privacy query has two rounds: without --advance, run `query advance` "
            "and then this command again.",
        ),
    ] = False,
    progress: Annotated[
        bool,
        typer.Option("--progress/--no-progress", help="Progress bars on stderr while sending."),
    ] = True,
    issuer: Annotated[
        str | None,
        typer.Option(
            "--issuer",
            help="host:port of the token issuer, for queries that require admission tokens "
            "(each simulated device gets its own token per round).",
        ),
    ] = None,
    enrollment_key: EnrollmentKey = None,
    device_prefix: DevicePrefix = "sim",
    helper: HelperAddress = None,
    helper_config: HelperConfigFile = None,
    helper_tls_ca: HelperTlsCa = None,
    server: Server = DEFAULT_SERVER,
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """Send a simulated fleet's reports for the query's current round (with --advance: for
    every round). Devices are simulated around --center, or read from --csv."""
    from ldpcollect_cli.fleet_command import FleetRequest, run_fleet_command

    request = FleetRequest(
        query_id=query,
        devices=devices,
        mode=mode,
        concurrency=concurrency,
        batch_size=batch_size,
        csv=csv,
        seed=seed,
        center=center,
        state=state,
        device_budget=device_budget,
        device_budget_delta=device_budget_delta,
        advance=advance,
        progress=progress,
        server=server,
        admin_token=admin_token,
        tls_ca=tls_ca,
        json_out=json_out,
        issuer=issuer,
        enrollment_key=enrollment_key,
        device_prefix=device_prefix,
        helper=helper,
        helper_config=helper_config,
        helper_tls_ca=helper_tls_ca,
        fleet_key=fleet_key,
        send_anyway=send_anyway,
    )
    guarded(lambda: run_fleet_command(request, console))


# ---------------------------------------------------------------------------------------------
def demo(
    devices: Annotated[
        int | None,
        typer.Option(
            "--devices",
            "-n",
            min=100,
            max=1_000_000,
            help="Simulated devices (default 4,000; --secure: 20,000).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed")] = 2024,
    mode: Annotated[str, typer.Option("--mode", help="unary, stream or batch.")] = "batch",
    top: Annotated[int, typer.Option("--top", min=1, max=100, help="Busiest cells shown.")] = 10,
    postprocess: Annotated[
        str | None,
        typer.Option(
            "--postprocess",
            help="Also report the error of the estimates made non-negative: clip or norm-sub.",
        ),
    ] = None,
    maps: Annotated[
        Path | None,
        typer.Option("--maps", help="Folder for each release's map (PNG and HTML, with truth)."),
    ] = None,
    tokens: Annotated[
        bool,
        typer.Option(
            "--tokens",
            help="Device admission too: run a token issuer, require tokens in every query and "
            "enroll the simulated devices (about 5 blind signatures per device, 2 with "
            "--secure: use -n 500).",
        ),
    ] = False,
    json_out: Json = False,
    secure: Annotated[
        bool,
        typer.Option(
            "--secure",
            help="Secure mode: a leader and a helper (separate processes); devices seal "
            "secret shares; each aggregator adds noise (docs/secure-mode.md).",
        ),
    ] = False,
) -> None:
    """End to end: RR at a trusted aggregator, SP on two aggregators (leader and helper), one
    simulated fleet, releases beside the truth, stop. --secure: RR on two aggregators too."""
    from ldpcollect_cli.demo import DEMO_DEVICES, DemoSettings, run_demo

    if secure:
        from ldpcollect_cli.secure_demo import (
            SECURE_DEMO_DEVICES,
            SecureDemoSettings,
            run_secure_demo,
        )

        secure_settings = SecureDemoSettings(
            devices=devices or SECURE_DEMO_DEVICES,
            seed=seed,
            top=top,
            json_out=json_out,
            tokens=tokens,
        )
        guarded(lambda: run_secure_demo(secure_settings, console))
        return

    settings = DemoSettings(
        devices=devices or DEMO_DEVICES,
        seed=seed,
        mode=mode,
        top=top,
        json_out=json_out,
        postprocess=postprocess,
        maps=maps,
        tokens=tokens,
    )
    guarded(lambda: run_demo(settings, console))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("serve")(serve_command.serve)
    app.add_typer(query_app, name="query")
    app.add_typer(fleet_app, name="fleet")
    app.command("release")(release_command.release)
    ledger_command.register(app)
    app.command("demo")(demo)
