"""`ldpcollect serve`: the aggregator in the foreground, announcing the address it bound."""

from __future__ import annotations

import sys
from pathlib import Path

from aggregator.config import AggregatorConfig
from aggregator.server import AggregatorServer, run
from ldpcollect.errors import ParameterError

READY_PREFIX = "ldpcollect aggregator serving on "


def serve_blocking(db: Path, listen: str, admin_token: str, metrics_port: int | None) -> None:
    """Serve until SIGINT/SIGTERM. Prints one line `serving on host:port` once listening, so a
    caller that asked for port 0 learns the port."""
    if not admin_token:
        raise ParameterError(
            "admin token", "", "a non-empty token (--admin-token or LDPCOLLECT_ADMIN_TOKEN)"
        )
    config = AggregatorConfig(
        db_path=db, admin_token=admin_token, listen=listen, metrics_port=metrics_port
    )
    run(config, on_started=announce)


def announce(server: AggregatorServer, port: int) -> None:
    """The ready line: `ldpcollect aggregator serving on host:port (db ..., metrics ...)`."""
    config = server.config
    host = config.listen.rsplit(":", 1)[0]
    metrics = f", metrics on port {server.metrics_port}" if server.metrics_port else ""
    sys.stdout.write(f"{READY_PREFIX}{host}:{port} (db {config.db_path}{metrics})\n")
    sys.stdout.flush()
