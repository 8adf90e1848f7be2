"""Stores side by side: the same batch workload against SQLite (one process) and PostgreSQL
(one replica, then two), in one run, with the cost per report on each side.

Each configuration runs `ldpcollect serve` processes on 127.0.0.1 and gets the same kind of
pre-built reports (a fresh query each, `--targets` answer bits) in SubmitBatch messages from
this process (through one round_robin channel over the replicas). Printed per configuration:
reports/s, RPC latency p50/p99, the ratio to SQLite, and CPU time per report of the serving
processes (replica side) and of the PostgreSQL processes working for the run's database (its
backends and the server's WAL writer, checkpointer and such; not other databases' backends),
read from /proc before and after. Each configuration runs `--repeat` times, interleaved, and the
median run is shown (the machine's load drifts between runs). Afterwards each
configuration's count must equal what it acknowledged (nothing acknowledged is lost). Last,
the database's own cost of a report row alone: inserts into a scratch table with both unique
keys, one, and none (`index cost`).

    python -m bench.stores [--reports 100000] [--targets 100] [--repeat 3] [--postgres URL]
                           [--json] [--plot FILE.png]

`--postgres` is a server URL without a database (default postgresql://postgres@127.0.0.1:5432);
a database is created for the run and dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from rich.console import Console
from rich.table import Table

from bench.ingest import (
    ADMIN_TOKEN,
    counted,
    cpu_seconds,
    create_query,
    free_port,
    measure,
    process,
)
from client.loadgen import LoadResult, build_reports

console = Console(stderr=True)
# A client backend's process title: "postgres: [CLUSTER: ]USER DATABASE HOST(PORT) STATE".
_BACKEND_TITLE = re.compile(r"postgres: (?:\S+: )?\S+ (\S+) (?:\S+\(\d+\)|\[local\])")


def postgres_cpu(database: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL process that works for `database`: its client
    backends and the server's shared processes (WAL writer, checkpointer, ...), not the
    backends of other databases (other work on this machine may use the same server)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "comm").read_text().startswith("postgres"):
                continue
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        backend = _BACKEND_TITLE.match(title)
        if backend is None or backend.group(1) == database:
            found[int(entry.name)] = cpu_seconds(int(entry.name))
    return found


def cpu_since(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two `postgres_cpu` readings by the processes alive at the
    second (one that started meanwhile counts from zero; one that ended is left out)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


@dataclass(frozen=True)
class Config:
    """One configuration: a store, its replica count, and the checkout its servers run from
    (None: this one; else `--server-code`, shown as "(base)")."""

    name: str
    replicas: int
    code: Path | None = None

    @property
    def label(self) -> str:
        return f"{self.name} (base)" if self.code is not None else self.name


@dataclass
class Measured:
    name: str
    replicas: int
    load: LoadResult
    counted: int
    replica_cpu_s: float
    database_cpu_s: float

    def per_report_us(self, seconds: float) -> float:
        return seconds / max(self.load.acknowledged, 1) * 1e6

    def to_json(self, baseline: float) -> dict[str, object]:
        return {
            "store": self.name,
            "replicas": self.replicas,
            "reports_per_second": round(self.load.reports_per_second, 1),
            "ratio_to_sqlite": round(self.load.reports_per_second / baseline, 3),
            "rpc_latency_ms_p50": round(self.load.latency_ms(0.5), 2),
            "rpc_latency_ms_p99": round(self.load.latency_ms(0.99), 2),
            "acknowledged": self.load.acknowledged,
            "counted": self.counted,
            "lost": self.load.acknowledged - self.counted,
            "replica_cpu_us_per_report": round(self.per_report_us(self.replica_cpu_s), 2),
            "database_cpu_us_per_report": round(self.per_report_us(self.database_cpu_s), 2),
        }


def serve_command(port: int, *store: str) -> list[str]:
    return [
        sys.executable, "-m", "ldpcollect_cli.main", "serve", *store,
        "--listen", f"127.0.0.1:{port}", "--admin-token", ADMIN_TOKEN,
    ]  # fmt: skip


async def settled_count(target: str, query_id: str, expected: int) -> int:
    """The count a replica shows once it has caught up (another replica's reports reach its
    snapshot with its next refresh, within about a second)."""
    deadline = time.monotonic() + 10
    while True:
        got = await counted(target, query_id)
        if got >= expected or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.1)


async def run_one(
    config: Config,
    commands: list[list[str]],
    ports: list[int],
    args: argparse.Namespace,
    seed: int,
    tag: int = 0,
    database: str = "",
) -> Measured:
    """One configuration's run (`database`: the PostgreSQL database its replicas use)."""
    query_id = f"bench-{config.name}-{len(ports)}-{tag}"
    reports = build_reports(query_id, args.targets, args.reports, seed=seed)
    with ExitStack() as stack:
        addresses = [
            stack.enter_context(process(c, p, config.code))
            for c, p in zip(commands, ports, strict=True)
        ]
        pids = _children_serving(ports)
        target = ",".join(addresses)
        await create_query(addresses[0], query_id, args.targets)
        await settled_query(addresses, query_id)
        replica_before = sum(cpu_seconds(p) for p in pids)
        db_before = postgres_cpu(database)
        load = await measure(target, "batch", reports, args, f"{config.label} x{len(ports)}")
        replica_cpu = sum(cpu_seconds(p) for p in pids) - replica_before
        db_cpu = cpu_since(db_before, postgres_cpu(database)) if config.name != "sqlite" else 0.0
        total = await settled_count(addresses[0], query_id, load.acknowledged)
    return Measured(config.label, len(ports), load, total, replica_cpu, db_cpu)


async def settled_query(addresses: list[str], query_id: str) -> None:
    """Wait until every replica knows the new query."""
    for address in addresses:
        deadline = time.monotonic() + 10
        while True:
            try:
                await counted(address, query_id)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)


def _children_serving(ports: list[int]) -> list[int]:
    """Pids of this process's children (the serving processes just started)."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[1] == me:
            found.append(int(entry.name))
    return found


def configs(args: argparse.Namespace) -> list[Config]:
    """SQLite first (the baseline of every ratio), then PostgreSQL with each replica count,
    from this checkout and, with `--server-code`, from that one."""
    counts = [int(n) for n in args.replicas.split(",")]
    found = [Config("sqlite", 1)]
    found += [Config("postgresql", n) for n in counts]
    if args.server_code is not None:
        found += [Config("postgresql", n, args.server_code.resolve()) for n in counts]
    return found


async def run(args: argparse.Namespace) -> tuple[list[Measured], dict[str, float]]:
    """Every configuration `--repeat` times, interleaved (the machine's load drifts); the
    median run of each by reports/s. Each checkout's replicas get a database of their own
    (a newer schema version is refused by older code)."""
    runs: dict[Config, list[Measured]] = {}
    suffix = secrets.token_hex(4)
    server = args.postgres.rstrip("/")
    databases: dict[Path | None, str] = {None: f"ldpc_bench_{suffix}"}
    if args.server_code is not None:
        databases[args.server_code] = f"ldpc_bench_{suffix}_base"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        for database in databases.values():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        for attempt in range(args.repeat):
            for k, config in enumerate(configs(args)):
                with tempfile.TemporaryDirectory() as tmp:
                    ports = [free_port() for _ in range(config.replicas)]
                    database = databases[args.server_code if config.code else None]
                    if config.name == "sqlite":
                        store = ["--db", str(Path(tmp) / "bench.db")]
                    else:
                        store = ["--store", f"{server}/{database}"]
                    commands = [serve_command(p, *store) for p in ports]
                    measured = await run_one(
                        config, commands, ports, args, 10 * attempt + k, attempt, database
                    )
                runs.setdefault(config, []).append(measured)
        costs = index_costs(f"{server}/{databases[None]}")
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            for database in databases.values():
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(database)
                    )
                )
    return [median_run(r) for r in runs.values()], costs


# What one report's row costs the database by itself: the reports table's shape with both
# unique keys, with the (query, report id) key only, and with no index.
INDEX_VARIANTS = {
    "both keys": "PRIMARY KEY (q, id), UNIQUE (q, p, rd)",
    "report id key": "PRIMARY KEY (q, id)",
    "no index": "",
}
_SCRATCH_INSERT = (
    "INSERT INTO bench_reports SELECT 1, substr(%(ids)b, i * 16 + 1, 16), "
    "substr(%(devices)b, i * 16 + 1, 16), 1, substr(%(answers)b, i * 13 + 1, 13) "
    "FROM generate_series(0, 499) AS i"
)


def index_costs(url: str, batches: int = 120) -> dict[str, float]:
    """Database CPU µs per report of inserting 500 random reports per statement into a
    scratch table of each shape in INDEX_VARIANTS (committed one statement at a time)."""
    costs = {}
    database = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:
        for name, keys in INDEX_VARIANTS.items():
            conn.execute("DROP TABLE IF EXISTS bench_reports")
            columns = "q integer, id bytea, p bytea, rd smallint, a bytea"
            conn.execute(f"CREATE TABLE bench_reports ({columns}{', ' + keys if keys else ''})")
            before = postgres_cpu(database)
            for _ in range(batches):
                conn.execute(
                    _SCRATCH_INSERT,
                    {"ids": os.urandom(8000), "devices": os.urandom(8000), "answers": bytes(6500)},
                )
            spent = cpu_since(before, postgres_cpu(database))
            costs[name] = spent / (batches * 500) * 1e6
        conn.execute("DROP TABLE bench_reports")
    return costs


def median_run(runs: list[Measured]) -> Measured:
    return sorted(runs, key=lambda m: m.load.reports_per_second)[len(runs) // 2]


def plot(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['store']}\n{r['replicas']} replica(s)" for r in rows]
    fig, (rate, cost) = plt.subplots(1, 2, figsize=(10, 4))
    rate.bar(labels, [float(str(r["reports_per_second"])) for r in rows], color="tab:blue")
    rate.set_ylabel("reports acknowledged per second")
    rate.set_title("Throughput, same batch workload, same run")
    replica = [float(str(r["replica_cpu_us_per_report"])) for r in rows]
    database = [float(str(r["database_cpu_us_per_report"])) for r in rows]
    cost.bar(labels, replica, label="replica process(es)")
    cost.bar(labels, database, bottom=replica, label="PostgreSQL server")
    cost.set_ylabel("CPU µs per report")
    cost.set_title("Where each report's CPU goes")
    cost.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--reports", type=int, default=100_000, help="reports per store")
    parser.add_argument("--targets", type=int, default=100, help="answer bits per report")
    parser.add_argument("--concurrency", type=int, default=16, help="RPCs in flight")
    parser.add_argument("--chunk", type=int, default=500, help="reports per SubmitBatch")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--repeat", type=int, default=3, help="runs per store (median shown)")
    parser.add_argument(
        "--replicas", default="1,2", help="PostgreSQL replica counts to run, comma-separated"
    )
    parser.add_argument(
        "--server-code",
        type=Path,
        help="also run the PostgreSQL configurations from this checkout (before/after)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--plot", type=Path, help="also draw throughput and cost to this PNG")
    args = parser.parse_args()
    results, costs = asyncio.run(run(args))
    baseline = results[0].load.reports_per_second
    rows = [r.to_json(baseline) for r in results]
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        print(json.dumps({"targets": args.targets, "reports": args.reports,
                          "chunk": args.chunk, "concurrency": args.concurrency,
                          "repeat": args.repeat,
                          "index_cost_us_per_report": {k: round(v, 2) for k, v in costs.items()},
                          "cores": os.cpu_count(), "results": rows}, indent=2))  # fmt: skip
        return
    table = Table(
        title=f"Stores, batch of {args.chunk}, {args.targets} targets, same run "
        f"(median of {args.repeat})"
    )
    columns = ("store", "replicas", "reports/s", "ratio", "p50 ms", "p99 ms", "lost",
               "replica µs/report", "database µs/report")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row["store"]), str(row["replicas"]), f"{row['reports_per_second']:,.0f}",
            f"{row['ratio_to_sqlite']:.2f}", f"{row['rpc_latency_ms_p50']:.1f}",
            f"{row['rpc_latency_ms_p99']:.1f}", str(row["lost"]),
            f"{row['replica_cpu_us_per_report']:.1f}", f"{row['database_cpu_us_per_report']:.1f}",
        )  # fmt: skip
    console = Console(width=140)
    console.print(table)
    for row in rows:
        base = next((b for b in rows if b["store"] == f"{row['store']} (base)"
                     and b["replicas"] == row["replicas"]), None)  # fmt: skip
        if base is not None:
            ratio = float(str(row["reports_per_second"])) / float(str(base["reports_per_second"]))
            console.print(f"{row['store']} x{row['replicas']}: {ratio:.2f}x the base checkout")
    for name, cost in costs.items():
        console.print(f"index cost, {name}: {cost:.1f} µs of database CPU per report inserted")


if __name__ == "__main__":
    main()
