"""The fleet runner through the real aggregator, in all three paths."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import grpc.aio
import numpy as np
import pytest

from client.admin import AdminClient
from client.fleet import (
    FleetConfig,
    FleetError,
    FleetResult,
    answer_round,
    new_fleet,
    run_query,
)
from client.fleet_state import FleetState
from client.retry import RetryPolicy
from ldpcollect import geo
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.client.server_thread import ServerThread

CENTER = geo.DEFAULT_CENTER
HOME = geo.GridScheme().locate(*CENTER)
ROW = 63334
# a 3 x 3 block of grid cells on the main hotspot
TARGETS = [HOME + dr * ROW + dc for dr in (-1, 0, 1) for dc in (-1, 0, 1)]
N = 1500


def _fleet(seed: int, budget: float | None = None) -> FleetState:
    lats, lons = geo.sample_locations(N, CENTER, np.random.default_rng(seed))
    return new_fleet(lats, lons, budget)


async def _run(
    server: ServerThread,
    admin: AdminClient,
    fleet: FleetState,
    query_id: str,
    config: FleetConfig,
    seed: int = 1,
) -> FleetResult:
    async def advance(qid: str) -> pb.Query:
        return await asyncio.to_thread(admin.advance, qid)

    async with grpc.aio.insecure_channel(server.address) as channel:
        return await run_query(
            channel, fleet, query_id, config, np.random.default_rng(seed), advance=advance
        )


def _yes_counts(fleet: FleetState, query_id: str, completed: np.ndarray) -> np.ndarray:
    """Yes count per round and target over the devices the server should have counted."""
    record = fleet.queries[query_id]
    rows = [
        np.unpackbits(record.answers[r, completed], axis=1)[:, : len(TARGETS)].sum(axis=0)
        for r in range(record.rounds)
    ]
    return np.stack(rows)


@pytest.mark.parametrize("mode", ["unary", "stream", "batch"])
async def test_fleet_counts_match_release_and_truth(
    mode: str, server: ServerThread, admin: AdminClient
) -> None:
    admin.create_query(RandomizedResponse("0.85", "0.3"), "grid", TARGETS, query_id="rr")
    admin.create_query(SamplingPrivacy("1/2"), "grid", TARGETS, query_id="sp")
    fleet = _fleet(seed=7)
    config = FleetConfig(mode=mode, concurrency=4, batch_size=200)  # type: ignore[arg-type]
    results = {q: await _run(server, admin, fleet, q, config) for q in ("rr", "sp")}
    for qid, result in results.items():
        assert result.declined == 0
        assert result.completed == N
        assert sum(r.failed for r in result.rounds) == 0
        assert [r.accepted for r in result.rounds] == [N] * len(result.rounds)
        admin.close(qid)
        release = admin.release(qid)
        assert release.participants == N
        record = fleet.queries[qid]
        completed = record.answering & record.acked.all(axis=0)
        expected = _yes_counts(fleet, qid, completed)
        released = np.array([list(e.round_counts) for e in release.estimates]).T
        assert np.array_equal(released, expected)  # the server counted exactly what was sent
        truth = result.truth_by_location()
        assert sum(truth.values()) > 40  # the hotspot block is populated
        for e in release.estimates:
            assert abs(e.estimate - truth[int(e.location_id)]) < 4.5 * e.std_error


async def test_rerun_resends_nothing_and_lost_acks_count_once(
    server: ServerThread, admin: AdminClient
) -> None:
    admin.create_query(RandomizedResponse("0.85", "0.3"), "grid", TARGETS, query_id="rr")
    fleet = _fleet(seed=3)
    config = FleetConfig(mode="batch", batch_size=300)
    await _run(server, admin, fleet, "rr", config)
    again = await _run(server, admin, fleet, "rr", config)
    assert again.rounds[0].sent == 0
    assert again.rounds[0].already_acknowledged == N
    fleet.queries["rr"].acked[:] = False  # every ack lost: resend with the same report ids
    lost = await _run(server, admin, fleet, "rr", FleetConfig(mode="stream", batch_size=300))
    assert lost.rounds[0].duplicates == N
    assert lost.rounds[0].accepted == 0
    assert list(admin.get_query("rr").reports_per_round) == [N]


async def test_fleet_devices_decline_queries_over_their_budget(
    server: ServerThread, admin: AdminClient
) -> None:
    for qid in ("rr1", "rr2"):
        admin.create_query(RandomizedResponse("0.85", "0.3"), "grid", TARGETS, query_id=qid)
    admin.create_query(SamplingPrivacy("1/2"), "grid", TARGETS, query_id="sp")
    fleet = _fleet(seed=5, budget=6.0)
    config = FleetConfig(mode="batch")
    first = await _run(server, admin, fleet, "rr1", config)
    second = await _run(server, admin, fleet, "rr2", config)
    sp = await _run(server, admin, fleet, "sp", config)
    assert (first.declined, first.answering) == (0, N)
    assert (second.declined, second.answering) == (N, 0)  # 5.198 + 5.198 > 6
    assert sp.declined == N  # linked SP rounds cost (0, s): no delta in this budget
    assert list(admin.get_query("rr2").reports_per_round)[:1] in ([], [0])
    eps, delta = fleet.spent()
    assert np.all(eps == pytest.approx(first.charge_epsilon)) and np.all(delta == 0)


async def test_fleet_with_a_delta_budget_answers_one_sp_query_then_declines(
    server: ServerThread, admin: AdminClient
) -> None:
    for qid in ("sp1", "sp2"):
        admin.create_query(SamplingPrivacy("1/2"), "grid", TARGETS, query_id=qid)
    fleet = _fleet(seed=6, budget=1.0)
    fleet.budget_delta = 0.6  # (0, 0.5) per SP query: one fits, two do not
    first = await _run(server, admin, fleet, "sp1", FleetConfig(mode="batch"))
    second = await _run(server, admin, fleet, "sp2", FleetConfig(mode="batch"))
    assert (first.declined, second.declined) == (0, N)
    assert first.completed == N and (first.charge_epsilon, first.charge_delta) == (0.0, 0.5)


async def test_fleet_state_file_carries_round_one_draws_to_round_two(
    server: ServerThread, admin: AdminClient, tmp_path: Path
) -> None:
    admin.create_query(SamplingPrivacy("1/2"), "grid", TARGETS, query_id="sp")
    fleet = _fleet(seed=11)
    config = FleetConfig(mode="batch")
    async with grpc.aio.insecure_channel(server.address) as channel:
        await run_query(channel, fleet, "sp", config, np.random.default_rng(1))
    path = tmp_path / "fleet.npz"
    fleet.save(path)
    admin.advance("sp")
    fresh = _fleet(seed=11)
    async with grpc.aio.insecure_channel(server.address) as channel:
        with pytest.raises(FleetError, match="round 2"):
            await run_query(channel, fresh, "sp", config, np.random.default_rng(1))
        loaded = FleetState.load(path)
        result = await run_query(channel, loaded, "sp", config, np.random.default_rng(99))
    assert result.completed == N
    assert admin.get_query("sp").completed_devices == N


@pytest.mark.parametrize("mode", ["stream", "batch"])
async def test_fleet_retries_through_a_server_restart_with_the_same_report_ids(
    mode: str, server: ServerThread, admin: AdminClient
) -> None:
    admin.create_query(RandomizedResponse("0.85", "0.3"), "grid", TARGETS, query_id="rr")
    fleet = _fleet(seed=13)
    query = admin.get_query("rr")  # read while the server is up, then it goes down
    server.stop()
    codes: list[grpc.StatusCode] = []

    def restart(code: grpc.StatusCode) -> None:
        codes.append(code)
        if len(codes) == 1:
            server.start()  # same SQLite file, same port

    retry = RetryPolicy(max_attempts=30, initial_backoff=0.05, max_backoff=0.5)
    config = FleetConfig(mode=mode, concurrency=2, batch_size=400, retry=retry, on_retry=restart)  # type: ignore[arg-type]
    async with grpc.aio.insecure_channel(server.address) as channel:
        _, result = await answer_round(channel, fleet, query, config, np.random.default_rng(1))
    assert codes[0] == grpc.StatusCode.UNAVAILABLE
    assert result.retries >= 1
    assert result.failed == 0
    assert result.accepted + result.duplicates == N
    assert list(admin.get_query("rr").reports_per_round) == [N]
