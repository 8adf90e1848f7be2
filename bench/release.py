"""Release time: the Release RPC of a wide query, and whether it grows with the reports held.

Starts `ldpcollect serve` on a fresh file and, for each count in `--reports`, creates a
randomized-response query over `--targets` targets (with discrete Gaussian release noise
`--noise-sigma`, 0 for none), pushes that many reports through SubmitBatch, closes it and times
the Release RPC from this process (claims, noise, estimates, the stored record, the reply; the
reports are deleted in the same transaction). `ratio` is each release's time over the second
one's, measured in the same run: 1.0 when release time is flat in the reports held. The first
release is the first of these query parameters: its privacy claims are computed in the
background from CreateQuery on (while the reports are sent), or, by an aggregator without
that, during the release itself; later ones find them cached.

    python -m bench.release [--targets 65536] [--reports 1000,1000,20000] [--noise-sigma 2]
                            [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
from rich.console import Console
from rich.table import Table

from bench.held import Server, batch_bytes
from bench.ingest import ADMIN_TOKEN, create_query
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc

console = Console(stderr=True)
_AUTH = (("authorization", f"Bearer {ADMIN_TOKEN}"),)


async def one_release(
    target: str, query_id: str, n_reports: int, args: argparse.Namespace
) -> dict[str, float]:
    """Create, fill, close and release one query; the release's seconds and sizes."""
    async with grpc.aio.insecure_channel(
        target, options=[("grpc.max_receive_message_length", 256 << 20)]
    ) as channel:
        admin = pb_grpc.AdminStub(channel)
        await create_query(target, query_id, args.targets, args.noise_sigma)
        submit = channel.unary_unary(
            "/ldpcollect.v1.Collector/SubmitBatch",
            request_serializer=None,
            response_deserializer=pb.SubmitReportsResponse.FromString,
        )
        rng = np.random.default_rng(len(query_id) + n_reports)
        chunk = max(1, min(n_reports, (3 << 20) // (args.targets // 8 + 40)))  # < 4 MiB
        left = n_reports
        while left:
            n = min(chunk, left)
            reply = await submit(batch_bytes(query_id, args.targets, n, rng))
            left -= n
            assert reply.accepted == n, reply
        await admin.CloseQuery(pb.CloseQueryRequest(query_id=query_id), metadata=_AUTH)
        started = time.perf_counter()
        release = await admin.Release(pb.ReleaseRequest(query_id=query_id), metadata=_AUTH)
        seconds = time.perf_counter() - started
        assert len(release.estimates) == args.targets
        return {"reports": n_reports, "seconds": round(seconds, 3)}


async def run(args: argparse.Namespace) -> list[dict[str, float]]:
    counts = [int(x) for x in args.reports.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "release.db", args.server_code)
        try:
            await server.ready(None)
            for k, n in enumerate(counts):
                console.print(f"releasing a query of {args.targets:,} targets, {n:,} reports")
                rows.append(await one_release(server.target, f"release-{k}", n, args))
        finally:
            server.stop(15)
    # The first release also computes the privacy claims of these parameters (cached after);
    # the baseline is the next one.
    base = rows[min(1, len(rows) - 1)]["seconds"]
    for k, row in enumerate(rows):
        row["claims_cached"] = k > 0
        row["ratio"] = round(row["seconds"] / base, 2) if base else float("nan")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--targets", type=int, default=65_536)
    parser.add_argument(
        "--reports", default="1000,1000,20000", help="reports held, one release each"
    )
    parser.add_argument("--noise-sigma", default="2", help="release noise sigma (0: none)")
    parser.add_argument("--server-code", type=Path, help="run the server from this checkout")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.noise_sigma in ("0", ""):
        args.noise_sigma = None
    rows = asyncio.run(run(args))
    if args.json:
        print(
            json.dumps(
                {"targets": args.targets, "noise_sigma": args.noise_sigma, "results": rows},
                indent=2,
            )
        )
        return
    table = Table(title=f"Release RPC, {args.targets:,} targets, noise sigma {args.noise_sigma}")
    for col in ("reports held", "claims cached", "seconds", "ratio to the second"):
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(
            f"{int(row['reports']):,}",
            "yes" if row["claims_cached"] else "no",
            f"{row['seconds']:.3f}",
            f"{row['ratio']:.2f}",
        )
    Console(width=100).print(table)


if __name__ == "__main__":
    main()
