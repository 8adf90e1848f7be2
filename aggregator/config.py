"""Aggregator settings (the CLI's `ldpcollect serve` fills these in)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aggregator.overload import OverloadLimits


@dataclass(frozen=True)
class AggregatorConfig:
    db_path: str | Path
    # Bearer token the Admin RPCs require (`authorization: Bearer <token>` metadata).
    admin_token: str
    # host:port; "127.0.0.1:0" binds an ephemeral port (AggregatorServer.start returns it).
    listen: str = "127.0.0.1:50051"
    # Prometheus /metrics port on 127.0.0.1: None = off, 0 = ephemeral.
    metrics_port: int | None = None
    max_batch_reports: int = 10_000
    # gRPC's max receive size: larger messages are refused with RESOURCE_EXHAUSTED.
    max_message_bytes: int = 4 * 1024 * 1024
    # Group commit: at most this many reports per transaction, optionally waiting a moment
    # for more to arrive before committing (0 = commit as soon as the writer is free).
    max_group_reports: int = 50_000
    group_wait_s: float = 0.0
    # FULL keeps "acknowledged only once durable" true across power loss (see store).
    sqlite_synchronous: str = "FULL"
    # Reports a stream hands to the store at a time (they commit in the same groups).
    stream_chunk_reports: int = 1_000
    # Overload (aggregator/overload.py): reports admitted but not yet committed, concurrent
    # report streams, and how long a stream may stay silent before it is ended.
    max_inflight_reports: int = 200_000
    max_streams: int = 1_000
    stream_idle_timeout_s: float = 30.0
    # TLS: PEM server certificate (chain) and private key; both or neither. Without them the
    # port is plaintext (fine on 127.0.0.1; bearer tokens and reports cross a network in clear).
    tls_cert: str | Path | None = None
    tls_key: str | Path | None = None
    # Mutual TLS: PEM CA certificate(s); when set, every client must present a certificate
    # signed by one of them (devices enrolled by the operator, a leader calling its helper).
    tls_client_ca: str | Path | None = None
    # Server reflection lists the Collector (and health); True lists the Admin service too.
    reflection_admin: bool = False
    # Device admission: the token issuer's directory file (JSON, public keys; re-read when it
    # changes). Without it, queries that require tokens cannot be created.
    token_directory: str | Path | None = None
    # Worker processes verifying tokens (0: one worker thread).
    token_verify_processes: int = 0
    # A PostgreSQL URL (postgresql://USER@HOST:PORT/DB) to share with other replicas instead
    # of the SQLite file `db_path`; `store_pool_size` connections per replica.
    store_url: str | None = None
    store_pool_size: int = 4
    # The privacy budget (epsilon, delta, filter: "" for the default) fixed at start
    # (`serve --budget`), and whether releases are refused while no budget is set and none
    # was opted out of.
    budget: tuple[float, float, str] | None = None
    require_budget: bool = False

    @property
    def store_name(self) -> str:
        """Where the state lives, for logs and the ready line (no password)."""
        if self.store_url is None:
            return str(self.db_path)
        from aggregator.store.postgres import shown_url

        return shown_url(self.store_url)

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def overload_limits(self) -> OverloadLimits:
        return OverloadLimits(
            max_inflight_reports=self.max_inflight_reports,
            max_streams=self.max_streams,
            stream_idle_timeout_s=self.stream_idle_timeout_s,
        )

    @property
    def mutual_tls(self) -> bool:
        return self.tls_client_ca is not None

    def __post_init__(self) -> None:
        if not self.admin_token:
            raise ValueError("admin_token must be a non-empty string")
        if self.max_batch_reports < 1:
            raise ValueError(f"max_batch_reports must be >= 1, got {self.max_batch_reports}")
        if self.max_message_bytes < 1024:
            raise ValueError(f"max_message_bytes must be >= 1024, got {self.max_message_bytes}")
        if self.max_group_reports < 1:
            raise ValueError(f"max_group_reports must be >= 1, got {self.max_group_reports}")
        if self.stream_chunk_reports < 1:
            raise ValueError(f"stream_chunk_reports must be >= 1, got {self.stream_chunk_reports}")
        _ = self.overload_limits  # raises ValueError on a bad overload setting
        if self.store_pool_size < 1:
            raise ValueError(f"store_pool_size must be >= 1, got {self.store_pool_size}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError(
                "tls_cert and tls_key must be given together (both PEM files) or not at all, "
                f"got tls_cert={self.tls_cert!r}, tls_key={self.tls_key!r}"
            )
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError(
                "tls_client_ca (mutual TLS) needs the server's own tls_cert and tls_key"
            )
