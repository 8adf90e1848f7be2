"""The serving loop every `ldpcollect ... serve` runs: start, freeze, stop on a signal."""

from __future__ import annotations

import gc
import os
import signal

from aggregator.until_signal import serve_until_signal


class _Server:
    """The two calls the loop makes of a server (our real servers need sockets and stores;
    this test is about the loop alone)."""

    def __init__(self) -> None:
        self.stopped_with: float | None = None

    async def start(self) -> int:
        return 4242

    async def stop(self, grace: float | None = 1.0) -> None:
        self.stopped_with = grace


def test_the_loop_freezes_what_startup_built_and_stops_gracefully_on_sigterm() -> None:
    seen: dict[str, int] = {}
    server = _Server()

    def started(started_server: _Server, port: int) -> None:
        assert started_server is server
        seen["port"], seen["frozen"] = port, gc.get_freeze_count()
        os.kill(os.getpid(), signal.SIGTERM)  # handled by the loop, not by pytest

    gc.unfreeze()
    try:
        serve_until_signal(lambda: server, started, grace=2.5)
    finally:
        gc.unfreeze()
    assert seen["port"] == 4242
    assert seen["frozen"] > 0  # startup's objects are out of the collector's way
    assert server.stopped_with == 2.5
