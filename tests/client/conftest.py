from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from client.admin import AdminClient
from tests.client.server_thread import TOKEN, ServerThread


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerThread]:
    running = ServerThread(tmp_path / "aggregator.db")
    running.start()
    yield running
    running.close()


@pytest.fixture
def admin(server: ServerThread) -> Iterator[AdminClient]:
    with grpc.insecure_channel(server.address) as channel:
        yield AdminClient(channel, TOKEN)
