"""Every server role as a real process, described once for the conformance suite
(`test_roles.py`): how to start it in a directory of its own, the services it serves and the
credentials each needs, its edge limits, the SQLite file whose damage it must report, and a
storm of its own calls. A role added later joins `ROLES` with one line."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf.descriptor import ServiceDescriptor

from aggregator.edge import RoleLimits
from aggregator.role_limits import HELPER_LIMITS, ISSUER_LIMITS, LEADER_LIMITS, trusted_limits
from client.loadgen import build_reports
from client.retry import pushback_seconds
from client.secure_collector import create_secure_query
from client.secure_device import SecureDevice, fetch_query
from client.secure_keys import fetch_helper_config
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.sealing import generate_key_pair
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.v1 import aggregation_pb2_grpc as apb_grpc
from ldpcollect.v1 import issuer_pb2 as ipb
from ldpcollect.v1 import issuer_pb2_grpc as ipb_grpc
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from tests.admission.issuer_process import enroll, issuing
from tests.postgres_db import create_database, database_url, drop_database
from tests.secure.roles import ADMIN, PEER, SMALL_BATCHES, Role
from tests.serving import run_cli, spawn_serve

Metadata = tuple[tuple[str, str], ...]
ADMIN_AUTH: Metadata = (("authorization", f"Bearer {ADMIN}"),)
PEER_AUTH: Metadata = (("authorization", f"Bearer {PEER}"),)
# The issuer's device credentials come from an enrollment when it starts (Running).
ISSUER_AUTH: Metadata = ()
COLLECTOR = pb.DESCRIPTOR.services_by_name["Collector"]
ADMIN_SERVICE = pb.DESCRIPTOR.services_by_name["Admin"]
SECURE_COLLECTOR = spb.DESCRIPTOR.services_by_name["SecureCollector"]
SECURE_ADMIN = spb.DESCRIPTOR.services_by_name["SecureAdmin"]
HELPER = apb.DESCRIPTOR.services_by_name["Helper"]
ISSUER = ipb.DESCRIPTOR.services_by_name["Issuer"]
# The trusted roles run with a small in-flight budget, so a storm of a few seconds meets it,
# and a short idle-stream timeout, so the idle check takes seconds.
TRUSTED_ARGS = ("--max-inflight-reports", "300", "--stream-idle-timeout", "2")
QUERY = "conformance"
TARGETS = 8
STORM_SECONDS = 3.0


@dataclass(frozen=True)
class Served:
    """One service of a role; `credentials` are what its protected methods need (None: all
    public), `public` the methods that need none."""

    descriptor: ServiceDescriptor
    credentials: Metadata | None = None
    public: frozenset[str] = frozenset()

    def needs_credentials(self, method: str) -> bool:
        return self.credentials is not None and method not in self.public


@dataclass
class Running:
    address: str
    pid: int
    directory: Path
    # Files the role writes for others to read on purpose (public keys only).
    public_files: frozenset[str] = frozenset()
    # Credentials known only once the role runs (an enrolled device's), by service name.
    credentials: dict[str, Metadata] = field(default_factory=dict)
    state: dict[str, object] = field(default_factory=dict)

    def metadata(self, served: Served, method: str) -> Metadata:
        if not served.needs_credentials(method):
            return ()
        given = self.credentials.get(served.descriptor.full_name, served.credentials)
        assert given is not None
        return given


@dataclass
class StormResult:
    statuses: Counter[str] = field(default_factory=Counter)
    without_hint: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0
    counted: int | None = None  # what the role counted afterwards (None: it counts nothing)


Starter = Callable[[Path, ExitStack], Running]
Storm = Callable[[Running], Coroutine[None, None, StormResult]]


@dataclass(frozen=True)
class RoleSpec:
    name: str
    start: Starter
    services: tuple[Served, ...]
    limits: RoleLimits
    storm: Storm
    # The SQLite file (relative to the role's directory) it must call damaged; None: no file.
    damaged_file: str | None = None

    def __str__(self) -> str:
        return self.name


# --- starting each role ---------------------------------------------------------------------
def _stopped(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _trusted(directory: Path, stack: ExitStack, *store: str) -> Running:
    served = spawn_serve(ADMIN, *store, *TRUSTED_ARGS)
    stack.callback(_stopped, served.proc)
    _create_trusted_query(served.address)
    return Running(served.address, served.proc.pid, directory)


def start_trusted_sqlite(directory: Path, stack: ExitStack) -> Running:
    return _trusted(directory, stack, "--db", str(directory / "trusted.db"))


def start_trusted_postgres(directory: Path, stack: ExitStack) -> Running:
    name = create_database("ldpc_conformance")
    stack.callback(drop_database, name)
    url = database_url(name)
    run_cli(ADMIN, "store", "migrate", "--store", url)
    return _trusted(directory, stack, "--store", url, "--store-pool-size", "2")


def _secure(role: str, directory: Path, stack: ExitStack, helper: str | None = None) -> Role:
    extra = SMALL_BATCHES if role == "helper" else ()
    running = Role(role, directory / f"{role}.db", "127.0.0.1:0", helper=helper, extra=extra)
    running.start()
    stack.callback(running.stop)
    return running


def start_helper(directory: Path, stack: ExitStack) -> Running:
    helper = _secure("helper", directory, stack)
    assert helper.proc is not None
    return Running(helper.address, helper.proc.pid, directory)


def start_leader(directory: Path, stack: ExitStack) -> Running:
    helper_dir = directory / "its-helper"
    helper_dir.mkdir(mode=0o700, exist_ok=True)
    helper = _secure("helper", helper_dir, stack)
    leader = _secure("leader", directory, stack, helper=helper.address)
    assert leader.proc is not None
    running = Running(leader.address, leader.proc.pid, directory)
    collector = generate_key_pair(9)
    mechanism = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})
    with grpc.insecure_channel(leader.address) as channel:
        query = create_secure_query(
            channel, ADMIN, collector, mechanism, list(range(1, TARGETS + 1)), 1, query_id=QUERY
        )
    with grpc.insecure_channel(helper.address) as helper_channel:
        helper_config = fetch_helper_config(helper_channel)
    with grpc.insecure_channel(leader.address) as channel:
        device = SecureDevice(fetch_query(channel, query.query_id), helper_config)
    rng = random.Random(5)
    running.state["reports"] = [
        device.seal_measurement([rng.randrange(2) for _ in range(TARGETS)]) for _ in range(1_500)
    ]
    return running


def start_issuer(directory: Path, stack: ExitStack) -> Running:
    state = directory / "issuer"
    secret = enroll(state, "device-1")["device-1"]
    issuer = stack.enter_context(issuing(state))
    device: Metadata = (("ldpcollect-device", "device-1"), ("authorization", f"Bearer {secret}"))
    return Running(
        issuer.address,
        issuer.proc.pid,
        directory,
        public_files=frozenset({issuer.directory.name}),
        credentials={ISSUER.full_name: device},
    )


def _create_trusted_query(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        pb_grpc.AdminStub(channel).CreateQuery(
            pb.CreateQueryRequest(
                query_id=QUERY,
                mechanism=pb.MechanismSpec(
                    randomized_response=pb.RandomizedResponse(flip1="0.85", flip2="0.3")
                ),
                location_scheme=pb.LocationScheme(grid=pb.GridScheme()),
                targets=list(range(1, TARGETS + 1)),
                min_reports=1,
            ),
            metadata=ADMIN_AUTH,
            timeout=30,
        )


# --- storms ---------------------------------------------------------------------------------
def _note(result: StormResult, err: grpc.aio.AioRpcError) -> None:
    code = err.code().name
    result.statuses[code] += 1
    if pushback_seconds(err) is None:
        result.without_hint[f"{code}: {(err.details() or '')[:120]}"] += 1


async def _loop(result: StormResult, callers: int, call: Callable[[int], Awaitable[int]]) -> None:
    """`callers` coroutines calling `call(i)` back to back for STORM_SECONDS; `call` returns
    how many reports were acknowledged. A refused call waits a little, as a device would
    (not the hint: the storm is meant to keep the pressure on)."""
    deadline = time.monotonic() + STORM_SECONDS
    counter = iter(range(10**9))

    async def caller() -> None:
        while time.monotonic() < deadline:
            try:
                acknowledged = await call(next(counter))
                result.acknowledged += acknowledged
                result.statuses["OK"] += 1
            except grpc.aio.AioRpcError as err:
                _note(result, err)
                await asyncio.sleep(0.02)

    await asyncio.gather(*(caller() for _ in range(callers)))


async def trusted_storm(running: Running) -> StormResult:
    """Unary reports from 1,500 callers, batches of 100 from 40 and streams of 50 from 20, at
    once, against a budget of 300 reports in flight."""
    reports = build_reports(QUERY, TARGETS, 120_000, seed=11)
    result = StormResult()
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = pb_grpc.CollectorStub(channel)

        async def unary(i: int) -> int:
            report = reports[i % 60_000]
            done = await stub.SubmitReport(pb.SubmitReportRequest(report=report), timeout=60)
            return 0 if done.ack.duplicate else 1

        async def batch(i: int) -> int:
            part = reports[60_000 + (i * 100) % 40_000 :][:100]
            done = await stub.SubmitBatch(pb.SubmitBatchRequest(reports=part), timeout=60)
            return int(done.accepted)

        async def stream(i: int) -> int:
            part = reports[100_000 + (i * 50) % 20_000 :][:50]
            done = await stub.StreamReports(
                iter([pb.SubmitReportRequest(report=r) for r in part]), timeout=60
            )
            return int(done.accepted)

        await asyncio.gather(
            _loop(result, 1_500, unary), _loop(result, 40, batch), _loop(result, 20, stream)
        )
        admin = pb_grpc.AdminStub(channel)
        query = await admin.GetQuery(
            pb.GetQueryRequest(query_id=QUERY), metadata=ADMIN_AUTH, timeout=60
        )
        result.counted = int(query.reports_per_round[0]) if query.reports_per_round else 0
    return result


async def leader_storm(running: Running) -> StormResult:
    """Sealed reports, one per upload, from 300 callers, while 6 callers send 7 MiB uploads
    (more than the leader's 32 MiB of requests in flight)."""
    reports = list(running.state["reports"])  # type: ignore[call-overload]
    result = StormResult()
    junk = [bytes(7 << 20)]
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = spb_grpc.SecureCollectorStub(channel)

        async def one(i: int) -> int:
            if i >= len(reports):
                await asyncio.sleep(0.05)
                return 0
            done = await stub.UploadSecureReports(
                spb.UploadSecureReportsRequest(reports=[reports[i]]), timeout=60
            )
            return int(done.accepted)

        async def large(i: int) -> int:
            await stub.UploadSecureReports(spb.UploadSecureReportsRequest(reports=junk), timeout=60)
            return 0

        await asyncio.gather(_loop(result, 300, one), _loop(result, 6, large))
        admin = spb_grpc.SecureAdminStub(channel)
        query = await admin.GetSecureQuery(
            spb.GetSecureQueryRequest(query_id=QUERY), metadata=ADMIN_AUTH, timeout=60
        )
    result.counted = int(query.aggregated_reports + query.pending_reports + query.refused_reports)
    return result


async def _read_storm(
    running: Running, call: Callable[[grpc.aio.Channel], Awaitable[object]]
) -> StormResult:
    """1,000 callers repeating one cheap call (the roles that take no reports)."""
    result = StormResult()
    async with grpc.aio.insecure_channel(running.address) as channel:

        async def one(i: int) -> int:
            await call(channel)
            return 0

        await _loop(result, 1_000, one)
    return result


async def helper_storm(running: Running) -> StormResult:
    return await _read_storm(
        running,
        lambda channel: apb_grpc.HelperStub(channel).GetHpkeConfig(
            apb.GetHpkeConfigRequest(), metadata=PEER_AUTH, timeout=60
        ),
    )


async def issuer_storm(running: Running) -> StormResult:
    return await _read_storm(
        running,
        lambda channel: ipb_grpc.IssuerStub(channel).GetDirectory(
            ipb.GetDirectoryRequest(), timeout=60
        ),
    )


ROLES = (
    RoleSpec(
        "trusted-sqlite",
        start_trusted_sqlite,
        (Served(COLLECTOR), Served(ADMIN_SERVICE, ADMIN_AUTH)),
        trusted_limits(4 << 20),
        trusted_storm,
        "trusted.db",
    ),
    RoleSpec(
        "trusted-postgres",
        start_trusted_postgres,
        (Served(COLLECTOR), Served(ADMIN_SERVICE, ADMIN_AUTH)),
        trusted_limits(4 << 20),
        trusted_storm,
    ),
    RoleSpec(
        "leader",
        start_leader,
        (Served(SECURE_COLLECTOR), Served(SECURE_ADMIN, ADMIN_AUTH)),
        LEADER_LIMITS,
        leader_storm,
        "leader.db.secure",
    ),
    RoleSpec(
        "helper",
        start_helper,
        (Served(HELPER, PEER_AUTH),),
        HELPER_LIMITS,
        helper_storm,
        "helper.db.secure",
    ),
    RoleSpec(
        "issuer",
        start_issuer,
        (Served(ISSUER, ISSUER_AUTH, public=frozenset({"GetDirectory"})),),
        ISSUER_LIMITS,
        issuer_storm,
        "issuer/quota.sqlite",
    ),
)


@contextmanager
def running_role(spec: RoleSpec, directory: Path) -> Iterator[Running]:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    with ExitStack() as stack:
        yield spec.start(directory, stack)
