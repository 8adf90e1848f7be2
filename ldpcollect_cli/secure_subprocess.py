"""A leader and a helper as child processes (`ldpcollect serve --role ...`) on loopback and
temporary SQLite files, for the demos and the pilot: both stop when the block ends."""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.secure.sealing import HpkeKeyPair
from ldpcollect_cli.secure_serving import secure_ready_prefix
from ldpcollect_cli.serve_subprocess import serve_subprocess


@contextmanager
def role_subprocess(
    role: str,
    db: Path,
    admin_token: str,
    peer_token: str,
    helper: str | None = None,
    token_directory: Path | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[str]:
    """`ldpcollect serve --role ROLE [EXTRA]` on 127.0.0.1:0; yields its address; stops it."""
    args = ["--role", role, "--db", str(db), "--listen", "127.0.0.1:0", *extra]
    if helper is not None:
        args += ["--helper", helper]
    if token_directory is not None:
        args += ["--token-directory", str(token_directory)]
    env = {"LDPCOLLECT_ADMIN_TOKEN": admin_token, "LDPCOLLECT_PEER_TOKEN": peer_token}
    with serve_subprocess(args, env, secure_ready_prefix(role), f"the {role}") as address:
        yield address


@dataclass(frozen=True)
class Deployment:
    """A helper and a leader on temporary SQLite files, a channel to the leader, the admin
    token and the collector's key."""

    folder: Path
    helper: str
    leader: str
    channel: grpc.Channel
    admin_token: str
    collector: HpkeKeyPair


@contextmanager
def secure_deployment(
    prefix: str, budget: str | None, token_directory: Path | None = None
) -> Iterator[Deployment]:
    """`budget`: the leader's `serve --budget` (EPS,DELTA[,FILTER]), None for `--no-budget`
    (a benchmark that publishes nothing); `token_directory`: both roles accept that issuer's
    tokens."""
    budget_args = ("--no-budget",) if budget is None else ("--budget", budget)
    admin, peer = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    tokens = token_directory
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        folder = Path(tmp)
        collector = load_or_create_key_pair(folder / "collector.key")
        with (
            role_subprocess("helper", folder / "helper.db", admin, peer, None, tokens) as helper,
            role_subprocess(
                "leader", folder / "leader.db", admin, peer, helper, tokens, budget_args
            ) as leader,
            grpc.insecure_channel(leader) as channel,
        ):
            yield Deployment(folder, helper, leader, channel, admin, collector)
