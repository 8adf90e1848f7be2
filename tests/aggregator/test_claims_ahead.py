"""A query's privacy claims are computed in the background when it is closed (and when it is
created, once the accounting code is loaded), so its release does not wait for them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from aggregator.model import QueryInfo
from aggregator.release import (
    DEFAULT_REPORTING_DELTA,
    ReleaseAccounting,
    Releaser,
    accounting_loaded,
)
from aggregator.service import AdminService
from aggregator.store.sqlite import SqliteStore
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from tests.aggregator.conftest import ADMIN, TOKEN


def _create(query_id: str, min_reports: int) -> pb.CreateQueryRequest:
    return pb.CreateQueryRequest(
        query_id=query_id,
        mechanism=pb.MechanismSpec(
            randomized_response=pb.RandomizedResponse(flip1="0.85", flip2="0.3")
        ),
        location_scheme=pb.LocationScheme(grid=pb.GridScheme()),
        targets=list(range(1, 2_001)),
        min_reports=min_reports,  # a different cache key per query
        noise=pb.ReleaseNoise(sigma="2"),
    )


async def _cached_soon(accounting: ReleaseAccounting, info: QueryInfo | None) -> bool:
    """Whether the claims of `info` get cached (no release is ever asked for here)."""
    assert info is not None
    for _ in range(1_200):
        if accounting.cached(info, DEFAULT_REPORTING_DELTA):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_claims_are_computed_at_close_and_at_create_once_loaded(tmp_path: Path) -> None:
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
            await admin.CreateQuery(_create("closed", 1), metadata=ADMIN)
            await admin.CloseQuery(pb.CloseQueryRequest(query_id="closed"), metadata=ADMIN)
            closed = store.query("closed")
            assert await _cached_soon(accounting, closed)
            assert accounting_loaded()
            await admin.CreateQuery(_create("created", 2), metadata=ADMIN)
            created = store.query("created")
            assert await _cached_soon(accounting, created)
            assert created is not None
            ahead = accounting.claims(created, DEFAULT_REPORTING_DELTA)
            assert ahead == ReleaseAccounting().claims(created, DEFAULT_REPORTING_DELTA)
    finally:
        await server.stop(None)
        await store.close()
