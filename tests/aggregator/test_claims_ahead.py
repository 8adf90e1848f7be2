"""A query's privacy claims are computed in the background when it is created, so its first
release does not wait for them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from aggregator.release import DEFAULT_REPORTING_DELTA, ReleaseAccounting, Releaser
from aggregator.service import AdminService
from aggregator.store.sqlite import SqliteStore
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from tests.aggregator.conftest import ADMIN, TOKEN


async def test_claims_are_ready_after_create_and_match_the_release(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "claims.db")
    await store.open()
    accounting = ReleaseAccounting()
    server = grpc.aio.server()
    pb_grpc.add_AdminServicer_to_server(AdminService(store, TOKEN, Releaser(accounting)), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            admin = pb_grpc.AdminStub(channel)
            await admin.CreateQuery(
                pb.CreateQueryRequest(
                    query_id="wide",
                    mechanism=pb.MechanismSpec(
                        randomized_response=pb.RandomizedResponse(flip1="0.85", flip2="0.3")
                    ),
                    location_scheme=pb.LocationScheme(grid=pb.GridScheme()),
                    targets=list(range(1, 2_001)),
                    min_reports=1,
                    noise=pb.ReleaseNoise(sigma="2"),
                ),
                metadata=ADMIN,
            )
            info = store.query("wide")
            assert info is not None
            for _ in range(600):  # no release was asked for: only the create computes them
                if accounting.cached(info, DEFAULT_REPORTING_DELTA):
                    break
                await asyncio.sleep(0.05)
            assert accounting.cached(info, DEFAULT_REPORTING_DELTA)
            ahead = accounting.claims(info, DEFAULT_REPORTING_DELTA)
            assert ahead == ReleaseAccounting().claims(info, DEFAULT_REPORTING_DELTA)
    finally:
        await server.stop(None)
        await store.close()
