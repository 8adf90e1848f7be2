"""The aggregator's gRPC server: Collector + Admin, health, reflection and metrics.

    server = AggregatorServer(AggregatorConfig(db_path=..., admin_token=..., listen="127.0.0.1:0"))
    port = await server.start()
    ...
    await server.stop(grace=1.0)

`run(config, on_started=...)` is the blocking entry point for `ldpcollect serve` (stops cleanly on
SIGINT and SIGTERM; `on_started(server, port)` is called once it is listening).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer as AsyncHealthServicer
from grpc_reflection.v1alpha import reflection

from aggregator.config import AggregatorConfig
from aggregator.edge import EdgeGate, server_options
from aggregator.metrics import AggregatorMetrics
from aggregator.redemption import Redeemer, TokenKeys
from aggregator.release import release_function
from aggregator.role_limits import trusted_limits
from aggregator.rpc_handlers import add_services
from aggregator.service import AdminService, CollectorService
from aggregator.store.base import Store
from aggregator.store.sqlite import SqliteStore
from aggregator.until_signal import serve_until_signal
from ldpcollect.v1 import ldpcollect_pb2 as pb

log = logging.getLogger(__name__)

SERVICE_NAMES = tuple(s.full_name for s in pb.DESCRIPTOR.services_by_name.values())
COLLECTOR_SERVICE = pb.DESCRIPTOR.services_by_name["Collector"].full_name
ADMIN_SERVICE = pb.DESCRIPTOR.services_by_name["Admin"].full_name


def reflected_services(config: AggregatorConfig) -> tuple[str, ...]:
    """What reflection lists: the Collector and health to anyone; the Admin service only when
    the operator asks (`serve --reflection`), so a scan does not advertise it."""
    admin = (ADMIN_SERVICE,) if config.reflection_admin else ()
    return (COLLECTOR_SERVICE, *admin, health.SERVICE_NAME, reflection.SERVICE_NAME)


def _read_pem(path: str | Path, what: str, marker: bytes) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise OSError(f"cannot read the TLS {what} {path}: {exc.strerror or exc}") from exc
    if marker not in data:
        raise OSError(f"the TLS {what} {path} is not PEM (no '{marker.decode()}' block)")
    return data


def ensure_port_free(listen: str) -> None:
    """Raise OSError when host:port (port > 0) already has a listener on this machine.

    gRPC would refuse too (SO_REUSEPORT is off), but only after logging a C-core error line;
    checking first keeps the failure to one line that says what to do.
    """
    host_text, _, port_text = listen.rpartition(":")
    host = host_text.strip("[]") or None
    try:
        port = int(port_text)
    except ValueError:
        return  # gRPC's own parser reports the malformed address
    if port == 0:
        return
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {listen}: {exc.strerror}") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise OSError(
                        f"cannot listen on {listen}: the port is in use (another aggregator? "
                        "stop it, or choose another --listen port)"
                    ) from None


def server_credentials(config: AggregatorConfig) -> grpc.ServerCredentials | None:
    """TLS credentials from the config's PEM files (None: plaintext). Unreadable or non-PEM
    files raise OSError naming the file, before anything is bound."""
    if config.tls_cert is None or config.tls_key is None:
        return None
    cert = _read_pem(config.tls_cert, "certificate", b"-----BEGIN CERTIFICATE-----")
    key = _read_pem(config.tls_key, "private key", b"PRIVATE KEY-----")
    if config.tls_client_ca is None:
        return grpc.ssl_server_credentials([(key, cert)])
    client_ca = _read_pem(
        config.tls_client_ca, "client CA certificate", b"-----BEGIN CERTIFICATE-----"
    )
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=True
    )


def transport_name(config: AggregatorConfig) -> str:
    if config.mutual_tls:
        return "mutual TLS"
    return "TLS" if config.tls else "plaintext"


def make_store(config: AggregatorConfig, metrics: AggregatorMetrics) -> Store:
    """The SQLite file of `db_path`, or the PostgreSQL database of `store_url` (imported only
    then, so a SQLite aggregator starts without loading the driver)."""
    if config.store_url is not None:
        from aggregator.store.postgres import PostgresStore

        return PostgresStore(config.store_url, pool_size=config.store_pool_size, observer=metrics)
    return SqliteStore(
        config.db_path,
        max_group_reports=config.max_group_reports,
        group_wait_s=config.group_wait_s,
        synchronous=config.sqlite_synchronous,
        observer=metrics,
    )


class AggregatorServer:
    def __init__(self, config: AggregatorConfig) -> None:
        self.config = config
        self.metrics = AggregatorMetrics()
        self.store = make_store(config, self.metrics)
        self._server: grpc.aio.Server | None = None
        self._redeemer: Redeemer | None = None
        self._health: AsyncHealthServicer | None = None
        self.port: int | None = None
        self.metrics_port: int | None = None

    async def start(self) -> int:
        """Open the store, bind, start serving; returns the bound gRPC port.

        A port in use or unreadable TLS files fail (OSError) before the database is touched.
        """
        ensure_port_free(self.config.listen)
        credentials = server_credentials(self.config)
        directory = self.config.token_directory
        keys = None if directory is None else TokenKeys(directory)
        self._redeemer = Redeemer(self.store, keys, self.config.token_verify_processes)
        redeemer = self._redeemer
        await self.store.open()
        limits = trusted_limits(self.config.max_message_bytes)
        server = grpc.aio.server(
            options=server_options(limits, max(self.config.max_message_bytes, 4 << 20))
        )
        add_services(
            server,
            CollectorService(
                self.store,
                self.metrics,
                self.config.max_batch_reports,
                self.config.stream_chunk_reports,
                self.config.overload_limits,
                redeemer,
            ),
            AdminService(
                self.store, self.config.admin_token, release_function(), redeemer=redeemer
            ),
            EdgeGate(limits),
        )
        self._health = AsyncHealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(reflected_services(self.config), server)
        try:
            if credentials is None:
                port = server.add_insecure_port(self.config.listen)
            else:
                port = server.add_secure_port(self.config.listen, credentials)
        except (RuntimeError, OSError) as exc:
            await self.store.close()
            if isinstance(exc, OSError):
                raise
            raise OSError(f"cannot listen on {self.config.listen}: {exc}") from exc
        await self._redeemer.start()
        await server.start()
        self._server = server
        self.port = port
        serving = health_pb2.HealthCheckResponse.SERVING
        for name in (*SERVICE_NAMES, ""):
            await self._health.set(name, serving)
        if self.config.metrics_port is not None:
            self.metrics_port = self.metrics.serve(self.config.metrics_port)
        log.info(
            "aggregator listening on port %d (%s, db %s)",
            port,
            transport_name(self.config),
            self.config.store_name,
        )
        return port

    async def stop(self, grace: float | None = 1.0) -> None:
        """Refuse new RPCs, let running ones finish (up to `grace` s), then close the store."""
        if self._server is None:
            return
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        await self._server.stop(grace)
        self._server = None
        if self._redeemer is not None:
            await asyncio.to_thread(self._redeemer.close)
        await self.store.close()
        self.metrics.shutdown()

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.wait_for_termination()


StartedHook = Callable[[AggregatorServer, int], None]


def run(config: AggregatorConfig, on_started: StartedHook | None = None) -> None:
    """Serve until SIGINT/SIGTERM, then shut down gracefully (blocking). `on_started(server,
    port)` runs once the server is listening (e.g. to announce the port it bound)."""
    serve_until_signal(lambda: AggregatorServer(config), on_started, grace=5.0)
