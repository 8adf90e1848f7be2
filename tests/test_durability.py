"""Nothing acknowledged is lost: SIGKILL the aggregator in the middle of a fleet run.

The aggregator runs as its own process (`ldpcollect serve`) on a real SQLite file. While a fleet
of devices is sending, the test kills it with SIGKILL (no shutdown code runs), starts a new one
on the same file and port, and lets the devices retry with their same report ids. Afterwards
every device's report must be counted exactly once, and the release must equal the Yes bits the
devices actually sent.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import grpc.aio
import numpy as np
import pytest

from client.admin import AdminClient
from client.fleet import FleetConfig, Mode, ProgressHook, answer_round, new_fleet
from client.retry import RetryPolicy
from ldpcollect import geo
from ldpcollect.mechanisms import RandomizedResponse

TOKEN = "durability-test-token"
DEVICES = 6_000
ROW = 63334
HOME = geo.GridScheme().locate(*geo.DEFAULT_CENTER)
TARGETS = [HOME + dr * ROW + dc for dr in range(-2, 3) for dc in range(-2, 3)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """`ldpcollect serve` as a child process that can be killed and started again."""

    def __init__(self, db: Path, port: int) -> None:
        self.db = db
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [sys.executable, "-m", "ldpcollect_cli.main", "serve", "--db", str(self.db)]
        args += ["--listen", self.address, "--admin-token", TOKEN, "--no-budget"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"aggregator exited with {self.proc.returncode}: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                assert time.monotonic() < deadline, "aggregator did not start listening"
                time.sleep(0.05)

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    running = ServerProcess(tmp_path / "aggregator.db", free_port())
    running.start()
    yield running
    running.stop()


@pytest.mark.parametrize("mode", ["unary", "batch"])
async def test_sigkill_mid_fleet_loses_no_acknowledged_report(
    mode: Mode, server: ServerProcess
) -> None:
    with grpc.insecure_channel(server.address) as admin_channel:
        AdminClient(admin_channel, TOKEN).create_query(
            RandomizedResponse("0.85", "0.3"), "grid", TARGETS, query_id="rr"
        )
    lats, lons = geo.sample_locations(DEVICES, geo.DEFAULT_CENTER, np.random.default_rng(7))
    fleet = new_fleet(lats, lons)
    acknowledged = 0
    kill_at = DEVICES // 3
    killed = asyncio.Event()

    def progress(round_: int, total: int) -> ProgressHook:
        def advance(n: int) -> None:
            nonlocal acknowledged
            acknowledged += n
            if acknowledged >= kill_at and not killed.is_set():
                killed.set()

        return advance

    async def crash_and_restart() -> None:
        await killed.wait()
        server.kill()
        await asyncio.sleep(0.3)  # devices see UNAVAILABLE meanwhile
        await asyncio.to_thread(server.start)

    retry = RetryPolicy(max_attempts=40, initial_backoff=0.05, max_backoff=0.5, rpc_timeout=10)
    config = FleetConfig(mode=mode, concurrency=8, batch_size=100, retry=retry)
    crasher = asyncio.create_task(crash_and_restart())
    with grpc.insecure_channel(server.address) as admin_channel:
        query = AdminClient(admin_channel, TOKEN).get_query("rr")
    async with grpc.aio.insecure_channel(server.address) as channel:
        record, result = await answer_round(
            channel,
            fleet,
            query,
            config,
            np.random.default_rng(1),
            progress=progress,
        )
    await crasher
    assert killed.is_set(), "the fleet finished before the kill: raise DEVICES"
    assert result.failed == 0, result.failures
    assert result.retries >= 1
    assert bool(record.acked[0].all())

    with grpc.insecure_channel(server.address) as admin_channel:
        admin = AdminClient(admin_channel, TOKEN)
        # Exactly once: as many reports counted as devices, however many were resent.
        assert list(admin.get_query("rr").reports_per_round) == [DEVICES]
        admin.close("rr")
        release = admin.release("rr")
    sent_yes = np.unpackbits(record.answers[0], axis=1)[:, : len(TARGETS)].sum(axis=0)
    released = [e.round_counts[0] for e in release.estimates]
    assert [e.location_id for e in release.estimates] == TARGETS
    assert released == sent_yes.tolist()
    assert release.participants == DEVICES
