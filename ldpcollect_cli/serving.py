"""`ldpcollect serve`: the aggregator in the foreground, announcing the address it bound."""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import dataclass
from pathlib import Path

from aggregator.config import AggregatorConfig
from aggregator.server import AggregatorServer, ensure_port_free, run, transport_name
from ldpcollect.errors import ParameterError
from ldpcollect_cli.store_command import is_postgres_url

READY_PREFIX = "ldpcollect aggregator serving on "


@dataclass(frozen=True)
class ServeSettings:
    db: Path
    listen: str
    admin_token: str
    metrics_port: int | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    max_inflight_reports: int = 200_000
    max_streams: int = 1_000
    stream_idle_timeout_s: float = 30.0
    reflection: bool = False
    token_directory: Path | None = None
    token_verify_processes: int = 0
    store: str | None = None
    store_pool_size: int = 4
    budget: tuple[float, float, str] | None = None  # fixed at start (`serve --budget`)
    require_budget: bool = False  # refuse releases while no budget is set (no --no-budget)


def serve_blocking(settings: ServeSettings) -> None:
    """Serve until SIGINT/SIGTERM. Prints one line `serving on host:port` once listening, so a
    caller that asked for port 0 learns the port; warns on stderr when a plaintext port is
    reachable beyond this machine, and says so when the database file is new."""
    if not settings.admin_token:
        raise ParameterError(
            "admin token", "", "a non-empty token (--admin-token or LDPCOLLECT_ADMIN_TOKEN)"
        )
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise ParameterError(
            "--tls-cert/--tls-key",
            (settings.tls_cert, settings.tls_key),
            "both PEM files (certificate and its private key) or neither",
        )
    if settings.store is not None and not is_postgres_url(settings.store):
        raise ParameterError(
            "--store", settings.store, "a PostgreSQL URL: postgresql://USER@HOST:PORT/DB"
        )
    if settings.tls_client_ca is not None and settings.tls_cert is None:
        raise ParameterError(
            "--tls-client-ca",
            str(settings.tls_client_ca),
            "used together with --tls-cert/--tls-key (mutual TLS is TLS first)",
        )
    config = AggregatorConfig(
        db_path=settings.db,
        admin_token=settings.admin_token,
        listen=settings.listen,
        metrics_port=settings.metrics_port,
        tls_cert=settings.tls_cert,
        tls_key=settings.tls_key,
        tls_client_ca=settings.tls_client_ca,
        max_inflight_reports=settings.max_inflight_reports,
        max_streams=settings.max_streams,
        stream_idle_timeout_s=settings.stream_idle_timeout_s,
        reflection_admin=settings.reflection,
        token_directory=settings.token_directory,
        token_verify_processes=settings.token_verify_processes,
        store_url=settings.store,
        store_pool_size=settings.store_pool_size,
        budget=settings.budget,
        require_budget=settings.require_budget,
    )
    warning = plaintext_warning(config.listen, config.tls)
    if warning is not None:
        sys.stderr.write(f"WARNING: {warning}\n")
        sys.stderr.flush()
    ensure_port_free(config.listen)  # a port in use fails before anything is said or created
    if settings.store is None and not settings.db.exists() and settings.db.parent.is_dir():
        sys.stderr.write(f"note: {settings.db} does not exist; creating a new, empty database\n")
        sys.stderr.flush()
    run(config, on_started=announce)


def is_loopback(listen: str) -> bool:
    """Whether host:port only accepts connections from this machine (127.0.0.0/8, ::1,
    localhost). Wildcards (0.0.0.0, [::], empty host) and other names are not loopback."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plaintext_warning(listen: str, tls: bool) -> str | None:
    """The warning `serve` prints for a plaintext port beyond loopback; None when fine."""
    if tls or is_loopback(listen):
        return None
    return (
        f"listening on {listen} WITHOUT TLS: the admin bearer token and every device report "
        "cross the network in plaintext. Use --tls-cert/--tls-key (deploy/tls/make-dev-certs.sh "
        "makes a test CA and certificate) or listen on 127.0.0.1 behind a TLS proxy."
    )


def announce(server: AggregatorServer, port: int) -> None:
    """The ready line: `ldpcollect aggregator serving on host:port (db ..., metrics ...)`."""
    config = server.config
    host = config.listen.rsplit(":", 1)[0]
    metrics = f", metrics on port {server.metrics_port}" if server.metrics_port else ""
    tls = transport_name(config)
    sys.stdout.write(f"{READY_PREFIX}{host}:{port} ({tls}, db {config.store_name}{metrics})\n")
    sys.stdout.flush()
