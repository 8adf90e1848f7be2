"""Every role's gRPC edge: each request arrives as bytes and is checked here, in this order,
before a servicer sees it.

gRPC's own decoding answers bytes that are not the request message with UNKNOWN and an
exception's class name, accepts any message up to the server-wide receive limit, and admits as
many calls as arrive. Registered through `register`, each method instead:

1. checks the caller's credentials when the service needs them (`authorize`): a caller without
   them learns nothing, not even whether its bytes parse or fit;
2. refuses a request larger than its method's limit (`RoleLimits.message_bytes`) with
   RESOURCE_EXHAUSTED, before anything is decoded;
3. takes a share of the role's in-flight budget (`EdgeGate`: calls running at once, request
   bytes being parsed and worked on), or is refused with RESOURCE_EXHAUSTED and a
   `grpc-retry-pushback-ms` hint;
4. decodes the bytes: bytes that do not decode are INVALID_ARGUMENT, naming the message type;
5. runs the servicer; anything unexpected is INTERNAL with a fixed message (the details go to
   the log), never a class name or traceback.
Every status message is bounded (`status_map.bounded`), whatever it echoes. docs/design.md
("Every role's edge") has each role's table of limits.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, cast

import grpc
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from aggregator.errors import Invalid
from aggregator.overload import PUSHBACK_METADATA_KEY, Overloaded
from aggregator.status_map import bounded

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
Authorize = Callable[[Context], Awaitable[Any]]

KIB, MIB = 1 << 10, 1 << 20
# A request that carries a few identifiers (a query id, a budget): what any method not listed
# in its role's table may be.
SMALL_REQUEST_BYTES = 64 * KIB


@dataclass(frozen=True)
class RoleLimits:
    """What one role admits. `message_bytes` maps "Service/Method" to its largest request
    (unlisted methods: `SMALL_REQUEST_BYTES`); `max_inflight_bytes` bounds the request bytes
    of the calls running at once (a request larger than the whole budget runs alone), and
    `max_concurrent_rpcs` the calls themselves."""

    message_bytes: Mapping[str, int] = field(default_factory=dict)
    max_inflight_bytes: int = 64 * MIB
    max_concurrent_rpcs: int = 4_000

    def __post_init__(self) -> None:
        if self.max_inflight_bytes < 1 or self.max_concurrent_rpcs < 1:
            raise ValueError(
                "max_inflight_bytes and max_concurrent_rpcs must be >= 1, got "
                f"{self.max_inflight_bytes} and {self.max_concurrent_rpcs}"
            )

    def limit(self, method: str) -> int:
        return self.message_bytes.get(method, SMALL_REQUEST_BYTES)

    @property
    def largest_message(self) -> int:
        """The server-wide receive limit: gRPC refuses anything larger before it is read."""
        return max([SMALL_REQUEST_BYTES, *self.message_bytes.values()])


class EdgeGate:
    """Calls and request bytes in flight in one role (on its event loop; not thread-safe)."""

    def __init__(self, limits: RoleLimits) -> None:
        self.limits = limits
        self.rpcs = 0
        self.bytes = 0

    def pushback_ms(self) -> int:
        """50 ms when there is a little room, up to 2 s when the budget is full."""
        fill = max(
            self.rpcs / self.limits.max_concurrent_rpcs,
            self.bytes / self.limits.max_inflight_bytes,
        )
        return int(min(2_000, max(50, math.ceil(2_000 * fill))))

    def admit(self, size: int) -> None:
        """Take one call of `size` request bytes, or raise Overloaded."""
        if self.rpcs >= self.limits.max_concurrent_rpcs:
            raise Overloaded(
                f"this server is handling {self.rpcs} calls (limit "
                f"{self.limits.max_concurrent_rpcs}); nothing was done: retry after the "
                "hinted delay",
                self.pushback_ms(),
            )
        if self.bytes + size > self.limits.max_inflight_bytes and self.bytes > 0:
            raise Overloaded(
                f"this server is working on {self.bytes} bytes of requests (limit "
                f"{self.limits.max_inflight_bytes}); nothing was done: retry after the "
                "hinted delay",
                self.pushback_ms(),
            )
        self.rpcs += 1
        self.bytes += size

    def release(self, size: int) -> None:
        self.rpcs -= 1
        self.bytes -= size


class _RegisteredMethods(Protocol):
    """`grpc.aio.Server.add_registered_method_handlers` (grpcio >= 1.63; grpc-stubs lacks it)."""

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None: ...


class Malformed(Invalid):
    """Request bytes that do not decode (an `Invalid`, so a stream's servicer refuses it as
    such)."""


class _TooLarge(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def refuse_overloaded(context: Context, exc: Overloaded) -> NoReturn:
    """RESOURCE_EXHAUSTED with the retry hint in trailing metadata (gRPC's retry pushback)."""
    await context.abort(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        bounded(exc.message),
        trailing_metadata=((PUSHBACK_METADATA_KEY, str(exc.pushback_ms)),),
    )
    raise AssertionError("unreachable: abort raises")


class _Method:
    """One method's request type and limit, and how its handler turns failures into
    statuses."""

    def __init__(self, method: MethodDescriptor, limits: RoleLimits, gate: EdgeGate) -> None:
        self.name = f"{method.containing_service.name}/{method.name}"
        self.request = GetMessageClass(method.input_type)
        self.request_name = method.input_type.full_name
        self.max_bytes = limits.limit(self.name)
        self.gate = gate

    def check_size(self, data: bytes, what: str) -> None:
        if len(data) > self.max_bytes:
            raise _TooLarge(
                f"{what} is {len(data)} bytes; {self.name} takes at most {self.max_bytes} "
                "bytes per message (nothing was read): send less per call"
            )

    def decode(self, data: bytes, what: str, consequence: str) -> Message:
        try:
            return self.request.FromString(data)
        except DecodeError:
            raise Malformed(f"{what} is not a valid {self.request_name}; {consequence}") from None

    async def run(self, context: Context, work: Awaitable[Any]) -> Any:
        try:
            return await work
        except grpc.aio.AbortError:
            raise
        except Malformed as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, bounded(str(exc)))
        except _TooLarge as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, bounded(exc.message))
        except Overloaded as exc:
            await refuse_overloaded(context, exc)
        except Exception:
            log.exception("%s failed", self.name)
            await context.abort(
                grpc.StatusCode.INTERNAL,
                f"internal error in {self.name}; the server's log has the details",
            )


def _unary(
    method: _Method,
    implementation: Callable[[Any, Context], Awaitable[Any]],
    authorize: Authorize | None,
    raw: bool,
) -> Callable[[bytes, Context], Awaitable[Any]]:
    async def handle(data: bytes, context: Context) -> Any:
        async def work() -> Any:
            if authorize is not None:
                await authorize(context)
            method.check_size(data, "the request")
            method.gate.admit(len(data))
            try:
                request = data if raw else method.decode(data, "the request", "nothing was done")
                return await implementation(request, context)
            finally:
                method.gate.release(len(data))

        return await method.run(context, work())

    return handle


def _stream(
    method: _Method,
    implementation: Callable[[AsyncIterator[Any], Context], Awaitable[Any]],
    authorize: Authorize | None,
) -> Callable[[AsyncIterator[bytes], Context], Awaitable[Any]]:
    async def handle(messages: AsyncIterator[bytes], context: Context) -> Any:
        async def decoded() -> AsyncIterator[Message]:
            index = 0
            async for data in messages:
                what = f"message {index} of the stream"
                method.check_size(data, what)
                yield method.decode(
                    data,
                    what,
                    "reports before it may have been counted; resending them is safe (each "
                    "report id is counted once)",
                )
                index += 1

        async def work() -> Any:
            if authorize is not None:
                await authorize(context)
            method.gate.admit(0)
            try:
                return await implementation(decoded(), context)
            finally:
                method.gate.release(0)

        return await method.run(context, work())

    return handle


def register(
    server: grpc.aio.Server,
    service: ServiceDescriptor,
    servicer: object,
    gate: EdgeGate,
    authorize: Authorize | None = None,
    raw: frozenset[str] = frozenset(),
    public: frozenset[str] = frozenset(),
) -> None:
    """Serve `service` with `servicer`'s methods (one per RPC, taking the decoded request),
    every request checked as the module says. `authorize` runs first on every method but those
    named in `public`; methods named in `raw` get the bytes as they are (after the size and
    budget checks) and decode them themselves."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for descriptor in service.methods:
        implementation = getattr(servicer, descriptor.name)
        check = None if descriptor.name in public else authorize
        method = _Method(descriptor, gate.limits, gate)
        serialize = GetMessageClass(descriptor.output_type).SerializeToString
        if descriptor.client_streaming:
            handlers[descriptor.name] = grpc.stream_unary_rpc_method_handler(
                _stream(method, implementation, check), response_serializer=serialize
            )
        else:
            handlers[descriptor.name] = grpc.unary_unary_rpc_method_handler(
                _unary(method, implementation, check, descriptor.name in raw),
                response_serializer=serialize,
            )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )
    cast(_RegisteredMethods, server).add_registered_method_handlers(service.full_name, handlers)


# Per-connection and per-server limits gRPC enforces itself, the same for every role.
# - Streams over the HTTP/2 limit on one connection are refused with REFUSED_STREAM (the client
#   sees UNAVAILABLE: never processed, safe to retry). It is above any role's
#   `max_concurrent_rpcs`, so the gate, with its retry hint, answers overload first.
# - gRPC queues calls that arrive before the server asks for the next one; past
#   `max_pending_requests` (default 1,000; hard limit 3,000) it cancels them, and the caller
#   sees CANCELLED (RST_STREAM) with no hint. Under a sustained storm of short calls that queue
#   fills: raised here so every call reaches the gate, which answers it.
# - Keepalive pings find dead peers, and a client pinging more often than every 10 s without
#   calls is told to calm down (GOAWAY) rather than costing the server CPU; an idle
#   connection is closed after 5 min.
CONNECTION_LIMITS: tuple[tuple[str, int], ...] = (
    ("grpc.max_concurrent_streams", 10_000),
    ("grpc.server.max_pending_requests", 100_000),
    ("grpc.server.max_pending_requests_hard_limit", 100_000),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 2),
    ("grpc.max_connection_idle_ms", 300_000),
)


def server_options(limits: RoleLimits, max_send_bytes: int = 4 * MIB) -> list[tuple[str, int]]:
    """The `grpc.aio.server` options of a role: one server per port (no SO_REUSEPORT, so a
    second server on the same port is refused rather than sharing its traffic), the connection
    limits, and the receive limit of the role's largest request."""
    return [
        ("grpc.so_reuseport", 0),
        *CONNECTION_LIMITS,
        ("grpc.max_receive_message_length", limits.largest_message),
        ("grpc.max_send_message_length", max_send_bytes),
    ]
