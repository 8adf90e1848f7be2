"""Running the issuer: bind, serve `ldpcollect.v1.Issuer` and health, publish the directory.

State lives in one folder (mode 0700): `token-key-epoch-<e>.pem` per epoch (0600),
`enrollment.key` (0600) and `quota.sqlite` (0600). With `directory_out`, the public directory
is written there at start and again at every epoch change, for aggregators started with
`serve --token-directory` (it holds public keys only).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer as AsyncHealthServicer

from aggregator.edge import EdgeGate, register, server_options
from aggregator.issuer.epoch_keys import EpochKeys
from aggregator.issuer.quota import QuotaLedger
from aggregator.issuer.service import IssuerService
from aggregator.issuer.signing import Signer
from aggregator.role_limits import ISSUER_LIMITS
from aggregator.server import ensure_port_free
from aggregator.until_signal import serve_until_signal
from ldpcollect.admission.enrollment import load_or_create_key
from ldpcollect.v1 import issuer_pb2 as ipb

ISSUER = ipb.DESCRIPTOR.services_by_name["Issuer"]
ISSUER_SERVICE = ISSUER.full_name


@dataclass(frozen=True)
class IssuerConfig:
    state_dir: Path
    tokens_per_epoch: int
    epoch_seconds: float = 86_400.0
    listen: str = "127.0.0.1:50061"
    # The TokenChallenge issuer_name; empty = the bound host:port.
    issuer_name: str = ""
    directory_out: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # Mutual TLS: devices present a certificate from this CA and are identified by it (no
    # enrollment secret needed; secrets still work).
    tls_client_ca: Path | None = None
    # Worker processes signing (0: one worker thread); signing scales with them.
    sign_processes: int = 0


def enrollment_key_path(state_dir: Path) -> Path:
    return state_dir / "enrollment.key"


class IssuerServer:
    def __init__(self, config: IssuerConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        config.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.keys = EpochKeys(config.state_dir, config.epoch_seconds, clock)
        self._server: grpc.aio.Server | None = None
        self._publisher: asyncio.Task[None] | None = None
        self._signer: Signer | None = None
        self.service: IssuerService | None = None
        self.port: int | None = None

    async def start(self) -> int:
        ensure_port_free(self.config.listen)
        quota = QuotaLedger(self.config.state_dir / "quota.sqlite", self.config.tokens_per_epoch)
        enrollment_key = load_or_create_key(enrollment_key_path(self.config.state_dir))
        server = grpc.aio.server(options=server_options(ISSUER_LIMITS))
        if self.config.tls_cert is not None and self.config.tls_key is not None:
            client_ca = self.config.tls_client_ca
            credentials = grpc.ssl_server_credentials(
                [(self.config.tls_key.read_bytes(), self.config.tls_cert.read_bytes())],
                root_certificates=None if client_ca is None else client_ca.read_bytes(),
                require_client_auth=client_ca is not None,
            )
            port = server.add_secure_port(self.config.listen, credentials)
        else:
            port = server.add_insecure_port(self.config.listen)
        host = self.config.listen.rsplit(":", 1)[0]
        name = self.config.issuer_name or f"{host}:{port}"
        self._signer = Signer(self.config.sign_processes)
        await self._signer.start()
        self.service = IssuerService(self.keys, quota, enrollment_key, name, self._signer)
        register(
            server,
            ISSUER,
            self.service,
            EdgeGate(ISSUER_LIMITS),
            authorize=self.service.authenticate,
            public=frozenset({"GetDirectory"}),
        )
        health_servicer = AsyncHealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        await self._publish(self.keys.epoch_now())  # keys exist before anyone can ask
        await server.start()
        for service_name in (ISSUER_SERVICE, ""):
            await health_servicer.set(service_name, health_pb2.HealthCheckResponse.SERVING)
        self._server, self.port = server, port
        self._publisher = asyncio.create_task(self._publish_each_epoch())
        return port

    async def _publish(self, epoch: int) -> None:
        assert self.service is not None
        directory = await asyncio.to_thread(self.keys.directory, self.service.issuer_name, epoch)
        if self.config.directory_out is not None:
            out = self.config.directory_out
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_text(directory.to_json())
            os.replace(tmp, out)

    async def _publish_each_epoch(self) -> None:
        published = self.keys.epoch_now()
        while True:
            await asyncio.sleep(min(self.config.epoch_seconds / 20, 5.0))
            epoch = self.keys.epoch_now()
            if epoch != published:
                await self._publish(epoch)
                published = epoch

    async def stop(self, grace: float | None = 1.0) -> None:
        if self._publisher is not None:
            self._publisher.cancel()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self._signer is not None:
            await asyncio.to_thread(self._signer.close)


def run(config: IssuerConfig, on_started: Callable[[IssuerServer, int], None]) -> None:
    """Serve until SIGINT/SIGTERM (blocking)."""
    serve_until_signal(lambda: IssuerServer(config), on_started, grace=2.0)
