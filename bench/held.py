"""Held reports: the aggregator's memory per million reports held, and its restart time.

Starts `ldpcollect serve` on a fresh file, creates a randomized-response query, pushes
`--reports` valid reports through SubmitBatch (built as serialized batches with numpy, so the
benchmark itself stays small), and reads the server's resident memory (VmRSS) after the first
tenth (which warms the ingest path's own buffers) and at the end: the growth per million held
reports. Then it kills the server that ingested (SIGKILL) and times a restart until the
query answers, then stops that one cleanly (SIGTERM) and times that restart too, each against
the start of a server on an empty file measured in the same run. After every restart it
checks that every acknowledged report is still counted.

    python -m bench.held [--reports 1000000] [--targets 100] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench.ingest import ADMIN_TOKEN, counted, create_query, free_port
from ldpcollect.v1 import ldpcollect_pb2 as pb

console = Console(stderr=True)
QUERY = "held"
_SUBMIT_BATCH = "/ldpcollect.v1.Collector/SubmitBatch"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def batch_bytes(query_id: str, n_targets: int, n: int, rng: np.random.Generator) -> bytes:
    """A serialized SubmitBatchRequest of `n` valid random round-1 reports, built with numpy."""
    answer_bytes = (n_targets + 7) // 8
    qid = query_id.encode()
    head = b"\x0a" + _varint(len(qid)) + qid + b"\x10\x01\x1a\x10"
    body_len = len(head) + 16 + 2 + 16 + 1 + len(_varint(answer_bytes)) + answer_bytes
    prefix = b"\x0a" + _varint(body_len) + head

    def same(part: bytes) -> np.ndarray:
        return np.broadcast_to(np.frombuffer(part, dtype=np.uint8), (n, len(part)))

    bits = rng.integers(0, 2, size=(n, n_targets), dtype=np.uint8)
    rows = np.hstack(
        [
            same(prefix),
            rng.integers(0, 256, size=(n, 16), dtype=np.uint8),
            same(b"\x22\x10"),
            rng.integers(0, 256, size=(n, 16), dtype=np.uint8),
            same(b"\x2a" + _varint(answer_bytes)),
            np.packbits(bits, axis=1),  # padding bits are zero
        ]
    )
    return rows.tobytes()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Server:
    """`ldpcollect serve` on `db`, as a child process."""

    def __init__(self, db: Path, code: Path | None = None) -> None:
        """`code`: run the server from that checkout instead (a before/after comparison)."""
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "ldpcollect_cli.main", "serve", "--db", str(db)]
        args += ["--listen", self.target, "--admin-token", ADMIN_TOKEN]
        env = dict(os.environ)
        if code is not None:
            env["PYTHONPATH"] = str(code)
        # `python -m` puts the working directory first on the path: run from that checkout.
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=code
        )

    async def ready(self, query_id: str | None) -> float:
        """Seconds from the process start until it serves (`query_id` answers, if given)."""
        started = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"server exited ({self.proc.returncode}): {err}")
            try:
                if query_id is None:
                    async with grpc.aio.insecure_channel(self.target) as channel:
                        await asyncio.wait_for(channel.channel_ready(), 0.2)
                else:
                    await counted(self.target, query_id)
                return time.perf_counter() - started
            except (grpc.aio.AioRpcError, TimeoutError):
                await asyncio.sleep(0.02)

    def stop(self, sig: int) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=120)


@dataclass
class HeldResult:
    reports: int
    targets: int
    acknowledged: int
    ingest_seconds: float
    rss_before_mb: float
    rss_after_mb: float
    rss_mb_per_million: float
    empty_start_seconds: float
    restart_after_stop_seconds: float
    restart_after_kill_seconds: float
    counted_after_stop: int
    counted_after_kill: int


async def push(target: str, args: argparse.Namespace, n_reports: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    acknowledged = 0
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(
            _SUBMIT_BATCH,
            request_serializer=None,
            response_deserializer=pb.SubmitReportsResponse.FromString,
        )
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("pushing reports", total=n_reports)
            left = n_reports
            while left:
                n = min(args.chunk, left)
                pending = []
                for _ in range(args.concurrency):
                    if not left:
                        break
                    n = min(args.chunk, left)
                    pending.append(call(batch_bytes(QUERY, args.targets, n, rng)))
                    left -= n
                for reply in await asyncio.gather(*pending):
                    acknowledged += reply.accepted
                    progress.advance(task, reply.accepted)
    return acknowledged


async def run(args: argparse.Namespace) -> HeldResult:
    with tempfile.TemporaryDirectory() as tmp:
        empty = Server(Path(tmp) / "empty.db", args.server_code)
        empty_start = await empty.ready(None)
        empty.stop(signal.SIGTERM)
        db = Path(tmp) / "held.db"
        server = Server(db, args.server_code)
        await server.ready(None)
        await create_query(server.target, QUERY, args.targets)
        # A first tenth warms the ingest path's own buffers; memory is measured from there.
        warm = args.reports // 10
        started = time.perf_counter()
        acknowledged = await push(server.target, args, warm, args.seed)
        await asyncio.sleep(0.5)
        before = rss_bytes(server.proc.pid)
        grown = await push(server.target, args, args.reports - warm, args.seed + 1)
        acknowledged += grown
        ingest = time.perf_counter() - started
        await asyncio.sleep(0.5)
        after = rss_bytes(server.proc.pid)
        # The kill hits the server that ingested (its last commits still in the write-ahead
        # log, as in a crash under load); the clean stop then hits the restarted one.
        server.stop(signal.SIGKILL)
        server = Server(db, args.server_code)
        after_kill = await server.ready(QUERY)
        counted_kill = await counted(server.target, QUERY)
        server.stop(signal.SIGTERM)
        server = Server(db, args.server_code)
        after_stop = await server.ready(QUERY)
        counted_stop = await counted(server.target, QUERY)
        server.stop(signal.SIGTERM)
    return HeldResult(
        reports=args.reports,
        targets=args.targets,
        acknowledged=acknowledged,
        ingest_seconds=round(ingest, 2),
        rss_before_mb=round(before / 2**20, 1),
        rss_after_mb=round(after / 2**20, 1),
        rss_mb_per_million=round((after - before) / 2**20 / (grown / 1e6), 1),
        empty_start_seconds=round(empty_start, 2),
        restart_after_stop_seconds=round(after_stop, 2),
        restart_after_kill_seconds=round(after_kill, 2),
        counted_after_stop=counted_stop,
        counted_after_kill=counted_kill,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--reports", type=int, default=1_000_000, help="reports to hold")
    parser.add_argument("--targets", type=int, default=100, help="answer bits per report")
    parser.add_argument("--chunk", type=int, default=5_000, help="reports per batch")
    parser.add_argument("--concurrency", type=int, default=4, help="batches in flight")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--server-code",
        type=Path,
        help="run the server from this checkout (e.g. /work/main), for before/after figures",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(asdict(result), indent=2))
        return
    table = Table(title=f"{result.acknowledged:,} held reports, {result.targets} targets")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in asdict(result).items():
        table.add_row(name, f"{value:,}" if isinstance(value, int) else str(value))
    Console(width=100).print(table)
    lost = result.acknowledged - min(result.counted_after_stop, result.counted_after_kill)
    if lost:
        raise SystemExit(f"{lost} acknowledged reports were not counted after a restart")


if __name__ == "__main__":
    main()
