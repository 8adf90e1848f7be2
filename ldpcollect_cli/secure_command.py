"""`ldpcollect secure ...`: the operator's and a test fleet's side of secure mode, against a
leader (`ldpcollect serve --role leader`): create a query sealed to the collector's key, upload
simulated devices, set the secure ledger's budget, and release (close, collect both noised
shares, open them with the collector key, debias). Heavy modules load inside the commands, so
`ldpcollect --help` stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from client.channels import open_channel
from ldpcollect.errors import ParameterError
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from ldpcollect_cli.service_errors import guarded
from ldpcollect_cli.service_options import DevicePrefix, EnrollmentKey, Json, Server, TlsCa, Token
from ldpcollect_cli.service_render import ledger_json, print_json

console = Console()
app = typer.Typer(
    help="Secure mode (two aggregators): run against the leader.", no_args_is_help=True
)

CollectorKey = Annotated[
    Path,
    typer.Option(
        "--collector-key",
        envvar="LDPCOLLECT_COLLECTOR_KEY",
        help="The collector's HPKE key file (created, mode 0600, if missing). Aggregate "
        "shares are sealed to it; keep it: without it a release cannot be opened.",
    ),
]
QueryId = Annotated[str, typer.Option("--query", "-q", help="Secure query id.")]
HelperAddress = Annotated[
    str | None,
    typer.Option(
        "--helper",
        help="The helper's HOST:PORT: devices fetch its HPKE key from it (never only from the "
        "leader) and refuse to upload when the leader's copy differs.",
    ),
]
HelperConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--helper-config",
        help="Instead of --helper: the helper's config as its operator publishes it "
        "(DB.hpke-helper.config, one hex line), pinned.",
    ),
]
HelperTlsCa = Annotated[
    Path | None, typer.Option("--helper-tls-ca", help="PEM CA to verify a TLS helper.")
]


def _need(token: str) -> str:
    if not token:
        raise ParameterError("--admin-token", "", "given (or LDPCOLLECT_ADMIN_TOKEN)")
    return token


@app.command("create")
def create(
    mechanism: Annotated[str, typer.Option("--mechanism", help="rr or sp.")],
    targets: Annotated[str, typer.Option("--targets", help="Comma-separated location ids.")],
    flip1: Annotated[str | None, typer.Option("--flip1")] = None,
    flip2: Annotated[str | None, typer.Option("--flip2")] = None,
    sampling_rate: Annotated[str | None, typer.Option("--sampling-rate")] = None,
    min_reports: Annotated[int, typer.Option("--min-reports", min=1)] = 100,
    noise_sigma: Annotated[
        str, typer.Option("--noise-sigma", help="Sigma EACH aggregator adds at release.")
    ] = "",
    query_id: Annotated[str, typer.Option("--query", "-q")] = "",
    require_tokens: Annotated[
        bool,
        typer.Option(
            "--require-tokens",
            help="Every upload must carry an admission token of the issuer both aggregators "
            "accept (both started with --token-directory; docs/admission.md).",
        ),
    ] = False,
    collector_key: CollectorKey = Path("ldpcollect-collector.key"),
    server: Server = "127.0.0.1:50051",
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """Create a secure query at the leader (it provisions the helper)."""

    def work() -> None:
        from client.secure_collector import create_secure_query
        from ldpcollect_cli.service import _mechanism

        mech = _mechanism(mechanism, flip1, flip2, sampling_rate)
        cells = [int(part) for part in targets.split(",") if part.strip()]
        collector = load_or_create_key_pair(collector_key)
        with open_channel(server, tls_ca) as channel:
            query = create_secure_query(
                channel,
                _need(admin_token),
                collector,
                mech,
                cells,
                min_reports,
                noise_sigma,
                query_id,
                require_tokens=require_tokens,
            )
        if json_out:
            print_json(
                {
                    "query_id": query.query_id,
                    "upload_round": query.upload_round,
                    "require_tokens": query.require_tokens,
                    "token_issuer": query.token_issuer,
                    "token_origins": list(query.token_origins),
                }
            )
        else:
            tokens = f", tokens of {query.token_issuer}" if query.require_tokens else ""
            console.print(f"created secure query {query.query_id} ({len(cells)} targets{tokens})")

    guarded(work)


@app.command("simulate")
def simulate(
    query_id: QueryId,
    devices: Annotated[int, typer.Option("--devices", "-n", min=1)] = 100,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    issuer: Annotated[
        str | None,
        typer.Option(
            "--issuer",
            help="host:port of the token issuer, for a query that requires admission tokens "
            "(each simulated device gets its own token).",
        ),
    ] = None,
    enrollment_key: EnrollmentKey = None,
    device_prefix: DevicePrefix = "sim",
    server: Server = "127.0.0.1:50051",
    tls_ca: TlsCa = None,
    helper: HelperAddress = None,
    helper_config: HelperConfigFile = None,
    helper_tls_ca: HelperTlsCa = None,
) -> None:
    """Simulated devices at random targets (or elsewhere) draw, seal and upload once; the
    helper's key comes from the helper (--helper) or its pinned config (--helper-config)."""
    from client.secure_keys import helper_config_of
    from ldpcollect_cli.fleet_command import load_fleet_tokens
    from ldpcollect_cli.secure_simulate import simulate_secure

    guarded(
        lambda: simulate_secure(
            query_id,
            devices,
            seed,
            server,
            tls_ca,
            load_fleet_tokens(issuer, enrollment_key, device_prefix, tls_ca),
            helper_config_of(helper, helper_config, helper_tls_ca),
        )
    )


@app.command("release")
def release(
    query_id: QueryId,
    collector_key: CollectorKey = Path("ldpcollect-collector.key"),
    server: Server = "127.0.0.1:50051",
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """Close, collect both noised shares, open, debias; prints estimates and the views."""
    from ldpcollect_cli.secure_release import print_secure_release

    guarded(
        lambda: print_secure_release(
            query_id, collector_key, _need(admin_token), server, tls_ca, json_out
        )
    )


@app.command("budget")
def budget(
    epsilon: Annotated[float, typer.Option("--epsilon")],
    delta: Annotated[float, typer.Option("--delta")] = 0.0,
    server: Server = "127.0.0.1:50051",
    admin_token: Token = "",
    tls_ca: TlsCa = None,
) -> None:
    """Set the secure ledger's budget (0 removes it); releases beyond it are refused."""

    def work() -> None:
        with open_channel(server, tls_ca) as channel:
            ledger = spb_grpc.SecureAdminStub(channel).SetSecureBudget(
                pb.SetBudgetRequest(epsilon=epsilon, delta=delta),
                metadata=(("authorization", f"Bearer {_need(admin_token)}"),),
                timeout=30,
            )
        print_json(ledger_json(ledger))

    guarded(work)


def register(top: typer.Typer) -> None:
    top.add_typer(app, name="secure")
