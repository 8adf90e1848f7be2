"""One operator command for both kinds of query: the server at `--server` is a trusted
aggregator (the Admin service) or a leader of two aggregators (SecureAdmin). A command asks
the Admin service first; a leader does not serve it (UNIMPLEMENTED), and the same command
then runs its secure form on the same channel. A trusted aggregator pays nothing extra."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import grpc

from client.admin import AdminClient
from client.channels import ClientIdentity, open_channel
from client.secure_admin import SecureAdminClient
from ldpcollect.errors import ParameterError

R = TypeVar("R")
S = TypeVar("S")


def is_unimplemented(error: grpc.RpcError) -> bool:
    code = error.code() if isinstance(error, grpc.Call) else None
    return code == grpc.StatusCode.UNIMPLEMENTED


def _need_token(token: str) -> str:
    if not token:
        raise ParameterError(
            "--admin-token", "", "given", "pass the operator's token, or set LDPCOLLECT_ADMIN_TOKEN"
        )
    return token


def with_either(
    server: str,
    token: str,
    tls_ca: Path | None,
    trusted: Callable[[AdminClient], R],
    secure: Callable[[SecureAdminClient], S],
) -> R | S:
    """`trusted(admin)` against a trusted aggregator, `secure(client)` against a leader."""
    _need_token(token)
    identity = ClientIdentity.from_environment()
    with open_channel(server, tls_ca, identity=identity) as channel:
        try:
            return trusted(AdminClient(channel, token))
        except grpc.RpcError as error:
            if not is_unimplemented(error):
                raise
        return secure(SecureAdminClient(channel, token))


def with_secure(
    server: str, token: str, tls_ca: Path | None, work: Callable[[SecureAdminClient], R]
) -> R:
    """`work(client)` against a leader; a trusted aggregator is refused in words."""
    _need_token(token)
    identity = ClientIdentity.from_environment()
    with open_channel(server, tls_ca, identity=identity) as channel:
        try:
            return work(SecureAdminClient(channel, token))
        except grpc.RpcError as error:
            if not is_unimplemented(error):
                raise
    raise ParameterError(
        "--server",
        server,
        "a leader (`ldpcollect serve --role leader`) for --secure",
        "this server is a trusted aggregator: drop --secure, or point --server at a leader",
    )
