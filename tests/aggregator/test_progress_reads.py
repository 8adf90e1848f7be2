"""A trusted query's progress read while batches commit (issue 30): the operator's GetQuery
is one snapshot on SQLite and on PostgreSQL, so the reports it shows never fall below what
was acknowledged before the read, and every round's count only grows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from client.channels import open_aio_channel
from ldpcollect.mechanisms import RandomizedResponse
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect.wire import mechanism_to_proto, scheme_from_text
from tests.aggregator.conftest import ADMIN, TOKEN, Device
from tests.serving import run_cli, serving, spawn_serve

RR = RandomizedResponse("0.75", "0.5")
TARGETS = tuple(range(1, 9))


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        with serving(tmp_path / "agg.db", TOKEN) as served:
            yield served.address
        return
    url = request.getfixturevalue("fresh_postgres_url")
    run_cli(TOKEN, "store", "migrate", "--store", url)
    served = spawn_serve(TOKEN, "--store", url)
    try:
        yield served.address
    finally:
        served.proc.terminate()
        assert served.proc.wait(timeout=30) == 0


async def test_progress_polled_while_batches_commit_never_shows_fewer_than_acknowledged(
    server: str,
) -> None:
    rng = np.random.default_rng(30)
    devices = [Device(RR, int(rng.integers(1, 9)), TARGETS) for _ in range(1200)]
    acknowledged = 0
    seen: list[tuple[int, int]] = []  # (acknowledged before the read, reports it showed)
    async with open_aio_channel(server) as channel:
        collector, admin = pb_grpc.CollectorStub(channel), pb_grpc.AdminStub(channel)
        await admin.CreateQuery(
            pb.CreateQueryRequest(
                query_id="progress",
                mechanism=mechanism_to_proto(RR),
                location_scheme=scheme_from_text("grid"),
                targets=TARGETS,
                min_reports=1,
            ),
            metadata=ADMIN,
        )
        finished = asyncio.Event()

        async def poll() -> None:
            while not finished.is_set():
                before = acknowledged
                query = await admin.GetQuery(
                    pb.GetQueryRequest(query_id="progress"), metadata=ADMIN, timeout=30
                )
                seen.append((before, sum(query.reports_per_round)))

        poller = asyncio.create_task(poll())
        try:
            for start in range(0, len(devices), 40):
                batch = [d.report("progress", 1) for d in devices[start : start + 40]]
                done = await collector.SubmitBatch(pb.SubmitBatchRequest(reports=batch))
                assert done.accepted == len(batch)
                acknowledged += done.accepted
        finally:
            finished.set()
            await poller
    assert len(seen) > 10
    assert [(b, shown) for b, shown in seen if shown < b] == []
    shown = [s for _, s in seen]
    assert shown == sorted(shown)  # one snapshot a read: a later read never shows fewer
