"""`ldpcollect serve --role leader|helper`: one of the secure mode's two aggregators in the
foreground, announcing the address it bound."""

from __future__ import annotations

import sys
from pathlib import Path

from aggregator.config import AggregatorConfig
from aggregator.secure.server import LEADER, SecureRoleConfig, SecureServer, run
from aggregator.server import ensure_port_free, transport_name
from ldpcollect.errors import ParameterError
from ldpcollect_cli.serving import ServeSettings, plaintext_warning

ROLES = ("trusted", "leader", "helper")


def secure_ready_prefix(role: str) -> str:
    return f"ldpcollect {role} serving on "


def serve_secure_blocking(
    role: str,
    base: AggregatorConfig,
    helper: str | None,
    peer_token: str,
    helper_tls_ca: Path | None,
    token_directory: Path | None = None,
    origin_name: str = "",
) -> None:
    if not peer_token:
        raise ParameterError(
            "--peer-token",
            "",
            "a non-empty token shared by leader and helper (or LDPCOLLECT_PEER_TOKEN)",
        )
    if role == LEADER:
        if not helper:
            raise ParameterError("--helper", "", "the helper's HOST:PORT (--role leader)")
    elif helper:
        raise ParameterError("--helper", helper, "given only with --role leader")
    warning = plaintext_warning(base.listen, base.tls)
    if warning is not None:
        sys.stderr.write(f"WARNING: {warning}\n")
        sys.stderr.flush()
    ensure_port_free(base.listen)
    config = SecureRoleConfig(
        role,
        base,
        peer_token,
        helper,
        helper_tls_ca,
        token_directory=token_directory,
        origin_name=origin_name,
    )

    def announce(server: SecureServer, port: int) -> None:
        host = base.listen.rsplit(":", 1)[0]
        key = server.key_pair.config.config_id
        metrics = f", metrics on port {server.metrics_port}" if server.metrics_port else ""
        if server.tokens.keys is not None:
            metrics += f", tokens of {server.tokens.issuer_name()}"
        sys.stdout.write(
            f"{secure_ready_prefix(role)}{host}:{port} ({transport_name(base)}, db "
            f"{server.store.path}, HPKE config id {key}{metrics})\n"
        )
        sys.stdout.flush()

    run(config, on_started=announce)


def serve_secure(
    role: str,
    settings: ServeSettings,
    helper: str | None,
    peer_token: str,
    helper_tls_ca: Path | None,
    origin_name: str = "",
) -> None:
    """`serve --role ROLE` with the trusted mode's options (db, listen, tokens, TLS, metrics)."""
    if role not in ROLES[1:]:
        raise ParameterError("--role", role, "trusted, leader or helper")
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise ParameterError(
            "--tls-cert/--tls-key",
            (settings.tls_cert, settings.tls_key),
            "both PEM files (certificate and its private key) or neither",
        )
    if role == LEADER and not settings.admin_token:
        raise ParameterError(
            "admin token", "", "a non-empty token (--admin-token or LDPCOLLECT_ADMIN_TOKEN)"
        )
    base = AggregatorConfig(
        db_path=settings.db,
        # The helper serves no admin RPC; the config wants a token all the same.
        admin_token=settings.admin_token or "unused-by-the-helper",
        listen=settings.listen,
        metrics_port=settings.metrics_port,
        tls_cert=settings.tls_cert,
        tls_key=settings.tls_key,
        tls_client_ca=settings.tls_client_ca,
    )
    serve_secure_blocking(
        role, base, helper, peer_token, helper_tls_ca, settings.token_directory, origin_name
    )
