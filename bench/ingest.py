"""Ingest throughput: the aggregator's durable acknowledgements next to a bare counting server.

Both servers run as their own processes on 127.0.0.1 and get the same pre-built reports on the
same paths (unary, client stream, batch, and batches mixing 4 queries) from this process, in
one run: each repetition runs every path on the bare server and then on the aggregator, so the
ratio holds however fast (or busy) the machine is today; rows keep the medians. After each
aggregator run the benchmark checks that the aggregator counted every acknowledged report
(nothing acknowledged is lost). Each run also reads the CPU time each server process used
(/proc), shown as CPU microseconds per acknowledged report: a figure the machine's load moves
far less than reports per second. Mixed-query batches are also compared with the aggregator's
own single-query batches (`mixed_over_single`). From the aggregator's metrics
(`ldpcollect_writer_seconds`) each run also gets its writer's busy share of the run and its
microseconds a report in each phase (apply the rules, write, commit): where the serial stage
spends its time; and from `ldpcollect_thread_cpu_seconds` each Python thread's CPU microseconds
a report and how much of one core they used together: near 1, the server is bound by the one
interpreter lock its threads share.

    python -m bench.ingest [--reports N] [--targets 100] [--repeat 3] [--modes batch,...]
                           [--json] [--plot FILE.png]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
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


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


@contextmanager
def process(
    args: list[str], port: int, code: Path | None = None, pids: list[int] | None = None
) -> Iterator[str]:
    """Start a server process and yield its address once it accepts connections (`code`: run
    it from that checkout instead, for before/after figures; `pids`: its pid is appended)."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    # `python -m` puts the working directory first on the path: run from that checkout.
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=code
    )
    target = f"127.0.0.1:{port}"
    if pids is not None:
        pids.append(proc.pid)
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


async def create_query(
    target: str, query_id: str, n_targets: int, noise_sigma: str | None = None
) -> None:
    """An RR 0.85/0.3 query over grid cells 1..n_targets (release noise `noise_sigma`)."""
    async with grpc.aio.insecure_channel(target) as channel:
        admin = pb_grpc.AdminStub(channel)
        await admin.CreateQuery(
            pb.CreateQueryRequest(
                query_id=query_id,
                description="benchmark",
                mechanism=pb.MechanismSpec(
                    randomized_response=pb.RandomizedResponse(flip1="0.85", flip2="0.3")
                ),
                location_scheme=pb.LocationScheme(grid=pb.GridScheme()),
                targets=list(range(1, n_targets + 1)),
                min_reports=1,
                noise=pb.ReleaseNoise(sigma=noise_sigma) if noise_sigma else None,
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
    """One path: median runs (by rate) of each server, and what the aggregator counted."""

    mode: str
    bare: LoadResult
    aggregator: LoadResult
    counted: int  # the least counted over the repetitions (each has the same reports)
    runs: list[LoadResult]
    bare_cpu_us: float  # median server CPU microseconds per acknowledged report
    aggregator_cpu_us: float
    # The aggregator's writer (`ldpcollect_writer_seconds`), medians over the repetitions:
    # "busy" (its phases' share of the run's wall time) and microseconds a report per phase.
    # None when the aggregator does not export it (a `--server-code` checkout from before).
    writer: dict[str, float] | None = None
    # The aggregator's Python threads (`ldpcollect_thread_cpu_seconds`), medians: CPU
    # microseconds a report by thread name, and `python_cores` (see `thread_share`).
    threads: dict[str, float] | None = None
    # This process (the load generator) in the same runs: CPU microseconds a report while
    # loading the bare server and while loading the aggregator.
    bare_client_cpu_us: float = 0.0
    aggregator_client_cpu_us: float = 0.0

    def machine_cpu_us(self) -> tuple[float, float]:
        """CPU microseconds a report of load generator and server together (bare, aggregator):
        on C cores neither can go faster than C / that many reports a microsecond."""
        return (
            self.bare_client_cpu_us + self.bare_cpu_us,
            self.aggregator_client_cpu_us + self.aggregator_cpu_us,
        )

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
            "lost": max(r.acknowledged for r in self.runs) - self.counted,
            "aggregator_runs_reports_per_second": [
                round(r.reports_per_second, 1) for r in self.runs
            ],
            "server_cpu_us_per_report": {
                "bare": round(self.bare_cpu_us, 3),
                "aggregator": round(self.aggregator_cpu_us, 3),
            },
            "load_generator_cpu_us_per_report": {
                "bare": round(self.bare_client_cpu_us, 3),
                "aggregator": round(self.aggregator_client_cpu_us, 3),
            },
            "aggregator_writer": self.writer,
            "aggregator_threads": self.threads,
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


# A bench-only path: batches whose reports belong to MIXED_QUERIES queries in turn.
MIXED = "batch-mixed"
MIXED_QUERIES = 4


def query_ids(mode: str, rep: int) -> list[str]:
    """The queries one run of `mode` sends to (ids of equal length, as a fleet's would be)."""
    if mode == MIXED:
        return [f"bench-mix-{rep:02d}-{q}" for q in range(MIXED_QUERIES)]
    return [f"bench-{mode}-{rep:02d}"]


def reports_for(mode: str, rep: int, args: argparse.Namespace) -> list[pb.Report]:
    """Fresh valid reports for one run (every aggregator run gets new report ids)."""
    n = args.reports or DEFAULT_REPORTS[mode.split("-")[0]]
    ids = query_ids(mode, rep)
    per_query = [
        build_reports(q, args.targets, -(-n // len(ids)), seed=1000 * rep + 10 * k + len(mode))
        for k, q in enumerate(ids)
    ]
    return [per_query[i % len(ids)][i // len(ids)] for i in range(n)]


async def run(args: argparse.Namespace) -> list[Row]:
    """Each repetition runs every path on the bare server, then on the aggregator, so machine
    noise hits both; a row keeps the medians over the repetitions."""
    modes = args.modes.split(",")
    bare: dict[str, list[LoadResult]] = {m: [] for m in modes}
    aggregated: dict[str, list[LoadResult]] = {m: [] for m in modes}
    counts: dict[str, list[int]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {
        f"{who} {m}": [] for m in modes for who in ("bare", "agg", "client bare", "client agg")
    }
    writer: dict[str, list[dict[str, float] | None]] = {m: [] for m in modes}
    threads: dict[str, list[dict[str, float] | None]] = {m: [] for m in modes}
    pids: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        bare_port, port, metrics_port = free_port(), free_port(), free_port()
        bare_args = [sys.executable, "-m", "bench.bare_server", "--port", str(bare_port)]
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
            "--metrics-port",
            str(metrics_port),
        ]
        aggregator = process(serve, port, args.server_code, pids)
        with process(bare_args, bare_port, pids=pids) as bare_t, aggregator as agg_t:
            bare_pid, agg_pid = pids  # entered in this order
            for rep in range(args.repeat):
                for mode in modes:
                    reports = reports_for(mode, rep, args)
                    load_mode = "batch" if mode == MIXED else mode
                    before, client_before = cpu_seconds(bare_pid), time.process_time()
                    bare[mode].append(
                        await measure(bare_t, load_mode, reports, args, f"bare {mode}")
                    )
                    cpu[f"client bare {mode}"].append(
                        _us_per_report(time.process_time() - client_before, bare[mode][-1])
                    )
                    cpu[f"bare {mode}"].append(
                        _us_per_report(cpu_seconds(bare_pid) - before, bare[mode][-1])
                    )
                    for query_id in query_ids(mode, rep):
                        await create_query(agg_t, query_id, args.targets)
                    before, metrics_before = cpu_seconds(agg_pid), scrape(metrics_port)
                    client_before = time.process_time()
                    aggregated[mode].append(
                        await measure(agg_t, load_mode, reports, args, f"aggregator {mode}")
                    )
                    cpu[f"client agg {mode}"].append(
                        _us_per_report(time.process_time() - client_before, aggregated[mode][-1])
                    )
                    cpu[f"agg {mode}"].append(
                        _us_per_report(cpu_seconds(agg_pid) - before, aggregated[mode][-1])
                    )
                    metrics_after, result = scrape(metrics_port), aggregated[mode][-1]
                    writer[mode].append(
                        writer_share(
                            writer_seconds(metrics_before), writer_seconds(metrics_after), result
                        )
                    )
                    threads[mode].append(
                        thread_share(
                            thread_seconds(metrics_before), thread_seconds(metrics_after), result
                        )
                    )
                    counted_now = 0
                    for query_id in query_ids(mode, rep):
                        counted_now += await counted(agg_t, query_id)
                    counts[mode].append(counted_now)
    return [
        Row(
            m,
            _median(bare[m]),
            _median(aggregated[m]),
            min(counts[m]),
            aggregated[m],
            statistics.median(cpu[f"bare {m}"]),
            statistics.median(cpu[f"agg {m}"]),
            _medians(writer[m]),
            _medians(threads[m]),
            statistics.median(cpu[f"client bare {m}"]),
            statistics.median(cpu[f"client agg {m}"]),
        )
        for m in modes
    ]


Families = dict[str, list[Sample]]


def scrape(metrics_port: int) -> Families | None:
    """The aggregator's metrics: each family's samples by family name (None: unreachable)."""
    try:
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def writer_seconds(families: Families | None) -> dict[str, float] | None:
    """The aggregator's `ldpcollect_writer_seconds` by phase (None: not exported)."""
    samples = (families or {}).get("ldpcollect_writer_seconds")
    if samples is None:
        return None
    return {s.labels["phase"]: s.value for s in samples if s.name.endswith("_total")}


def thread_seconds(families: Families | None) -> dict[str, float] | None:
    """The aggregator's `ldpcollect_thread_cpu_seconds` by thread (None: not exported)."""
    samples = (families or {}).get("ldpcollect_thread_cpu_seconds")
    if samples is None:
        return None
    return {s.labels["thread"]: s.value for s in samples}


def thread_share(
    before: dict[str, float] | None, after: dict[str, float] | None, result: LoadResult
) -> dict[str, float] | None:
    """Each Python thread's CPU microseconds a report in one run, and `python_cores`: all of
    them together over the run's wall time (near 1: bound by the one interpreter lock)."""
    if before is None or after is None:
        return None
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    # (A label whose thread was replaced, such as a metrics scrape's, may go down: left out.)
    ran = {name: s for name, s in spent.items() if s > 0}
    share = {name: _us_per_report(s, result) for name, s in ran.items()}
    cores = sum(ran.values()) / result.seconds if result.seconds else 0.0
    return {**share, PYTHON_CORES: cores}


PYTHON_CORES = "python_cores"


def writer_share(
    before: dict[str, float] | None, after: dict[str, float] | None, result: LoadResult
) -> dict[str, float] | None:
    """The writer's busy share of one run and its microseconds a report per phase."""
    if before is None or after is None:
        return None
    spent = {phase: after[phase] - before.get(phase, 0.0) for phase in after}
    share = {f"{phase}_us_per_report": _us_per_report(s, result) for phase, s in spent.items()}
    return {"busy": sum(spent.values()) / result.seconds if result.seconds else 0.0, **share}


def _medians(shares: list[dict[str, float] | None]) -> dict[str, float] | None:
    """Each key's median over the runs that have the figures (a key a run lacks counts 0)."""
    known = [s for s in shares if s is not None]
    if not known:
        return None
    keys = dict.fromkeys(key for s in known for key in s)
    return {key: round(statistics.median(s.get(key, 0.0) for s in known), 3) for key in keys}


def _us_per_report(seconds: float, result: LoadResult) -> float:
    return seconds * 1e6 / max(1, result.acknowledged)


def _median(results: list[LoadResult]) -> LoadResult:
    ordered = sorted(results, key=lambda r: r.reports_per_second)
    return ordered[len(ordered) // 2]


def threads_line(threads: dict[str, float], process_us: float) -> str:
    """The two busiest Python threads, the rest, and the share of a core they used together."""
    per_thread = sorted(
        ((name, us) for name, us in threads.items() if name != PYTHON_CORES),
        key=lambda item: -item[1],
    )
    shown = ", ".join(f"{name} {us:.2f}" for name, us in per_thread[:2])
    rest = sum(us for _, us in per_thread[2:])
    return (
        f"µs a report: {shown}, other Python threads {rest:.2f} (the whole process "
        f"{process_us:.2f}); Python threads together busy {threads[PYTHON_CORES]:.2f} of a core"
    )


def mixed_over_single(rows: list[Row]) -> float | None:
    """The aggregator's mixed-query batch rate over its single-query batch rate, if both ran."""
    by_mode = {r.mode: r.aggregator.reports_per_second for r in rows}
    if MIXED not in by_mode or not by_mode.get("batch"):
        return None
    return round(by_mode[MIXED] / by_mode["batch"], 3)


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
    parser.add_argument(
        "--modes",
        default=",".join((*MODES, MIXED)),
        help=f"paths, of {', '.join((*MODES, MIXED))} ({MIXED}: {MIXED_QUERIES} queries in turn)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="repetitions, bare and aggregator in turn"
    )
    parser.add_argument(
        "--server-code", type=Path, help="run the aggregator from this checkout (before/after)"
    )
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
                    "repeat": args.repeat,
                    "results": [r.to_json() for r in rows],
                    "mixed_over_single": mixed_over_single(rows),
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
        "bare CPU us/report",
        "agg CPU us/report",
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
            f"{r.bare_cpu_us:.2f}",
            f"{r.aggregator_cpu_us:.2f}",
            str(j["lost"]),
        )
    Console(width=120).print(table)
    for r in rows:
        if r.writer is not None:
            w = r.writer
            print(
                f"aggregator writer, {r.mode}: busy {w['busy']:.0%} of the run; µs a report: "
                f"apply {w['apply_us_per_report']:.2f}, write {w['write_us_per_report']:.2f}, "
                f"commit {w['commit_us_per_report']:.2f}"
            )
    cores = os.cpu_count() or 1
    for r in rows:
        bare_us, agg_us = r.machine_cpu_us()
        print(
            f"machine CPU, {r.mode}: load generator and server {bare_us:.2f} µs a report with "
            f"the bare server, {agg_us:.2f} with the aggregator (load generator "
            f"{r.bare_client_cpu_us:.2f} and {r.aggregator_client_cpu_us:.2f}); {cores} cores "
            f"allow at most {cores / agg_us * 1e6:,.0f} aggregator reports/s at these costs"
        )
    for r in rows:
        if r.threads is not None:
            print(f"aggregator threads, {r.mode}: {threads_line(r.threads, r.aggregator_cpu_us)}")
    mixed = mixed_over_single(rows)
    if mixed is not None:
        print(f"aggregator: batches mixing {MIXED_QUERIES} queries / single-query: {mixed:.2f}")


if __name__ == "__main__":
    main()
