"""Ingest throughput: the aggregator's durable acknowledgements next to a bare counting server.

Both servers run as their own processes on 127.0.0.1 and get the same pre-built reports on the
same three paths (unary, client stream, batch) from this process, in one run, so the ratio
holds however fast the machine is today. After each aggregator run the benchmark checks that
the aggregator counted every acknowledged report (nothing acknowledged is lost).

    python -m bench.ingest [--reports 20000] [--targets 100] [--json] [--plot FILE.png]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from client.loadgen import MODES, LoadResult, build_reports, run_load
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc

ADMIN_TOKEN = "bench-admin-token"
# Enough reports per path that each measurement lasts a few seconds on 2 cores.
DEFAULT_REPORTS = {"unary": 20_000, "stream": 100_000, "batch": 400_000}
console = Console(stderr=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def process(args: list[str], port: int) -> Iterator[str]:
    """Start a server process and yield its address once it accepts connections."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    target = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"server exited early ({proc.returncode}): {err}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server did not listen on {target}") from None
                time.sleep(0.1)
        yield target
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def create_query(target: str, query_id: str, n_targets: int) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        admin = pb_grpc.AdminStub(channel)
        await admin.CreateQuery(
            pb.CreateQueryRequest(
                query_id=query_id,
                description="ingest benchmark",
                mechanism=pb.MechanismSpec(
                    randomized_response=pb.RandomizedResponse(flip1="0.85", flip2="0.3")
                ),
                location_scheme=pb.LocationScheme(grid=pb.GridScheme()),
                targets=list(range(1, n_targets + 1)),
                min_reports=1,
            ),
            metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),),
        )


async def counted(target: str, query_id: str) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        admin = pb_grpc.AdminStub(channel)
        query = await admin.GetQuery(
            pb.GetQueryRequest(query_id=query_id),
            metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),),
        )
        return int(query.reports_per_round[0]) if query.reports_per_round else 0


@dataclass
class Row:
    mode: str
    bare: LoadResult
    aggregator: LoadResult
    counted: int

    def to_json(self) -> dict[str, object]:
        def one(r: LoadResult) -> dict[str, object]:
            return {
                "reports_per_second": round(r.reports_per_second, 1),
                "acknowledged": r.acknowledged,
                "rejected": r.rejected,
                "seconds": round(r.seconds, 3),
                "rpc_latency_ms_p50": round(r.latency_ms(0.5), 3),
                "rpc_latency_ms_p99": round(r.latency_ms(0.99), 3),
            }

        return {
            "mode": self.mode,
            "bare": one(self.bare),
            "aggregator": one(self.aggregator),
            "ratio": round(self.aggregator.reports_per_second / self.bare.reports_per_second, 3),
            "aggregator_counted": self.counted,
            "lost": self.aggregator.acknowledged - self.counted,
        }


async def measure(
    target: str, mode: str, reports: list[pb.Report], args: argparse.Namespace, label: str
) -> LoadResult:
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"{label} {mode}", total=len(reports))
        return await run_load(
            target,
            reports,
            mode,
            concurrency=args.concurrency,
            chunk=args.chunk,
            on_progress=lambda n: progress.advance(task, n),
        )


async def run(args: argparse.Namespace) -> list[Row]:
    bare: dict[str, LoadResult] = {}
    aggregated: dict[str, LoadResult] = {}
    counts: dict[str, int] = {}
    modes = args.modes.split(",")
    reports = {
        m: build_reports(f"bench-{m}", args.targets, args.reports or DEFAULT_REPORTS[m], seed=i)
        for i, m in enumerate(modes)
    }
    port = free_port()
    with process([sys.executable, "-m", "bench.bare_server", "--port", str(port)], port) as t:
        for mode in modes:
            bare[mode] = await measure(t, mode, reports[mode], args, "bare")
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        serve = [
            sys.executable,
            "-m",
            "ldpcollect_cli.main",
            "serve",
            "--db",
            str(Path(tmp) / "bench.db"),
            "--listen",
            f"127.0.0.1:{port}",
            "--admin-token",
            ADMIN_TOKEN,
        ]
        with process(serve, port) as t:
            for mode in modes:
                await create_query(t, f"bench-{mode}", args.targets)
                aggregated[mode] = await measure(t, mode, reports[mode], args, "aggregator")
                counts[mode] = await counted(t, f"bench-{mode}")
    return [Row(m, bare[m], aggregated[m], counts[m]) for m in modes]


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    xs = range(len(rows))
    width = 0.38
    ax.bar(
        [x - width / 2 for x in xs],
        [r.bare.reports_per_second for r in rows],
        width,
        label="bare grpc.aio (counts only)",
    )
    ax.bar(
        [x + width / 2 for x in xs],
        [r.aggregator.reports_per_second for r in rows],
        width,
        label="aggregator (durable ack, SQLite WAL)",
    )
    for x, r in zip(xs, rows, strict=True):
        ratio = r.aggregator.reports_per_second / r.bare.reports_per_second
        ax.annotate(
            f"{ratio:.0%}",
            (x + width / 2, r.aggregator.reports_per_second),
            ha="center",
            va="bottom",
        )
    ax.set_xticks(list(xs), [r.mode for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("reports acknowledged per second (log scale)")
    ax.set_title("Ingest on 127.0.0.1: aggregator vs bare server, same run")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--reports",
        type=int,
        default=None,
        help="reports per path (default: unary 20,000, stream 100,000, batch 400,000)",
    )
    parser.add_argument("--targets", type=int, default=100, help="answer bits per report")
    parser.add_argument("--concurrency", type=int, default=64, help="RPCs in flight")
    parser.add_argument("--chunk", type=int, default=500, help="reports per stream or batch")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--plot", type=Path, help="also draw a bar chart to this PNG")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    rows = asyncio.run(run(args))
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        print(
            json.dumps(
                {
                    "reports_per_path": args.reports,
                    "targets": args.targets,
                    "concurrency": args.concurrency,
                    "chunk": args.chunk,
                    "results": [r.to_json() for r in rows],
                },
                indent=2,
            )
        )
        return
    table = Table(title=f"Ingest on 127.0.0.1, {args.targets} targets per report")
    for col in (
        "path",
        "reports",
        "bare reports/s",
        "aggregator reports/s",
        "ratio",
        "agg p50 ms",
        "agg p99 ms",
        "lost",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        j = r.to_json()
        table.add_row(
            r.mode,
            f"{r.bare.reports:,}",
            f"{r.bare.reports_per_second:,.0f}",
            f"{r.aggregator.reports_per_second:,.0f}",
            f"{j['ratio']:.2f}",
            f"{r.aggregator.latency_ms(0.5):.1f}",
            f"{r.aggregator.latency_ms(0.99):.1f}",
            str(j["lost"]),
        )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
