"""A malicious leader for tests, built around the real one: a gRPC man in the middle on a real
socket that forwards every call to the real process behind it and lets a test rewrite the
request or the response bytes of any method.

Put in front of the helper (the leader's `--helper` points at it), it is everything a leader's
operator controls on the peer channel: the helper key the leader learns (and hands to
devices), what it provisions, what it asks at release. Put in front of the leader (the
collector's `--server`), it is what the leader tells the collector. No fault mode exists in
the product: the attacks run against the real helper, leader, devices and collector."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc

Rewrite = Callable[[bytes], bytes]


@dataclass
class Rewrites:
    """Per full method name ("/ldpcollect.v1.Helper/ProvisionQuery"): how to change the
    request on its way and the response on its way back. Mutable while the proxy runs."""

    requests: dict[str, Rewrite] = field(default_factory=dict)
    responses: dict[str, Rewrite] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.requests.clear()
        self.responses.clear()


class _Forward(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def __init__(self, channel: grpc.Channel, rewrites: Rewrites) -> None:
        self.channel, self.rewrites = channel, rewrites

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any]:
        method: str = details.method
        call = self.channel.unary_unary(method, None, None)

        def forward(request: bytes, context: grpc.ServicerContext) -> bytes:
            self.rewrites.seen.append(method)
            metadata = tuple(
                (k, v) for k, v in context.invocation_metadata() if k == "authorization"
            )
            body = self.rewrites.requests.get(method, _same)(request)
            try:
                answer: bytes = call(body, metadata=metadata, timeout=60)
            except grpc.RpcError as error:
                context.abort(error.code(), error.details() or "")
            return self.rewrites.responses.get(method, _same)(answer)

        return grpc.unary_unary_rpc_method_handler(forward)


def _same(body: bytes) -> bytes:
    return body


@contextmanager
def man_in_the_middle(target: str) -> Iterator[tuple[str, Rewrites]]:
    """A proxy on 127.0.0.1 forwarding to `target`: yields its address and its rewrites."""
    rewrites = Rewrites()
    with grpc.insecure_channel(target) as channel:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        server.add_generic_rpc_handlers([_Forward(channel, rewrites)])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            yield f"127.0.0.1:{port}", rewrites
        finally:
            server.stop(None)


def rewriting(message_type: Any, change: Callable[[Any], None]) -> Rewrite:
    """A rewrite that decodes `message_type`, applies `change` to it and encodes it again."""

    def rewrite(body: bytes) -> bytes:
        message = message_type.FromString(body)
        change(message)
        encoded: bytes = message.SerializeToString()
        return encoded

    return rewrite
