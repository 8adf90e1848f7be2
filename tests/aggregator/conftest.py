"""A real aggregator on 127.0.0.1 (ephemeral port) over a real SQLite file in tmp_path."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt
import pytest

from aggregator.config import AggregatorConfig
from aggregator.server import AggregatorServer
from ldpcollect.mechanisms import Mechanism
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect.wire import mechanism_to_proto, scheme_from_text

TOKEN = "test-admin-token"
ADMIN = (("authorization", f"Bearer {TOKEN}"),)


@dataclass
class Harness:
    server: AggregatorServer
    channel: grpc.aio.Channel
    collector: pb_grpc.CollectorAsyncStub
    admin: pb_grpc.AdminAsyncStub

    async def create(
        self,
        query_id: str,
        mech: Mechanism,
        targets: Sequence[int],
        min_reports: int = 1,
        **extra: Any,
    ) -> pb.Query:
        return await self.admin.CreateQuery(
            pb.CreateQueryRequest(
                query_id=query_id,
                mechanism=mechanism_to_proto(mech),
                location_scheme=scheme_from_text("grid"),
                targets=targets,
                min_reports=min_reports,
                **extra,
            ),
            metadata=ADMIN,
        )

    async def query(self, query_id: str) -> pb.Query:
        return await self.admin.GetQuery(pb.GetQueryRequest(query_id=query_id), metadata=ADMIN)


@dataclass
class Device:
    """One simulated device: its draw for a query, pseudonym and per-round report ids."""

    mech: Mechanism
    location: int
    targets: Sequence[int]
    pseudonym: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    report_ids: dict[int, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.draw = self.mech.draw(self.location, self.targets)

    def report(self, query_id: str, round_: int) -> pb.Report:
        report_id = self.report_ids.setdefault(round_, secrets.token_bytes(16))
        return pb.Report(
            query_id=query_id,
            round=round_,
            device_pseudonym=self.pseudonym,
            report_id=report_id,
            answers=self.draw.answers(round_),
        )

    def bits(self, round_: int) -> npt.NDArray[np.int64]:
        packed = np.frombuffer(self.draw.answers(round_), dtype=np.uint8)
        return np.unpackbits(packed, count=len(self.targets)).astype(np.int64)


def expected_counts(devices: Sequence[Device], rounds: int, n_targets: int) -> list[list[int]]:
    """Per round, per target: the Yes count over these devices (which completed every round)."""
    totals = np.zeros((rounds, n_targets), dtype=np.int64)
    for device in devices:
        for r in range(rounds):
            totals[r] += device.bits(r + 1)
    return [[int(x) for x in row] for row in totals]


def make_config(db: Path, **overrides: Any) -> AggregatorConfig:
    settings: dict[str, Any] = {
        "db_path": db,
        "admin_token": TOKEN,
        "listen": "127.0.0.1:0",
        "metrics_port": None,
    }
    settings.update(overrides)
    return AggregatorConfig(**settings)


async def connect(server: AggregatorServer) -> Harness:
    port = await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return Harness(server, channel, pb_grpc.CollectorStub(channel), pb_grpc.AdminStub(channel))


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h = await connect(AggregatorServer(make_config(tmp_path / "agg.db")))
    try:
        yield h
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)
