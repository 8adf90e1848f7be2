"""The real aggregator (engineer D's AggregatorServer) on 127.0.0.1 in a background thread.

Its own event loop runs in the thread, so synchronous device code can call it from the test
thread. `stop()` then `start()` again on the same SQLite file is a real restart.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from aggregator.config import AggregatorConfig
from aggregator.server import AggregatorServer

TOKEN = "test-admin-token"


class ServerThread:
    def __init__(self, db: Path, port: int = 0) -> None:
        self.db = db
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: AggregatorServer | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> str:
        config = AggregatorConfig(
            db_path=self.db, admin_token=TOKEN, listen=f"127.0.0.1:{self.port}"
        )
        server = AggregatorServer(config)
        self.port = asyncio.run_coroutine_threadsafe(server.start(), self._loop).result(30)
        self._server = server
        return self.address

    def stop(self) -> None:
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.stop(grace=0.5), self._loop).result(30)
            self._server = None

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
