"""Bounded in-flight work: refusals carry a retry hint, idle streams end, nothing is lost.

Before: 2,000 concurrent unary calls returned 9% CANCELLED, 3,000 silent streams stayed open
for as long as their clients liked, and nothing bounded the reports waiting for the writer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from aggregator.overload import InFlightBudget, Overloaded, OverloadLimits
from aggregator.server import AggregatorServer
from client.fleet import FleetConfig, new_fleet, run_query
from client.retry import RetryPolicy
from ldpcollect import geo
from ldpcollect.mechanisms import RandomizedResponse
from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.aggregator.conftest import Device, Harness, connect, make_config

TARGETS = [11, 22, 33]
PUSHBACK = "grpc-retry-pushback-ms"


# --- the budget itself --------------------------------------------------------------------------
async def test_budget_refuses_beyond_its_limit_with_a_bounded_hint() -> None:
    budget = InFlightBudget(OverloadLimits(max_inflight_reports=10))
    budget.take(8)
    with pytest.raises(Overloaded, match="8 reports in flight") as refused:
        budget.take(3)
    assert 20 <= refused.value.pushback_ms <= 5_000
    budget.take(2)  # exactly up to the limit
    budget.give_back(10)
    budget.take(25)  # larger than the whole budget: admitted alone, never starved
    with pytest.raises(Overloaded):
        budget.take(1)


async def test_budget_hint_grows_with_slow_commits_and_stays_capped() -> None:
    budget = InFlightBudget(OverloadLimits(max_inflight_reports=10))
    quick = budget.pushback_ms()
    for _ in range(50):
        budget.observe_commit(0.5)
    slow = budget.pushback_ms()
    assert quick < slow <= 5_000
    for _ in range(50):
        budget.observe_commit(60.0)
    assert budget.pushback_ms() == 5_000


async def test_a_waiting_stream_gets_room_when_work_commits_or_gives_up() -> None:
    budget = InFlightBudget(OverloadLimits(max_inflight_reports=10, stream_wait_s=5.0))
    budget.take(10)
    waiter = asyncio.create_task(budget.wait_and_take(4))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    budget.give_back(6)
    await asyncio.wait_for(waiter, 5)
    assert budget.reports == 8

    impatient = InFlightBudget(OverloadLimits(max_inflight_reports=10, stream_wait_s=0.05))
    impatient.take(10)
    with pytest.raises(Overloaded, match=r"no room for more reports within 0\.05 s"):
        await impatient.wait_and_take(1)
    assert impatient.reports == 10


async def test_stream_slots_are_counted() -> None:
    budget = InFlightBudget(OverloadLimits(max_streams=2))
    budget.open_stream()
    budget.open_stream()
    with pytest.raises(Overloaded, match="2 report streams open"):
        budget.open_stream()
    budget.close_stream()
    budget.open_stream()


@pytest.mark.parametrize(
    "bad",
    [
        {"max_inflight_reports": 0},
        {"max_streams": 0},
        {"stream_idle_timeout_s": 0.0},
        {"stream_wait_s": -1.0},
    ],
)
def test_limits_are_validated(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        OverloadLimits(**bad)  # type: ignore[arg-type]


# --- through a real server ----------------------------------------------------------------------
@pytest.fixture
async def tight(tmp_path: Path) -> AsyncIterator[Harness]:
    config = make_config(tmp_path / "agg.db", max_streams=2, stream_idle_timeout_s=0.5)
    h = await connect(AggregatorServer(config))
    try:
        yield h
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)


def _silent_after(
    reports: list[pb.Report], stop: asyncio.Event
) -> AsyncIterator[pb.SubmitReportRequest]:
    async def messages() -> AsyncIterator[pb.SubmitReportRequest]:
        for report in reports:
            yield pb.SubmitReportRequest(report=report)
        await stop.wait()

    return messages()


async def test_streams_beyond_the_limit_get_a_hint_and_idle_ones_are_ended(
    tight: Harness,
) -> None:
    rr = RandomizedResponse("0.85", "0.3")
    await tight.create("q", rr, TARGETS)
    devices = [Device(rr, TARGETS[i % 3], TARGETS) for i in range(6)]
    stop = asyncio.Event()
    holders = [
        asyncio.create_task(
            _stream(
                tight, _silent_after([d.report("q", 1) for d in devices[2 * k : 2 * k + 2]], stop)
            )
        )
        for k in range(2)
    ]
    await asyncio.sleep(0.2)  # both holders are open and silent

    with pytest.raises(grpc.aio.AioRpcError) as third:
        await tight.collector.StreamReports(_silent_after([devices[4].report("q", 1)], stop))
    assert third.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "2 report streams open" in (third.value.details() or "")
    metadata: list[tuple[str, str]] = list(third.value.trailing_metadata() or ())  # type: ignore[arg-type]
    hints = [value for key, value in metadata if key == PUSHBACK]
    assert len(hints) == 1 and 20 <= int(hints[0]) <= 5_000

    for holder in holders:  # ended by the server after 0.5 s of silence, not by the client
        with pytest.raises(grpc.aio.AioRpcError) as idle:
            await asyncio.wait_for(holder, 10)
        assert idle.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "sent nothing for 0.5 s" in (idle.value.details() or "")
        assert "the 2 reports it sent before are handled (2 accepted" in (
            idle.value.details() or ""
        )
    assert list((await tight.query("q")).reports_per_round) == [4]  # what they sent is kept

    # Room again: a stream that finishes normally is served, and resent reports count once.
    done = await tight.collector.StreamReports(
        _silent_after([d.report("q", 1) for d in devices], _set(asyncio.Event()))
    )
    assert (done.accepted, done.duplicates) == (2, 4)
    assert list((await tight.query("q")).reports_per_round) == [6]


async def _stream(
    h: Harness, messages: AsyncIterator[pb.SubmitReportRequest]
) -> pb.SubmitReportsResponse:
    return await h.collector.StreamReports(messages)


def _set(event: asyncio.Event) -> asyncio.Event:
    event.set()
    return event


async def test_fleet_waits_out_the_hint_and_loses_nothing(tight: Harness) -> None:
    """The only two stream slots are held by silent streams when the fleet starts: its streams
    are refused with a hint, it waits and retries, and every device is counted once."""
    rr = RandomizedResponse("0.85", "0.3")
    home = geo.GridScheme().locate(*geo.DEFAULT_CENTER)
    targets = [home, home + 1]
    await tight.create("f", rr, targets)
    stop = asyncio.Event()
    holders = [asyncio.create_task(_stream(tight, _silent_after([], stop))) for _ in range(2)]
    await asyncio.sleep(0.2)
    lats, lons = geo.sample_locations(300, geo.DEFAULT_CENTER, np.random.default_rng(3))
    retried: list[grpc.StatusCode] = []
    config = FleetConfig(
        mode="stream",
        concurrency=2,
        batch_size=100,
        retry=RetryPolicy(max_attempts=20, initial_backoff=0.01, max_backoff=0.2),
        on_retry=retried.append,
    )
    result = await run_query(
        tight.channel, new_fleet(lats, lons), "f", config, np.random.default_rng(4)
    )
    assert result.rounds[0].accepted == 300 and result.rounds[0].failed == 0
    # Refused with the hint; a refusal that races the fleet's own writes can reach it as its
    # client core's INTERNAL instead (retried too: the report ids make a resend safe).
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in retried
    assert set(retried) <= {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL}
    assert list((await tight.query("f")).reports_per_round) == [300]
    for holder in holders:
        with pytest.raises(grpc.aio.AioRpcError):
            await holder
