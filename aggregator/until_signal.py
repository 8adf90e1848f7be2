"""Run one of our gRPC servers (the trusted aggregator, a secure-mode role, the token issuer)
until SIGINT or SIGTERM, then stop it gracefully: the loop every `ldpcollect ... serve` uses."""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import Callable
from typing import Protocol, TypeVar

from aggregator.heap import keep_freed_memory


class Server(Protocol):
    async def start(self) -> int: ...

    async def stop(self, grace: float | None = 1.0) -> None: ...


S = TypeVar("S", bound=Server)


def serve_until_signal(
    make: Callable[[], S], on_started: Callable[[S, int], None] | None, grace: float
) -> None:
    """Build the server inside the event loop (grpc.aio needs it), start it, call
    `on_started(server, port)` once it listens, and stop it with `grace` seconds on a signal."""
    asyncio.run(_serve(make, on_started, grace))


async def _serve(
    make: Callable[[], S], on_started: Callable[[S, int], None] | None, grace: float
) -> None:
    keep_freed_memory()
    server = make()
    port = await server.start()
    # Everything built so far (modules, gRPC, the stores' caches) lives as long as the server:
    # frozen, the cyclic collector stops walking it again in every full collection, which
    # took 7% of a secure leader's CPU and 9% of a helper's under load (docs/secure-mode.md).
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if on_started is not None:
            on_started(server, port)
        await stop.wait()
    finally:
        await server.stop(grace=grace)
