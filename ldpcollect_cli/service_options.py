"""Options every service command shares (server, admin token, --json) and the admin channel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

import grpc
import typer

from client.admin import AdminClient
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
Json = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def with_admin(server: str, token: str, work: Callable[[AdminClient], R]) -> R:
    """Run `work` with an AdminClient on a channel to `server` (closed afterwards)."""
    if not token:
        raise ParameterError(
            "admin token", "", "a non-empty token (--admin-token or LDPCOLLECT_ADMIN_TOKEN)"
        )
    with grpc.insecure_channel(server) as channel:
        return work(AdminClient(channel, token))
