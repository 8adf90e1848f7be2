"""Load generation: push many pre-built reports at a Collector as fast as it acknowledges them.

The reports are valid for a randomized-response query (random answer bits, zero padding, unique
16-byte pseudonyms and report ids) and are built before the clock starts, so what is measured
is the server's acknowledgement rate on one of three paths: one RPC per report (`unary`), a
client stream of reports (`stream`) or one message holding many reports (`batch`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from client.channels import open_aio_channel
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc

MODES = ("unary", "stream", "batch")


@dataclass(frozen=True)
class LoadResult:
    mode: str
    reports: int
    acknowledged: int
    rejected: int
    seconds: float
    rpc_latencies_ms: Sequence[float] = field(repr=False)

    @property
    def reports_per_second(self) -> float:
        return self.acknowledged / self.seconds if self.seconds > 0 else 0.0

    def latency_ms(self, quantile: float) -> float:
        if not self.rpc_latencies_ms:
            return float("nan")
        return float(np.quantile(np.asarray(self.rpc_latencies_ms), quantile))


def build_reports(
    query_id: str, n_targets: int, n_reports: int, seed: int, round_: int = 1
) -> list[pb.Report]:
    """Valid reports with random answers; ids are unique with overwhelming probability."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, size=(n_reports, n_targets), dtype=np.uint8)
    answers = np.packbits(bits, axis=1)  # padding bits are zero
    ids = rng.integers(0, 256, size=(n_reports, 32), dtype=np.uint8)
    return [
        pb.Report(
            query_id=query_id,
            round=round_,
            device_pseudonym=ids[i, :16].tobytes(),
            report_id=ids[i, 16:].tobytes(),
            answers=answers[i].tobytes(),
        )
        for i in range(n_reports)
    ]


def _chunks(items: Sequence[pb.Report], size: int) -> list[Sequence[pb.Report]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


async def run_load(
    target: str,
    reports: Sequence[pb.Report],
    mode: str,
    concurrency: int = 64,
    chunk: int = 500,
    on_progress: Callable[[int], None] | None = None,
    tls_ca: str | Path | None = None,
) -> LoadResult:
    """Send `reports` to the Collector at `target` and count acknowledgements (over TLS when
    `tls_ca`, a PEM CA file, is given).

    `chunk` is the number of reports per stream (stream mode) or per message (batch mode).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    options = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
    latencies: list[float] = []
    acknowledged = 0
    rejected = 0
    async with open_aio_channel(target, tls_ca, options) as channel:
        stub = pb_grpc.CollectorStub(channel)
        await channel.channel_ready()
        units: list[Sequence[pb.Report]] = (
            [[r] for r in reports] if mode == "unary" else _chunks(reports, chunk)
        )
        queue: asyncio.Queue[Sequence[pb.Report]] = asyncio.Queue()
        for unit in units:
            queue.put_nowait(unit)

        async def worker() -> None:
            nonlocal acknowledged, rejected
            while True:
                try:
                    unit = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                started = time.perf_counter()
                if mode == "unary":
                    await stub.SubmitReport(pb.SubmitReportRequest(report=unit[0]))
                    acknowledged += 1
                else:
                    if mode == "stream":
                        response = await stub.StreamReports(
                            iter([pb.SubmitReportRequest(report=r) for r in unit])
                        )
                    else:
                        response = await stub.SubmitBatch(pb.SubmitBatchRequest(reports=unit))
                    acknowledged += response.accepted + response.duplicates
                    rejected += len(response.rejected)
                latencies.append((time.perf_counter() - started) * 1000.0)
                if on_progress is not None:
                    on_progress(len(unit))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    return LoadResult(mode, len(reports), acknowledged, rejected, seconds, latencies)
