"""The leader's upload holds reports in a worker thread and wakes the aggregation driver: the
wake-up reaches the driver's loop from that thread (an asyncio.Event is not thread-safe), and
after the loop is gone it is a no-op, never an error for the upload that held the reports."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from aggregator.secure.aggregation_driver import AggregationDriver
from aggregator.secure.helper_client import HelperClient
from aggregator.secure.metrics import SecureMetrics
from aggregator.secure.store import SecureStore


async def test_reports_held_in_a_worker_thread_wake_the_driver(tmp_path: Path) -> None:
    channel = grpc.aio.insecure_channel("127.0.0.1:9")
    driver = AggregationDriver(
        SecureStore(tmp_path / "l.secure"), HelperClient(channel, "t"), SecureMetrics(), workers=0
    )
    driver.held()  # before start: nothing to wake yet, and no error
    driver.start()
    driver.wake.clear()
    await asyncio.to_thread(driver.held)
    await asyncio.wait_for(driver.wake.wait(), timeout=30)
    await driver.stop()
    await channel.close(None)


def test_a_wake_after_the_loop_closed_is_ignored(tmp_path: Path) -> None:
    async def started() -> AggregationDriver:
        channel = grpc.aio.insecure_channel("127.0.0.1:9")
        driver = AggregationDriver(
            SecureStore(tmp_path / "l.secure"),
            HelperClient(channel, "t"),
            SecureMetrics(),
            workers=0,
        )
        driver.start()
        await channel.close(None)
        return driver

    driver = asyncio.run(started())
    driver.held()  # raises nothing: the reports are held, a restart finds them
