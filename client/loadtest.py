"""The load-test engine: reports at a fixed arrival rate (open loop) or as fast as acknowledged
(closed loop) to one or several Collectors, measured the way wrk2 and ghz measure.

Everything that costs CPU happens before the clock starts: the query's public parameters are
read, every report is encoded (`report_wire`) and every connection is up. During the run the
client only sends, so what it measures is the server. It never retries: a refusal, including
server pushback (`grpc-retry-pushback-ms` on RESOURCE_EXHAUSTED or UNAVAILABLE), is counted.

Bounds: at most `max_in_flight` RPCs at once, nothing sent after `duration` seconds, every RPC
has a deadline, and whatever is still in flight a little after that is cancelled.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import grpc
import grpc.aio
import numpy as np
import numpy.typing as npt

from client.arrivals import LATE_AFTER_SECONDS, OpenLoopSchedule, Timing
from client.channels import open_aio_channel
from client.latency import LatencyHistogram
from client.loadtest_secure import SECURE_MODES, UPLOAD_METHOD, fetch_secure_query
from client.report_wire import encode_reports, row_bytes
from ldpcollect.errors import ParameterError
from ldpcollect.secure.sealing import HpkeConfig
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect.v1 import secure_pb2 as spb

MODES = ("unary", "stream", "batch")
PUSHBACK_KEY = "grpc-retry-pushback-ms"
PUSHBACK_CODES = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE})
# A failed RPC with one of these codes may or may not have been counted by the server.
UNKNOWN_OUTCOME = frozenset(
    {
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
    }
)
MAX_PREBUILT_BYTES = 256 * 1024 * 1024
# Closed loop: reports built per second of --duration, above what one aggregator process on this
# machine acknowledges (bench/ingest.py); the run says so if they run out first.
CLOSED_LOOP_REPORTS_PER_SECOND = {"unary": 20_000, "stream": 200_000, "batch": 2_000_000}
_OBJECT_BYTES = 41  # a bytes object's header (33) and its list slot (8)
_ENCODE_CHUNK = 65_536
CONNECT_SECONDS = 10.0
# Closed loop at a leader: sealed reports built per second of --duration (sealing one costs
# the client about a millisecond or more, so a generous multiple of what a leader verifies).
SECURE_CLOSED_LOOP_REPORTS = 2_000
TICK_SECONDS = 0.25

_SERVICE = "/ldpcollect.v1.Collector/"
_CHANNEL_OPTIONS: Sequence[tuple[str, int | str]] = (
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    # Each connection its own TCP connection: gRPC would otherwise share one per address.
    ("grpc.use_local_subchannel_pool", 1),
)

Unit = bytes | list[bytes]


class _Rpc(Protocol):
    def __call__(self, request: Any, *, timeout: float) -> Awaitable[object]: ...


class LoadTestError(Exception):
    """A load test that cannot start or whose query does not allow it; one line for a person."""


def parse_addresses(text: str) -> tuple[str, ...]:
    """'host:port[,host:port...]' -> the addresses; ParameterError naming the bad one."""
    addresses = tuple(part.strip() for part in text.split(","))
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not (host and sep and port.isdigit() and 0 < int(port) < 65536):
            raise ParameterError("--server", address, "host:port[,host:port...]")
    return addresses


@dataclass(frozen=True)
class LoadTestConfig:
    addresses: tuple[str, ...]
    query_id: str
    mode: str = "unary"
    rate: float = 100.0  # RPCs per second; 0 = closed loop
    duration: float = 10.0
    connections: int = 1  # per address
    batch_size: int = 100  # reports per stream or batch RPC
    max_in_flight: int = 256
    rpc_timeout: float = 10.0
    max_requests: int | None = None
    seed: int | None = None
    tls_ca: Path | None = None
    # A secure query (the addresses are a leader): the helper's own HPKE key.
    helper_config: HpkeConfig | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ParameterError("--mode", self.mode, " | ".join(MODES))
        if not (math.isfinite(self.rate) and self.rate >= 0):
            raise ParameterError("--rate", self.rate, "[0, inf) RPCs per second (0 = closed loop)")
        if not (math.isfinite(self.duration) and self.duration > 0):
            raise ParameterError("--duration", self.duration, "(0, inf) seconds")
        for name, value in (
            ("--connections", self.connections),
            ("--batch-size", self.batch_size),
            ("--max-in-flight", self.max_in_flight),
        ):
            if value < 1:
                raise ParameterError(name, value, "[1, inf)")
        if not (math.isfinite(self.rpc_timeout) and self.rpc_timeout > 0):
            raise ParameterError("--timeout", self.rpc_timeout, "(0, inf) seconds")
        if self.max_requests is not None and self.max_requests < 1:
            raise ParameterError("--max-requests", self.max_requests, "[1, inf)")

    @property
    def open_loop(self) -> bool:
        return self.rate > 0

    @property
    def reports_per_rpc(self) -> int:
        return 1 if self.mode == "unary" else self.batch_size


@dataclass(frozen=True)
class QueryShape:
    """What a valid report for the query must look like, read from its public parameters."""

    query_id: str
    mechanism: str
    n_targets: int
    round: int
    # At a leader: the secure query (its reports are sealed uploads), else None.
    secure: spb.SecureQuery | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Tick:
    elapsed: float
    sent: int
    answered: int
    planned: int


@dataclass
class LoadTestResult:
    config: LoadTestConfig
    query: QueryShape
    planned: int
    sent: int = 0
    answered: int = 0
    elapsed: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)
    accepted: int = 0
    duplicates: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    pushback: Counter[str] = field(default_factory=Counter)
    late: int = 0
    waited_for_slot: int = 0
    # Open loop: due before the end but never sent, the in-flight bound holding them back.
    unsent: int = 0
    max_send_delay: float = 0.0
    accepted_by_address: Counter[str] = field(default_factory=Counter)
    unknown_by_address: Counter[str] = field(default_factory=Counter)
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    # Per request: intended send time since t0 and latency, seconds (NaN if never answered).
    intended_at: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    latencies: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    @property
    def acknowledged(self) -> int:
        return self.accepted + self.duplicates

    @property
    def achieved_rate(self) -> float:
        return self.answered / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def reports_per_second(self) -> float:
        return self.acknowledged / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def exhausted(self) -> bool:
        """Closed loop only: it stopped before --duration because its RPCs ran out (all the
        pre-built reports were sent, or --max-requests of them)."""
        return not self.config.open_loop and self.sent >= self.planned


def _shape(query: pb.Query) -> QueryShape:
    mechanism = query.mechanism.WhichOneof("mechanism") or "unknown"
    return QueryShape(query.query_id, mechanism, len(query.targets), int(query.current_round))


def check_loadable(query: pb.Query) -> QueryShape:
    """The query's shape; LoadTestError when a load test cannot send it valid reports."""
    if query.state != pb.QUERY_STATE_OPEN:
        state = pb.QueryState.Name(query.state).removeprefix("QUERY_STATE_").lower()
        raise LoadTestError(f"query {query.query_id!r} is {state}: a load test needs an open query")
    if query.current_round != 1:
        raise LoadTestError(
            f"query {query.query_id!r} is in round {query.current_round}: a load test sends "
            "round-1 reports only (a round-2 report needs the same device's round-1 report)"
        )
    return _shape(query)


class LoadTest:
    """One bounded run: `await LoadTest(config).run()` (connect, build, send, drain, close)."""

    def __init__(self, config: LoadTestConfig, clock: Callable[[], float] = time.perf_counter):
        self.config = config
        self._clock = clock

    async def run(self, on_tick: Callable[[Tick], None] | None = None) -> LoadTestResult:
        config = self.config
        channels = [
            (address, open_aio_channel(address, config.tls_ca, _CHANNEL_OPTIONS))
            for _ in range(config.connections)
            for address in config.addresses
        ]
        try:
            await self._connect(channels)
            shape = await self._fetch_query(channels[: len(config.addresses)])
            units = self._build(shape)
            result = LoadTestResult(config, shape, planned=len(units))
            result.intended_at = np.full(len(units), np.nan)
            result.latencies = np.full(len(units), np.nan)
            run = _Run(config, self._clock, result, units, channels)
            ticker = asyncio.create_task(run.tick(on_tick)) if on_tick else None
            try:
                await run.go()
            finally:
                if ticker is not None:
                    ticker.cancel()
                    await asyncio.gather(ticker, return_exceptions=True)
            if on_tick is not None:
                on_tick(run.progress())
            return result
        finally:
            await asyncio.gather(*(channel.close(None) for _, channel in channels))

    async def _connect(self, channels: list[tuple[str, grpc.aio.Channel]]) -> None:
        for address, channel in channels:
            try:
                await asyncio.wait_for(channel.channel_ready(), CONNECT_SECONDS)
            except TimeoutError:
                raise LoadTestError(
                    f"cannot connect to {address} within {CONNECT_SECONDS:g} s"
                ) from None

    async def _fetch_query(self, channels: list[tuple[str, grpc.aio.Channel]]) -> QueryShape:
        """The query's public parameters from every address; they must agree. An address
        that serves no Collector (UNIMPLEMENTED) is a leader: its query is a secure one."""
        shapes = {}
        for address, channel in channels:
            try:
                query = await pb_grpc.CollectorStub(channel).GetQuery(
                    pb.GetQueryRequest(query_id=self.config.query_id), timeout=CONNECT_SECONDS
                )
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                secure = await fetch_secure_query(channel, self.config.query_id)
                shapes[address] = self._secure_shape(secure)
                continue
            shapes[address] = check_loadable(query)
        first, *others = shapes.items()
        for address, shape in others:
            if shape != first[1]:
                raise LoadTestError(
                    f"query {shape.query_id!r} differs between {first[0]} ({first[1]}) and "
                    f"{address} ({shape}): every address must serve the same query"
                )
        return first[1]

    def _secure_shape(self, query: spb.SecureQuery) -> QueryShape:
        if query.state != spb.SECURE_QUERY_STATE_OPEN:
            raise LoadTestError(
                f"secure query {query.query_id!r} is not open: a load test needs an open query"
            )
        if self.config.mode not in SECURE_MODES:
            raise LoadTestError(
                f"{query.query_id!r} is a secure query (the server is a leader): it takes "
                "uploads one at a time (--mode unary) or in batches (--mode batch)"
            )
        mechanism = query.mechanism.WhichOneof("mechanism") or "unknown"
        return QueryShape(
            query.query_id, mechanism, len(query.targets), int(query.upload_round), query
        )

    def _build(self, shape: QueryShape) -> list[Unit]:
        """Every request of the run, encoded (valid reports, fresh random ids)."""
        config = self.config
        if shape.secure is not None:
            return self._build_secure(shape.secure)
        per_rpc = config.reports_per_rpc
        row = row_bytes(shape.query_id, shape.round, shape.n_targets)
        # In memory a report is its row, plus (unary, stream) a bytes object's header and slot.
        rpc_bytes = per_rpc * row + (0 if config.mode == "batch" else _OBJECT_BYTES * per_rpc)
        if config.open_loop:
            n_rpcs = OpenLoopSchedule(config.rate, config.duration).count
        else:
            ceiling = CLOSED_LOOP_REPORTS_PER_SECOND[config.mode] * config.duration
            n_rpcs = max(1, min(math.ceil(ceiling / per_rpc), MAX_PREBUILT_BYTES // rpc_bytes))
        if config.max_requests is not None:
            n_rpcs = min(n_rpcs, config.max_requests)
        if n_rpcs * rpc_bytes > MAX_PREBUILT_BYTES:
            raise ParameterError(
                "--rate x --duration",
                f"{n_rpcs} RPCs of {per_rpc} reports ({n_rpcs * rpc_bytes / 2**20:.0f} MiB)",
                f"[0, {MAX_PREBUILT_BYTES // 2**20}] MiB of pre-built reports",
                "lower --rate, --duration or --batch-size",
            )
        seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(8))
        rng = np.random.default_rng(seed)
        units: list[Unit] = []
        step = max(1, _ENCODE_CHUNK // per_rpc)  # encode in chunks: peak memory ~ the result
        for start in range(0, n_rpcs, step):
            count = min(step, n_rpcs - start)
            rows = encode_reports(
                shape.query_id, shape.round, shape.n_targets, count * per_rpc, rng
            )
            if config.mode == "unary":
                units.extend(r.tobytes() for r in rows)
            elif config.mode == "batch":
                units.extend(rows[i : i + per_rpc].tobytes() for i in range(0, len(rows), per_rpc))
            else:
                units.extend(
                    [r.tobytes() for r in rows[i : i + per_rpc]]
                    for i in range(0, len(rows), per_rpc)
                )
        return units

    def _build_secure(self, query: spb.SecureQuery) -> list[Unit]:
        """Sealed uploads (the device side's cost is paid here, before the clock)."""
        config = self.config
        if config.open_loop:
            n_rpcs = OpenLoopSchedule(config.rate, config.duration).count
        else:
            n_rpcs = math.ceil(
                SECURE_CLOSED_LOOP_REPORTS * config.duration / config.reports_per_rpc
            )
        if config.max_requests is not None:
            n_rpcs = min(n_rpcs, config.max_requests)
        from client.loadtest_secure import build_secure_units  # sealing: loaded when used

        if config.helper_config is None:
            raise LoadTestError(
                f"{query.query_id!r} is a secure query: give the helper's key (--helper "
                "HOST:PORT or --helper-config FILE)"
            )
        seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(8))
        units: list[Unit] = []
        units.extend(
            build_secure_units(
                query,
                config.helper_config,
                n_rpcs,
                config.reports_per_rpc,
                np.random.default_rng(seed),
            )
        )
        return units


class _Run:
    """The sending part of one run: dispatch on schedule, record each answer, drain."""

    def __init__(
        self,
        config: LoadTestConfig,
        clock: Callable[[], float],
        result: LoadTestResult,
        units: list[Unit],
        channels: list[tuple[str, grpc.aio.Channel]],
    ) -> None:
        self.config = config
        self.clock = clock
        self.result = result
        self.units = units
        self.secure = result.query.secure is not None
        self.calls = [(address, self._callable(channel)) for address, channel in channels]
        self.slots = asyncio.Semaphore(self.config.max_in_flight)
        self.in_flight: set[asyncio.Task[None]] = set()
        self.t0 = 0.0
        self.last_answer = 0.0

    def _callable(self, channel: grpc.aio.Channel) -> _Rpc:
        """The mode's RPC taking pre-encoded bytes (no serializer: they go out as they are)."""
        if self.secure:
            rpc: object = channel.unary_unary(
                UPLOAD_METHOD,
                request_serializer=None,
                response_deserializer=spb.UploadSecureReportsResponse.FromString,
            )
        elif self.config.mode == "unary":
            rpc = channel.unary_unary(
                _SERVICE + "SubmitReport",
                request_serializer=None,
                response_deserializer=pb.SubmitReportResponse.FromString,
            )
        elif self.config.mode == "stream":
            rpc = channel.stream_unary(
                _SERVICE + "StreamReports",
                request_serializer=None,
                response_deserializer=pb.SubmitReportsResponse.FromString,
            )
        else:
            rpc = channel.unary_unary(
                _SERVICE + "SubmitBatch",
                request_serializer=None,
                response_deserializer=pb.SubmitReportsResponse.FromString,
            )
        return cast(_Rpc, rpc)

    def progress(self) -> Tick:
        elapsed = self.clock() - self.t0 if self.t0 else 0.0
        return Tick(elapsed, self.result.sent, self.result.answered, self.result.planned)

    async def tick(self, on_tick: Callable[[Tick], None]) -> None:
        while True:
            on_tick(self.progress())
            await asyncio.sleep(TICK_SECONDS)

    async def go(self) -> None:
        self.t0 = self.clock()
        end = self.t0 + self.config.duration
        if self.config.open_loop:
            await self._open_loop(end)
        else:
            await asyncio.gather(
                *(self._closed_loop_worker(end) for _ in range(self.config.max_in_flight))
            )
        await self._drain()
        self.result.elapsed = self.last_answer - self.t0 if self.result.answered else 0.0

    async def _open_loop(self, end: float) -> None:
        """Send request i at its intended time, or as soon after as an in-flight slot frees;
        requests still waiting for a slot at `end` are not sent but counted as unsent."""
        schedule = OpenLoopSchedule(self.config.rate, self.config.duration)
        for i in range(len(self.units)):
            intended = schedule.intended(self.t0, i)
            wait = intended - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)
            waited = self.slots.locked()
            if waited:
                try:
                    await asyncio.wait_for(self.slots.acquire(), end - self.clock())
                except TimeoutError:
                    self.result.unsent = len(self.units) - i
                    return
                self.result.waited_for_slot += 1
            else:
                await self.slots.acquire()
            task = asyncio.create_task(self._send(i, intended, waited))
            self.in_flight.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.in_flight.discard(task)
        self.slots.release()

    async def _closed_loop_worker(self, end: float) -> None:
        while self.result.sent < len(self.units) and self.clock() < end:
            await self._send(self.result.sent, None, False)

    async def _drain(self) -> None:
        """Wait for what is in flight (each RPC has a deadline); cancel stragglers after it."""
        if not self.in_flight:
            return
        _, late = await asyncio.wait(self.in_flight, timeout=self.config.rpc_timeout + 2.0)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def _send(self, i: int, intended: float | None, waited: bool) -> None:
        result = self.result
        address, call = self.calls[i % len(self.calls)]
        unit = self.units[i]
        n_reports = self.config.reports_per_rpc
        result.sent += 1
        sent = self.clock()
        timing_start = sent if intended is None else intended
        code = grpc.StatusCode.OK
        try:
            request = iter(unit) if isinstance(unit, list) else unit
            response = await call(request, timeout=self.config.rpc_timeout)
        except grpc.aio.AioRpcError as err:
            code = err.code()
            if code in PUSHBACK_CODES and _has_pushback(err):
                result.pushback[code.name] += 1
            elif code in UNKNOWN_OUTCOME:
                result.unknown_by_address[address] += n_reports
        except asyncio.CancelledError:
            result.statuses[grpc.StatusCode.CANCELLED.name] += 1
            result.unknown_by_address[address] += n_reports
            raise
        else:
            self._count(address, response)
        done = self.clock()
        self.last_answer = max(self.last_answer, done)
        timing = Timing(timing_start, sent, done, waited)
        result.answered += 1
        result.statuses[code.name] += 1
        result.latency.record(timing.latency)
        result.intended_at[i] = timing.intended - self.t0
        result.latencies[i] = timing.latency
        result.max_send_delay = max(result.max_send_delay, timing.send_delay)
        if timing.late:
            result.late += 1

    def _count(self, address: str, response: object) -> None:
        result = self.result
        if isinstance(response, pb.SubmitReportResponse):
            accepted, duplicates = (0, 1) if response.ack.duplicate else (1, 0)
        else:
            assert isinstance(response, pb.SubmitReportsResponse | spb.UploadSecureReportsResponse)
            accepted, duplicates = int(response.accepted), int(response.duplicates)
            for rejection in response.rejected:
                result.rejected[_code_name(rejection.code)] += 1
        result.accepted += accepted
        result.duplicates += duplicates
        result.accepted_by_address[address] += accepted


def _has_pushback(err: grpc.aio.AioRpcError) -> bool:
    # grpc.aio.Metadata iterates as (key, value) pairs; grpc-stubs types it as the sync tuple.
    pairs = cast("Iterable[tuple[str, str | bytes]]", err.trailing_metadata() or ())
    return any(key == PUSHBACK_KEY for key, _ in pairs)


def _code_name(value: int) -> str:
    for code in grpc.StatusCode:
        if code.value[0] == value:
            return str(code.name)
    return f"CODE_{value}"


__all__ = [
    "LATE_AFTER_SECONDS",
    "MODES",
    "LoadTest",
    "LoadTestConfig",
    "LoadTestError",
    "LoadTestResult",
    "QueryShape",
    "Tick",
    "parse_addresses",
]
