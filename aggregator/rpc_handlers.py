"""Registering the Collector and Admin services: every request arrives as bytes, decoded here.

gRPC's own decoding answers bytes that are not the request message with UNKNOWN and an
exception's class name. Registered here, each method gets its request as bytes and:
- on Admin, the token is checked before anything is decoded (a caller without the token
  learns nothing, not even whether its bytes parse);
- bytes that do not decode are INVALID_ARGUMENT, naming the message type;
- anything unexpected is INTERNAL with a fixed message (the details go to the log), never a
  class name or traceback;
- every status message is bounded (`status_map.bounded`), whatever it echoes.
SubmitBatch takes its bytes as they are (`CollectorService.SubmitBatch` decodes uniform
batches itself).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, cast

import grpc
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from aggregator.errors import Invalid
from aggregator.service import AdminService, CollectorService
from aggregator.status_map import bounded
from ldpcollect.v1 import ldpcollect_pb2 as pb

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
COLLECTOR = pb.DESCRIPTOR.services_by_name["Collector"]
ADMIN = pb.DESCRIPTOR.services_by_name["Admin"]
# Methods whose servicer decodes the bytes itself.
_RAW = {"SubmitBatch"}


class _RegisteredMethods(Protocol):
    """`grpc.aio.Server.add_registered_method_handlers` (grpcio >= 1.63; grpc-stubs lacks it)."""

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None: ...


class _Malformed(Invalid):
    """Request bytes that do not decode (an `Invalid`, so StreamReports refuses it as such)."""


class _Guard:
    """One method's request type, and how its handler turns failures into statuses."""

    def __init__(self, method: MethodDescriptor) -> None:
        self.name = f"{method.containing_service.name}.{method.name}"
        self.request = GetMessageClass(method.input_type)
        self.request_name = method.input_type.full_name

    def decode(self, data: bytes, what: str, consequence: str) -> Message:
        try:
            return self.request.FromString(data)
        except DecodeError:
            raise _Malformed(f"{what} is not a valid {self.request_name}; {consequence}") from None

    async def run(self, context: Context, work: Awaitable[Any]) -> Any:
        try:
            return await work
        except grpc.aio.AbortError:
            raise
        except _Malformed as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, bounded(str(exc)))
        except Exception:
            log.exception("%s failed", self.name)
            await context.abort(
                grpc.StatusCode.INTERNAL,
                f"internal error in {self.name}; the aggregator's log has the details",
            )


def _unary(
    method: MethodDescriptor,
    implementation: Callable[[Any, Context], Awaitable[Any]],
    authorize: Callable[[Context], Awaitable[None]] | None,
) -> Callable[[bytes, Context], Awaitable[Any]]:
    guard = _Guard(method)
    raw = method.name in _RAW

    async def handle(data: bytes, context: Context) -> Any:
        async def work() -> Any:
            if authorize is not None:
                await authorize(context)
            request = data if raw else guard.decode(data, "the request", "nothing was changed")
            return await implementation(request, context)

        return await guard.run(context, work())

    return handle


def _stream(
    method: MethodDescriptor,
    implementation: Callable[[AsyncIterator[Any], Context], Awaitable[Any]],
) -> Callable[[AsyncIterator[bytes], Context], Awaitable[Any]]:
    guard = _Guard(method)

    async def handle(messages: AsyncIterator[bytes], context: Context) -> Any:
        async def decoded() -> AsyncIterator[Message]:
            index = 0
            async for data in messages:
                yield guard.decode(
                    data,
                    f"message {index} of the stream",
                    "reports before it may have been counted; resending them is safe (each "
                    "report id is counted once)",
                )
                index += 1

        return await guard.run(context, implementation(decoded(), context))

    return handle


def _handlers(
    service: ServiceDescriptor,
    servicer: object,
    authorize: Callable[[Context], Awaitable[None]] | None,
) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in service.methods:
        implementation = getattr(servicer, method.name)
        serialize = GetMessageClass(method.output_type).SerializeToString
        if method.client_streaming:
            handlers[method.name] = grpc.stream_unary_rpc_method_handler(
                _stream(method, implementation), response_serializer=serialize
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(method, implementation, authorize), response_serializer=serialize
            )
    return handlers


def add_services(server: grpc.aio.Server, collector: CollectorService, admin: AdminService) -> None:
    """Register both services on `server`, taking every request as bytes."""
    for service, servicer, authorize in (
        (COLLECTOR, collector, None),
        (ADMIN, admin, admin.authorize),
    ):
        handlers = _handlers(service, servicer, authorize)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service.full_name, handlers),)
        )
        cast(_RegisteredMethods, server).add_registered_method_handlers(service.full_name, handlers)
