"""Overload: what `ldpcollect serve` answers when more arrives than it can take at once.

Each scenario starts its own aggregator process (`ldpcollect serve` on a temporary SQLite file,
127.0.0.1) so its peak memory is its own, then:

- `unary-N`: N SubmitReport calls started at the same moment (spread over 8 channels), each
  with a 30 s deadline. Prints the rate, latency percentiles, the statuses by code and how
  many carried a retry hint (`grpc-retry-pushback-ms`).
- `sustained-N`: N callers each calling SubmitReport back to back for `--seconds` (a refused
  call waits 20 ms and moves on to its next report). Before the edge's fix, 2,000 callers
  for 10 s got 30-38% CANCELLED (gRPC's queue of calls not yet taken by the server overflowing)
  or, with 1,000 streams per connection, UNAVAILABLE without a hint; now every refusal is
  RESOURCE_EXHAUSTED with a hint (docs/design.md, "Every role's edge").
- `idle-S`: S StreamReports calls that send one report and then nothing, held open for
  `--hold` seconds: how many the server ended (and with which status) and how many it kept.

After every scenario the aggregator's count must equal the acknowledged reports. Peak RSS is
the server's VmHWM. Bounded in count and time: every call has a deadline, and the process is
stopped at the end.

    python -m bench.overload [--unary 500,2000] [--sustained 2000] [--seconds 10] [--idle 3000]
        [--hold 8] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc
import numpy as np
from rich.console import Console
from rich.table import Table

from bench.ingest import ADMIN_TOKEN, counted, create_query
from client.loadgen import build_reports
from client.retry import pushback_seconds
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc

console = Console(stderr=True)
QUERY = "overload"
TARGETS = 100
CHANNELS = 8


@dataclass
class Outcome:
    scenario: str
    calls: int
    seconds: float
    acknowledged: int
    counted: int
    statuses: dict[str, int]
    with_pushback: int
    latency_ms: dict[str, float]
    peak_rss_mb: float
    still_open: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def lost(self) -> int:
        return self.acknowledged - self.counted


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


READY = "ldpcollect aggregator serving on "


@contextmanager
def aggregator(extra_args: list[str]) -> Iterator[tuple[str, int]]:
    """`ldpcollect serve` on a temporary database: yields (address, pid), stops it after."""
    with tempfile.TemporaryDirectory(prefix="ldp-overload-") as tmp:
        args = [sys.executable, "-m", "ldpcollect_cli.main", "serve", "--db", f"{tmp}/o.db"]
        args += ["--listen", "127.0.0.1:0", "--admin-token", ADMIN_TOKEN, *extra_args]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        try:
            if not line.startswith(READY):
                raise RuntimeError(f"serve did not start: {line!r}")
            yield line[len(READY) :].split()[0], proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()


def _pushback(err: grpc.aio.AioRpcError) -> bool:
    return pushback_seconds(err) is not None


def _percentiles(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {}
    values = np.asarray(latencies)
    return {f"p{q}": round(float(np.percentile(values, q)), 1) for q in (50, 90, 99)} | {
        "max": round(float(values.max()), 1)
    }


async def unary_storm(target: str, n: int) -> tuple[Counter[str], int, int, list[float], float]:
    reports = build_reports(QUERY, TARGETS, n, seed=n)
    channels = [grpc.aio.insecure_channel(target) for _ in range(CHANNELS)]
    stubs = [pb_grpc.CollectorStub(c) for c in channels]
    await asyncio.gather(*(c.channel_ready() for c in channels))
    statuses: Counter[str] = Counter()
    latencies: list[float] = []
    pushback = 0
    acknowledged = 0

    async def one(i: int) -> None:
        nonlocal pushback, acknowledged
        started = time.perf_counter()
        try:
            await stubs[i % CHANNELS].SubmitReport(
                pb.SubmitReportRequest(report=reports[i]), timeout=30
            )
            statuses["OK"] += 1
            acknowledged += 1
        except grpc.aio.AioRpcError as err:
            statuses[err.code().name] += 1
            pushback += _pushback(err)
        latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    seconds = time.perf_counter() - started
    await asyncio.gather(*(c.close(None) for c in channels))
    return statuses, pushback, acknowledged, latencies, seconds


async def sustained_storm(
    target: str, n: int, seconds: float
) -> tuple[Counter[str], int, int, list[float], float]:
    """n callers looping SubmitReport for `seconds`, each report sent once."""
    reports = build_reports(QUERY, TARGETS, 200_000, seed=3 * n)
    channels = [grpc.aio.insecure_channel(target) for _ in range(CHANNELS)]
    stubs = [pb_grpc.CollectorStub(c) for c in channels]
    await asyncio.gather(*(c.channel_ready() for c in channels))
    statuses: Counter[str] = Counter()
    latencies: list[float] = []
    pushback = acknowledged = 0
    numbers = iter(range(len(reports)))
    started = time.perf_counter()
    deadline = started + seconds

    async def caller(k: int) -> None:
        nonlocal pushback, acknowledged
        for i in numbers:
            if time.perf_counter() > deadline:
                return
            began = time.perf_counter()
            try:
                reply = await stubs[k % CHANNELS].SubmitReport(
                    pb.SubmitReportRequest(report=reports[i]), timeout=30
                )
                statuses["OK"] += 1
                acknowledged += not reply.ack.duplicate
            except grpc.aio.AioRpcError as err:
                statuses[err.code().name] += 1
                pushback += _pushback(err)
                await asyncio.sleep(0.02)
            latencies.append((time.perf_counter() - began) * 1000)

    await asyncio.gather(*(caller(k) for k in range(n)))
    elapsed = time.perf_counter() - started
    await asyncio.gather(*(c.close(None) for c in channels))
    return statuses, pushback, acknowledged, latencies, elapsed


async def idle_streams(
    target: str, n: int, hold: float
) -> tuple[Counter[str], int, int, int, float]:
    """n streams that send one report each and then stay silent for `hold` seconds."""
    reports = build_reports(QUERY, TARGETS, n, seed=7 * n)
    channels = [grpc.aio.insecure_channel(target) for _ in range(CHANNELS)]
    await asyncio.gather(*(c.channel_ready() for c in channels))
    stubs = [pb_grpc.CollectorStub(c) for c in channels]
    release = asyncio.Event()
    statuses: Counter[str] = Counter()
    pushback = 0
    acknowledged = 0

    async def silent_after_one(report: pb.Report) -> AsyncIterator[pb.SubmitReportRequest]:
        yield pb.SubmitReportRequest(report=report)
        await release.wait()

    async def one(i: int) -> None:
        nonlocal pushback, acknowledged
        try:
            reply = await stubs[i % CHANNELS].StreamReports(
                silent_after_one(reports[i]), timeout=hold + 30
            )
            statuses["OK"] += 1
            acknowledged += reply.accepted + reply.duplicates
        except grpc.aio.AioRpcError as err:
            statuses[err.code().name] += 1
            pushback += _pushback(err)

    started = time.perf_counter()
    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    await asyncio.sleep(hold)
    still_open = sum(not t.done() for t in tasks)
    release.set()  # let the survivors finish normally
    await asyncio.gather(*tasks)
    seconds = time.perf_counter() - started
    await asyncio.gather(*(c.close(None) for c in channels))
    return statuses, pushback, acknowledged, still_open, seconds


async def scenario(
    kind: str, n: int, hold: float, serve_args: list[str], duration: float = 10.0
) -> Outcome:
    with aggregator(serve_args) as (target, pid):
        await create_query(target, QUERY, TARGETS)
        if kind == "unary":
            statuses, pushback, acked, latencies, seconds = await unary_storm(target, n)
            still_open = 0
        elif kind == "sustained":
            storm = await sustained_storm(target, n, duration)
            statuses, pushback, acked, latencies, seconds = storm
            still_open = 0
        else:
            statuses, pushback, acked, still_open, seconds = await idle_streams(target, n, hold)
            latencies = []
        total = await counted(target, QUERY)
        rss = peak_rss_mb(pid)
    return Outcome(
        scenario=f"{kind}-{n}",
        calls=n,
        seconds=round(seconds, 2),
        acknowledged=acked,
        counted=total,
        statuses=dict(statuses),
        with_pushback=pushback,
        latency_ms=_percentiles(latencies),
        peak_rss_mb=round(rss, 1),
        still_open=still_open,
    )


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--unary", default="500,2000", help="concurrent unary calls per wave")
    parser.add_argument("--sustained", default="", help="callers looping SubmitReport")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long they loop")
    parser.add_argument("--idle", default="3000", help="idle streams to hold open")
    parser.add_argument("--hold", type=float, default=8.0, help="seconds to hold idle streams")
    parser.add_argument(
        "--serve-args",
        default="",
        help="extra `ldpcollect serve` arguments, e.g. '--stream-idle-timeout 3'",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    serve_args = args.serve_args.split()
    outcomes: list[Outcome] = []
    plan = [("unary", n) for n in _ints(args.unary)]
    plan += [("sustained", n) for n in _ints(args.sustained)]
    plan += [("idle", n) for n in _ints(args.idle)]
    for kind, n in plan:
        console.print(f"[dim]{kind} {n} ...[/dim]")
        outcomes.append(asyncio.run(scenario(kind, n, args.hold, serve_args, args.seconds)))
    if args.json:
        print(json.dumps([asdict(o) | {"lost": o.lost} for o in outcomes], indent=2))
        return
    table = Table(title="Overload on 127.0.0.1 (one aggregator process per scenario)")
    for col in (
        "scenario", "seconds", "acked", "lost", "statuses", "pushback", "p50/p99/max ms",
        "open after hold", "peak RSS MB",
    ):  # fmt: skip
        table.add_column(col, justify="right" if col not in ("scenario", "statuses") else "left")
    for o in outcomes:
        lat = o.latency_ms
        table.add_row(
            o.scenario,
            f"{o.seconds:.2f}",
            f"{o.acknowledged:,}",
            str(o.lost),
            ", ".join(f"{k} {v}" for k, v in sorted(o.statuses.items())),
            str(o.with_pushback),
            f"{lat['p50']:.0f}/{lat['p99']:.0f}/{lat['max']:.0f}" if lat else "-",
            str(o.still_open) if o.scenario.startswith("idle") else "-",
            f"{o.peak_rss_mb:.0f}",
        )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
