"""Three `ldpcollect serve --store postgresql://...` processes on one database.

Devices reach all three through one channel (client-side round_robin over the three
addresses); one replica is SIGKILLed in the middle of the run; the devices retry what failed
with the same report ids, and every report is counted exactly once: the release on another
replica equals the bits the devices sent. The same reports sent to two replicas at once are
counted once, and a release requested on two replicas at once is charged once.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import psycopg
import pytest

from client.channels import open_aio_channel
from ldpcollect.mechanisms import RandomizedResponse
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect.wire import mechanism_to_proto, scheme_from_text
from tests.aggregator.conftest import ADMIN, TOKEN, Device, expected_counts
from tests.serving import run_cli, spawn_serve

RR = RandomizedResponse("0.75", "0.5")
TARGETS = tuple(range(1, 13))
BATCH = 40
RETRIED = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


@pytest.fixture
def replicas(
    fresh_postgres_url: str,
) -> Iterator[tuple[str, list[str], list[subprocess.Popen[str]]]]:
    run_cli(TOKEN, "store", "migrate", "--store", fresh_postgres_url)
    serve = ("--store", fresh_postgres_url, "--store-pool-size", "2")
    started = [spawn_serve(TOKEN, *serve) for _ in range(3)]
    try:
        yield fresh_postgres_url, [s.address for s in started], [s.proc for s in started]
    finally:
        for proc in (s.proc for s in started):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=30) == 0


def create_everywhere(addresses: list[str], query_id: str, *mechanism: str) -> None:
    """`ldpcollect query create` through all replicas, then wait until each knows it."""
    run_cli(
        TOKEN, "query", "create", "--id", query_id, *mechanism,
        "--bbox", "48.85,2.28,48.87,2.31", "--scheme", "h3:8", server=",".join(addresses),
    )  # fmt: skip
    asyncio.run(_seen_everywhere(addresses, query_id))


async def _seen_everywhere(addresses: list[str], query_id: str) -> None:
    """Wait until every replica's snapshot shows the query (they refresh asynchronously)."""
    for address in addresses:
        async with open_aio_channel(address) as channel:
            stub = pb_grpc.CollectorStub(channel)
            for _ in range(1000):
                try:
                    await stub.GetQuery(pb.GetQueryRequest(query_id=query_id))
                    break
                except grpc.aio.AioRpcError as err:
                    assert err.code() == grpc.StatusCode.NOT_FOUND
                    await asyncio.sleep(0.01)


async def _submit_until_acknowledged(
    stub: pb_grpc.CollectorAsyncStub, reports: list[pb.Report], retries: list[int]
) -> pb.SubmitReportsResponse:
    """Send one batch until a reply comes, retrying UNAVAILABLE with the same report ids."""
    while True:
        try:
            return await stub.SubmitBatch(pb.SubmitBatchRequest(reports=reports), timeout=10)
        except grpc.aio.AioRpcError as err:
            assert err.code() in RETRIED, err
            retries[0] += 1
            await asyncio.sleep(0.05)


async def test_a_fleet_through_three_replicas_is_counted_once_when_one_is_killed(
    replicas: tuple[str, list[str], list[subprocess.Popen[str]]],
) -> None:
    url, addresses, procs = replicas
    rng = np.random.default_rng(11)
    devices = [Device(RR, int(rng.integers(1, 13)), TARGETS) for _ in range(2400)]
    batches = [devices[i : i + BATCH] for i in range(0, len(devices), BATCH)]
    retries = [0]
    async with open_aio_channel(",".join(addresses)) as channel:
        collector, admin = pb_grpc.CollectorStub(channel), pb_grpc.AdminStub(channel)
        await admin.CreateQuery(
            pb.CreateQueryRequest(
                query_id="city",
                mechanism=mechanism_to_proto(RR),
                location_scheme=scheme_from_text("grid"),
                targets=TARGETS,
                min_reports=1,
            ),
            metadata=ADMIN,
        )
        await _seen_everywhere(addresses, "city")
        todo: asyncio.Queue[list[Device]] = asyncio.Queue()
        for batch in batches:
            todo.put_nowait(batch)
        acknowledged: list[pb.SubmitReportsResponse] = []

        async def worker() -> None:
            while not todo.empty():
                batch = todo.get_nowait()
                reports = [d.report("city", 1) for d in batch]
                acknowledged.append(await _submit_until_acknowledged(collector, reports, retries))
                if len(acknowledged) == len(batches) // 3 and procs[1].poll() is None:
                    procs[1].send_signal(signal.SIGKILL)  # mid-run, calls in flight

        await asyncio.gather(*(worker() for _ in range(6)))
        assert procs[1].wait(timeout=30) == -signal.SIGKILL
        assert sum(r.accepted + r.duplicates for r in acknowledged) == len(devices), retries
        assert not any(r.rejected for r in acknowledged)

        # The same new reports sent to the two live replicas at the same moment.
        extra = [Device(RR, 3, TARGETS) for _ in range(200)]
        reports = [d.report("city", 1) for d in extra]
        live = [addresses[0], addresses[2]]
        async with open_aio_channel(live[0]) as one, open_aio_channel(live[1]) as two:
            both = await asyncio.gather(
                *(
                    pb_grpc.CollectorStub(c).SubmitBatch(
                        pb.SubmitBatchRequest(reports=reports[i : i + 20])
                    )
                    for i in range(0, 200, 20)
                    for c in (one, two)
                )
            )
            assert sum(r.accepted for r in both) == 200
            assert sum(r.duplicates for r in both) == 200
            everyone = devices + extra

            # Close, then release on both live replicas at once: one release, one charge.
            await admin.CloseQuery(pb.CloseQueryRequest(query_id="city"), metadata=ADMIN)
            outcomes = await asyncio.gather(
                *(
                    pb_grpc.AdminStub(c).Release(pb.ReleaseRequest(query_id="city"), metadata=ADMIN)
                    for c in (one, two)
                ),
                return_exceptions=True,
            )
        released = [o for o in outcomes if isinstance(o, pb.QueryRelease)]
        refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
        assert len(released) == 1 and len(refused) == 1, outcomes
        assert refused[0].code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "already released" in (refused[0].details() or "")
        release = released[0]
        assert release.participants == len(everyone)
        sent = expected_counts(everyone, 1, len(TARGETS))
        assert [list(e.round_counts) for e in release.estimates] == [[c] for c in sent[0]]
        ledger = await admin.GetLedger(pb.GetLedgerRequest(), metadata=ADMIN)
        assert [e.query_id for e in ledger.entries].count("city") == 1
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute("SELECT count(*) FROM reports")
        assert await cursor.fetchone() == (0,)


def test_a_replica_refuses_to_start_on_an_unreachable_database(tmp_path: Path) -> None:
    done = run_cli(
        TOKEN,
        "serve",
        "--store",
        "postgresql://nobody@127.0.0.1:1/none",
        "--listen",
        "127.0.0.1:0",
        ok=False,
    )
    assert done.returncode == 1
    assert "cannot use the PostgreSQL database postgresql://nobody@127.0.0.1:1/none" in done.stderr


def test_the_fleet_command_answers_both_rounds_through_three_replicas(
    replicas: tuple[str, list[str], list[subprocess.Popen[str]]],
) -> None:
    _, addresses, _ = replicas
    server = ",".join(addresses)
    create_everywhere(addresses, "sp", "--mechanism", "sp", "--sampling-rate", "0.5")
    run = ("fleet", "run", "--query", "sp", "--devices", "600", "--advance", "--no-progress")
    done = json.loads(run_cli(TOKEN, *run, "--json", server=server).stdout)
    assert [r["accepted"] for r in done["rounds"]] == [600, 600]
    # An operator's GetQuery reads the database: every replica shows them all at once.
    for address in addresses:
        assert asyncio.run(_admin_completed_devices(address, "sp")) == 600
    # Every replica's snapshot comes to show all of them (another replica's reports arrive
    # with its next refresh).
    for address in addresses:
        assert asyncio.run(_completed_devices(address, "sp", until=600)) == 600


async def _reports_in_round_1(address: str, query_id: str, until: int) -> int:
    async with open_aio_channel(address) as channel:
        stub = pb_grpc.CollectorStub(channel)
        for _ in range(300):
            query = await stub.GetQuery(pb.GetQueryRequest(query_id=query_id))
            if query.reports_per_round[0] >= until:
                break
            await asyncio.sleep(0.02)
        return int(query.reports_per_round[0])


async def _admin_completed_devices(address: str, query_id: str) -> int:
    async with open_aio_channel(address) as channel:
        query = await pb_grpc.AdminStub(channel).GetQuery(
            pb.GetQueryRequest(query_id=query_id),
            metadata=(("authorization", f"Bearer {TOKEN}"),),
        )
        return int(query.completed_devices)


async def _completed_devices(address: str, query_id: str, until: int) -> int:
    async with open_aio_channel(address) as channel:
        stub = pb_grpc.CollectorStub(channel)
        for _ in range(300):
            query = await stub.GetQuery(pb.GetQueryRequest(query_id=query_id))
            if query.completed_devices >= until:
                break
            await asyncio.sleep(0.02)
        return int(query.completed_devices)


def test_the_load_test_through_three_replicas_finds_every_report_counted(
    replicas: tuple[str, list[str], list[subprocess.Popen[str]]],
) -> None:
    _, addresses, _ = replicas
    server = ",".join(addresses)
    create_everywhere(addresses, "load", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    done = run_cli(
        TOKEN, "loadtest", "--server", server, "--query", "load", "--mode", "batch",
        "--batch-size", "50", "--rate", "0", "--duration", "5", "--max-requests", "300",
        "--json",
    )  # fmt: skip
    result = json.loads(done.stdout)
    check = result["count_check"]
    assert check["ok"] is True and check["message"].startswith("OK: "), check
    # Once every replica has caught up, each shows everything that was accepted.
    total = result["reports"]["accepted"]
    assert total == 300 * 50
    for address in addresses:
        assert asyncio.run(_reports_in_round_1(address, "load", until=total)) == total


def test_serve_refuses_a_store_that_is_not_a_postgresql_url() -> None:
    done = run_cli(TOKEN, "serve", "--store", "mysql://x@h/db", ok=False)
    assert done.returncode == 2
    assert "--store" in done.stderr and "postgresql://USER@HOST:PORT/DB" in done.stderr
    migrate = run_cli(TOKEN, "store", "migrate", "--store", "sqlite.db", ok=False)
    assert migrate.returncode == 2 and "postgresql://" in migrate.stderr
