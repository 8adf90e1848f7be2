"""The PostgreSQL store's own cost per report, without gRPC: `PostgresStore.submit` of
pre-built groups of new reports (`--chunk` each, `--concurrency` at once), in a child
process per checkout, interleaved (`--server-code DIR` adds that checkout as "base").

The end-to-end `bench.stores` shares two cores with the load generator, the replicas and
whatever else runs; this isolates what the store change moves: CPU per report of the
replica process (its store work only: the rules on each group, psycopg, the event loop) and
of the PostgreSQL processes working for the run's database (its backends and the server's
shared processes). Each checkout gets a database of its own, dropped afterwards.

    python -m bench.pg_store_costs [--groups 200] [--repeat 3] [--server-code DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_SERVER = "postgresql://postgres@127.0.0.1:5432"


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def child(url: str, groups: int, chunk: int, concurrency: int, targets: int) -> None:
    """Run in the checkout under test (its `aggregator` first on the path): print JSON."""
    import numpy as np

    from aggregator.model import QuerySpec
    from aggregator.rounds import ReportColumns
    from aggregator.store.postgres import PostgresStore
    from ldpcollect.mechanisms import RandomizedResponse

    store = PostgresStore(url)
    await store.open()
    spec = QuerySpec(
        "costs", "", RandomizedResponse("0.85", "0.3"), "grid",
        tuple(range(1, targets + 1)), 1, None,
    )  # fmt: skip
    await store.create_query(spec, 0.0)
    rng = np.random.default_rng(1)
    work = []
    for _ in range(groups):
        keys = rng.integers(0, 256, size=(chunk, 32), dtype=np.uint8)
        bits = rng.integers(0, 2, size=(chunk, targets), dtype=np.uint8)
        answers = np.packbits(bits, axis=1)
        work.append(
            ReportColumns(
                ["costs"] * chunk, [1] * chunk,
                [keys[i, :16].tobytes() for i in range(chunk)],
                [keys[i, 16:].tobytes() for i in range(chunk)],
                [answers[i].tobytes() for i in range(chunk)],
            )
        )  # fmt: skip
    print("ready", flush=True)
    sys.stdin.readline()  # the parent reads the database's CPU, then says go
    pending = iter(work)
    started, cpu = time.perf_counter(), _process_cpu()

    async def submitter() -> None:
        for columns in pending:
            result = await store.submit(columns)
            assert result.accepted == chunk, result

    await asyncio.gather(*(submitter() for _ in range(concurrency)))
    seconds, cpu = time.perf_counter() - started, _process_cpu() - cpu
    print(json.dumps({"seconds": seconds, "cpu": cpu}), flush=True)
    sys.stdin.readline()  # the parent reads the database's CPU while the backends live
    await store.close()


def measure_one(code: Path | None, url: str, args: argparse.Namespace) -> dict[str, float]:
    from bench.stores import cpu_since, postgres_cpu

    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    options = [f"--{k}={getattr(args, k)}" for k in ("groups", "chunk", "concurrency", "targets")]
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", url, *options],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=code,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    database = url.rsplit("/", 1)[1]
    before = postgres_cpu(database)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    done = json.loads(proc.stdout.readline())
    database_cpu = cpu_since(before, postgres_cpu(database))
    proc.stdin.write("close\n")
    proc.stdin.flush()
    proc.wait()
    reports = args.groups * args.chunk
    return {
        "reports_per_second": reports / done["seconds"],
        "replica_cpu_us_per_report": done["cpu"] / reports * 1e6,
        "database_cpu_us_per_report": database_cpu / reports * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, default=200, help="groups submitted per run")
    parser.add_argument("--chunk", type=int, default=500, help="reports per group")
    parser.add_argument("--concurrency", type=int, default=16, help="submissions at once")
    parser.add_argument("--targets", type=int, default=100, help="answer bits per report")
    parser.add_argument("--repeat", type=int, default=3, help="runs per checkout (median)")
    parser.add_argument("--postgres", default=_SERVER, help="server URL without a database")
    parser.add_argument("--server-code", type=Path, help="also measure this checkout (base)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.child, args.groups, args.chunk, args.concurrency, args.targets))
        return
    import psycopg
    from psycopg import sql

    codes: dict[str, Path | None] = {"this": None}
    if args.server_code is not None:
        codes["base"] = args.server_code.resolve()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in codes}
    server = args.postgres.rstrip("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        for _ in range(args.repeat):
            for name, code in codes.items():
                database = f"ldpc_costs_{secrets.token_hex(4)}"
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
                try:
                    runs[name].append(measure_one(code, f"{server}/{database}", args))
                finally:
                    admin.execute(
                        sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database))
                    )
    medians = {
        name: {k: round(statistics.median(r[k] for r in found), 2) for k in found[0]}
        for name, found in runs.items()
    }
    if args.json:
        print(json.dumps({"medians": medians, "runs": runs}, indent=2))
        return
    for name, figures in medians.items():
        print(
            f"{name:5s} {figures['reports_per_second']:>10,.0f} reports/s   replica "
            f"{figures['replica_cpu_us_per_report']:.2f} µs/report   database "
            f"{figures['database_cpu_us_per_report']:.2f} µs/report   (median of {args.repeat})"
        )
    if "base" in medians:
        for key in medians["this"]:
            if medians["base"][key]:
                ratio = medians["this"][key] / medians["base"][key]
                print(f"this/base {key}: {ratio:.2f}")


if __name__ == "__main__":
    main()
