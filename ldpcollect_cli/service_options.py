"""Options every service command shares (server, admin token, --json) and the admin channel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from client.admin import AdminClient, connect_admin
from client.channels import ClientIdentity
from ldpcollect.errors import ParameterError

R = TypeVar("R")

DEFAULT_SERVER = "127.0.0.1:50051"

Server = Annotated[
    str,
    typer.Option("--server", envvar="LDPCOLLECT_SERVER", help="Aggregator address host:port."),
]
Token = Annotated[
    str,
    typer.Option(
        "--admin-token",
        envvar="LDPCOLLECT_ADMIN_TOKEN",
        help="Bearer token for the Admin RPCs (or env LDPCOLLECT_ADMIN_TOKEN).",
    ),
]
TlsCa = Annotated[
    Path | None,
    typer.Option(
        "--tls-ca",
        envvar="LDPCOLLECT_TLS_CA",
        help="PEM CA certificate(s) to verify the aggregator's TLS certificate (or env "
        "LDPCOLLECT_TLS_CA); without it the connection is plaintext.",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
EnrollmentKey = Annotated[
    Path | None,
    typer.Option(
        "--enrollment-key",
        help="The issuer's enrollment key (enrollment.key in its --state-dir): enrolls "
        "the simulated devices as <--device-prefix>-<i>.",
    ),
]
DevicePrefix = Annotated[
    str, typer.Option("--device-prefix", help="Issuer device ids of the simulated devices.")
]


def with_admin(
    server: str, token: str, work: Callable[[AdminClient], R], tls_ca: Path | None = None
) -> R:
    """Run `work` with an AdminClient on a channel to `server` (TLS when `tls_ca` is given;
    closed afterwards)."""
    if not token:
        raise ParameterError(
            "--admin-token",
            "",
            "given",
            "pass the operator's token, or set LDPCOLLECT_ADMIN_TOKEN",
        )
    identity = ClientIdentity.from_environment()
    with connect_admin(server, token, tls_ca=tls_ca, identity=identity) as admin:
        return work(admin)


CollectorKey = Annotated[
    Path,
    typer.Option(
        "--collector-key",
        envvar="LDPCOLLECT_COLLECTOR_KEY",
        help="Secure queries: the collector's HPKE key file (created, mode 0600, if missing). "
        "Both aggregators seal their shares to it at release; keep it: without it a release "
        "cannot be opened.",
    ),
]
DEFAULT_COLLECTOR_KEY = Path("ldpcollect-collector.key")
HelperAddress = Annotated[
    str | None,
    typer.Option(
        "--helper",
        help="Secure queries (--server a leader): the helper's HOST:PORT; devices fetch its HPKE "
        "key from it (never only from the leader) and refuse to upload when the leader's copy "
        "differs.",
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
