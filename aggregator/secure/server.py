"""Both roles' gRPC server: `ldpcollect serve --role leader|helper`.

The leader serves SecureCollector (devices) and SecureAdmin (operator) and runs the
aggregation driver against its helper; the helper serves Helper (the leader, peer token) and
enforces its own policy (`helper_policy`). Both serve AggregatorKeys (their own HPKE config,
no token). Each keeps its HPKE key pair in a 0600 file and its state in a SQLite file, both
beside `db_path` (or both in PostgreSQL, `base.store_url`, shared by the role's replicas: see
`pg_store`), and publishes its config beside the key (`DB.hpke-ROLE.config`, one hex
line a device can pin). TLS for the listening port comes from the same flags as the trusted
mode (`tls_client_ca` on the helper requires the leader's client certificate); the leader
reaches a TLS helper with `helper_tls_ca`, presenting `peer_identity` for mutual TLS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer as AsyncHealthServicer

from aggregator.config import AggregatorConfig
from aggregator.edge import EdgeGate, register, server_options
from aggregator.errors import ServiceError
from aggregator.redemption import TokenKeys
from aggregator.release import set_budget_function
from aggregator.role_limits import HELPER_LIMITS, LEADER_LIMITS
from aggregator.secure.admin import LeaderAdmin
from aggregator.secure.aggregation_driver import JOB_REPORTS, AggregationDriver
from aggregator.secure.aggregation_handler import HelperHandler
from aggregator.secure.helper_client import HelperClient
from aggregator.secure.helper_policy import HelperPolicy
from aggregator.secure.key_service import AggregatorKeysService
from aggregator.secure.keys import key_path
from aggregator.secure.metrics import SecureMetrics
from aggregator.secure.services import (
    HelperService,
    SecureAdminService,
    SecureCollectorService,
    require_bearer,
)
from aggregator.secure.store import SecureStore, secure_db_path
from aggregator.secure.store_api import SecureStoreApi
from aggregator.secure.token_check import SecureTokens
from aggregator.secure.upload import LeaderUpload
from aggregator.server import ensure_port_free, server_credentials
from aggregator.until_signal import serve_until_signal
from ldpcollect.errors import ParameterError
from ldpcollect.secure.key_file import public_config_path, write_public_config
from ldpcollect.secure.sealing import HpkeKeyPair
from ldpcollect.targets import channel_target
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.v1 import secure_pb2 as spb

log = logging.getLogger(__name__)

LEADER, HELPER = "leader", "helper"
SECURE_COLLECTOR = spb.DESCRIPTOR.services_by_name["SecureCollector"]
SECURE_ADMIN = spb.DESCRIPTOR.services_by_name["SecureAdmin"]
HELPER_SERVICE = apb.DESCRIPTOR.services_by_name["Helper"]
AGGREGATOR_KEYS = spb.DESCRIPTOR.services_by_name["AggregatorKeys"]
PEER_WHO = "peer (leader-helper)"


@dataclass(frozen=True)
class SecureRoleConfig:
    role: str
    base: AggregatorConfig
    peer_token: str
    helper: str | None = None
    helper_tls_ca: Path | None = None
    batch: int = JOB_REPORTS
    # Admission: the issuer's directory file (both roles need it for token-requiring queries)
    # and this aggregator's name in token challenges (default: the listen host and port).
    token_directory: Path | None = None
    origin_name: str = ""
    # Helper: its own policy, and its own ledger's budget (epsilon, delta; None: keep it).
    policy: HelperPolicy = field(default_factory=HelperPolicy)
    budget: tuple[float, float] | None = None
    # Leader: the budget its releases are charged to (`serve --budget`: epsilon, delta,
    # filter), fixed at start; and whether a release without any budget is refused (unless
    # the ledger records an opt-out), as at the trusted aggregator.
    release_budget: tuple[float, float, str] | None = None
    require_budget: bool = False
    # Leader: the client certificate and key (PEM files) it presents to a mutual-TLS helper.
    peer_identity: tuple[Path, Path] | None = None
    # Helper: where each query it takes part in is recorded for its operator (a line each).
    audit: Callable[[str], None] = log.info
    # A second port serving only AggregatorKeys and health, TLS without client certificates:
    # devices fetch the key there from a helper whose main port requires them.
    public_listen: str | None = None


def secure_store(config: SecureRoleConfig) -> SecureStoreApi:
    """The role's store: PostgreSQL at `base.store_url` (shared by the role's replicas, in a
    schema of the role's own), else the SQLite file beside `base.db_path`."""
    base = config.base
    if base.store_url is not None:
        from aggregator.secure.pg_store import PostgresSecureStore

        return PostgresSecureStore(base.store_url, config.role, base.store_pool_size)
    return SecureStore(secure_db_path(base.db_path))


def origin_name(config: SecureRoleConfig, port: int) -> str:
    if config.origin_name:
        return config.origin_name
    return f"{config.base.listen.rsplit(':', 1)[0]}:{port}"


class SecureServer:
    def __init__(self, config: SecureRoleConfig) -> None:
        if config.role not in (LEADER, HELPER):
            raise ValueError(f"role must be {LEADER} or {HELPER}, got {config.role!r}")
        if config.role == LEADER and not config.helper:
            raise ValueError("a leader needs its helper's address (--helper HOST:PORT)")
        if not config.peer_token:
            raise ValueError("the leader and helper need a shared --peer-token")
        self.config = config
        self.metrics = SecureMetrics()
        self.store = secure_store(config)
        self._key_pair: HpkeKeyPair | None = None
        keys = None if config.token_directory is None else TokenKeys(config.token_directory)
        self.tokens = SecureTokens(keys)
        self._server: grpc.aio.Server | None = None
        self._channel: grpc.aio.Channel | None = None
        self.driver: AggregationDriver | None = None
        self.port: int | None = None
        self.metrics_port: int | None = None
        self._public: grpc.aio.Server | None = None
        self.public_port: int | None = None

    @property
    def key_pair(self) -> HpkeKeyPair:
        """The role's HPKE key pair (loaded at `start`, from the store: every replica of a
        role on PostgreSQL holds the same one)."""
        if self._key_pair is None:
            self._key_pair = self.store.load_key_pair(
                self.config.role, str(self.config.base.db_path)
            )
        return self._key_pair

    def _helper_channel(self) -> grpc.aio.Channel:
        assert self.config.helper is not None
        # Several helper replicas (h1:p1,h2:p2) share the jobs (client-side round_robin); a
        # job whose helper is down is retried on another.
        target, options = channel_target(self.config.helper, "--helper")
        if self.config.helper_tls_ca is None:
            return grpc.aio.insecure_channel(target, options=options)
        ca = Path(self.config.helper_tls_ca).read_bytes()
        if self.config.peer_identity is None:
            credentials = grpc.ssl_channel_credentials(ca)
        else:
            cert, key = (path.read_bytes() for path in self.config.peer_identity)
            credentials = grpc.ssl_channel_credentials(ca, private_key=key, certificate_chain=cert)
        return grpc.aio.secure_channel(target, credentials, options=options)

    async def _fix_budget(self, epsilon: float, delta: float, filter: str) -> None:
        """The leader's `serve --budget`: as the trusted aggregator's (the same budget again
        changes nothing; a store whose filter charged releases under another refuses)."""
        update = set_budget_function(epsilon, delta, filter=filter)
        try:
            await asyncio.to_thread(self.store.update_ledger, update)
        except ServiceError as exc:
            self.store.close()
            raise ParameterError(
                "--budget", f"{epsilon:g},{delta:g}", "the ledger's budget", str(exc)
            ) from exc

    async def start(self) -> int:
        base = self.config.base
        ensure_port_free(base.listen)
        credentials = server_credentials(base)
        self.store.open()
        self._key_pair = await asyncio.to_thread(
            self.store.load_key_pair, self.config.role, str(base.db_path)
        )
        if self.config.role == HELPER and self.config.budget is not None:
            epsilon, delta = self.config.budget
            await asyncio.to_thread(self.store.update_ledger, set_budget_function(epsilon, delta))
        if self.config.role == LEADER and self.config.release_budget is not None:
            await self._fix_budget(*self.config.release_budget)
        write_public_config(
            public_config_path(key_path(base.db_path, self.config.role)), self.key_pair.config
        )
        limits = LEADER_LIMITS if self.config.role == LEADER else HELPER_LIMITS
        server = grpc.aio.server(options=server_options(limits, max_send_bytes=64 << 20))
        gate = EdgeGate(limits)
        named: LeaderAdmin | HelperHandler
        if self.config.role == LEADER:
            self._channel = self._helper_channel()
            helper = HelperClient(self._channel, self.config.peer_token)
            self.driver = AggregationDriver(self.store, helper, self.metrics, self.config.batch)
            upload = LeaderUpload(
                self.store, self.key_pair, self.metrics, self.driver.held, self.tokens
            )
            register(server, SECURE_COLLECTOR, SecureCollectorService(self.store, upload), gate)
            named = LeaderAdmin(
                self.store,
                self.key_pair,
                helper,
                self.tokens,
                require_budget=self.config.require_budget,
            )
            register(
                server,
                SECURE_ADMIN,
                SecureAdminService(named, base.admin_token),
                gate,
                authorize=lambda context: require_bearer(context, base.admin_token, "admin"),
            )
        else:
            named = HelperHandler(
                self.store,
                self.key_pair,
                self.metrics,
                self.tokens,
                policy=self.config.policy,
                audit=self.config.audit,
            )
            peer = self.config.peer_token
            register(
                server,
                HELPER_SERVICE,
                HelperService(named, peer),
                gate,
                authorize=lambda context: require_bearer(context, peer, PEER_WHO),
            )
        register(server, AGGREGATOR_KEYS, self._keys_service(), gate)  # public: no token
        health = AsyncHealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health, server)
        if credentials is None:
            port = server.add_insecure_port(base.listen)
        else:
            port = server.add_secure_port(base.listen, credentials)
        named.origin_name = origin_name(self.config, port)
        await server.start()
        await health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._server, self.port = server, port
        if self.config.public_listen is not None:
            await self._start_public(self.config.public_listen)
        if self.driver is not None:
            self.driver.start()
        if base.metrics_port is not None:
            self.metrics_port = self.metrics.serve(base.metrics_port)
        log.info("secure %s listening on port %d", self.config.role, port)
        return port

    def _keys_service(self) -> AggregatorKeysService:
        policy = self.config.policy if self.config.role == HELPER else None
        return AggregatorKeysService(self.config.role, self.key_pair.config, policy)

    async def _start_public(self, listen: str) -> None:
        """AggregatorKeys and health alone on `listen` (TLS if the main port has it, never
        asking for a client certificate): what a device may call on the helper."""
        ensure_port_free(listen)
        limits = LEADER_LIMITS if self.config.role == LEADER else HELPER_LIMITS
        public = grpc.aio.server(options=server_options(limits))
        register(public, AGGREGATOR_KEYS, self._keys_service(), EdgeGate(limits))
        health = AsyncHealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health, public)
        credentials = server_credentials(replace(self.config.base, tls_client_ca=None))
        if credentials is None:
            self.public_port = public.add_insecure_port(listen)
        else:
            self.public_port = public.add_secure_port(listen, credentials)
        await public.start()
        await health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._public = public

    async def stop(self, grace: float | None = 1.0) -> None:
        if self._public is not None:
            await self._public.stop(grace)
            self._public = None
        if self.driver is not None:
            await self.driver.stop()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self._channel is not None:
            await self._channel.close(None)
        self.store.close()
        self.metrics.shutdown()


StartedHook = Callable[[SecureServer, int], None]


def run(config: SecureRoleConfig, on_started: StartedHook | None = None) -> None:
    """Serve one role until SIGINT/SIGTERM (blocking)."""
    serve_until_signal(lambda: SecureServer(config), on_started, grace=5.0)
