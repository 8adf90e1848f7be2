"""`ldpcollect loadtest`: measure a deployment's ingest at a fixed arrival rate (or flat out).

    ldpcollect loadtest --server 127.0.0.1:50051 --query q1 --mode batch --rate 200 \
        --duration 10 --batch-size 100 --plot out/load.png

Exit 0 after a run (whatever the statuses: they are the measurement), 1 when the aggregator's
count disagrees with what was acknowledged or an RPC before the clock fails, 2 on bad options.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from ldpcollect_cli.service_errors import EXIT_RPC, guarded
from ldpcollect_cli.service_options import (
    DEFAULT_SERVER,
    HelperAddress,
    HelperConfigFile,
    HelperTlsCa,
    Json,
    TlsCa,
    Token,
)
from ldpcollect_cli.service_render import print_json

if TYPE_CHECKING:  # the engine is imported when a test runs, not for `--help` (start-up)
    from client.loadtest import LoadTestConfig, Tick
    from client.loadtest_counts import CountCheck

MODES = ("unary", "stream", "batch")  # client.loadtest.MODES (checked by its config)

NO_TOKEN = "skipped: no admin token (--admin-token or LDPCOLLECT_ADMIN_TOKEN)"


@contextmanager
def _progress(duration: float, enabled: bool) -> Iterator[Callable[[Tick], None] | None]:
    """A bar over the test's duration on stderr, fed by the engine's ticks; it appears with
    the first tick (once the clock starts), so an error before that stays one line."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("[bold]loadtest"),
        BarColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
    )
    bar = Progress(*columns, console=Console(stderr=True), transient=True)
    task = bar.add_task("", total=duration, counts="")

    def tick(t: Tick) -> None:
        if not bar.live.is_started:
            bar.start()
        counts = f"sent {t.sent}  answered {t.answered}"
        bar.update(task, completed=min(t.elapsed, duration), counts=counts)

    try:
        yield tick
    finally:
        if bar.live.is_started:
            bar.stop()


def loadtest(
    query: Annotated[str, typer.Option("--query", "-q", help="Query id (open, round 1).")],
    server: Annotated[
        str,
        typer.Option(
            "--server",
            envvar="LDPCOLLECT_SERVER",
            help="host:port, or several separated by commas (calls spread round-robin).",
        ),
    ] = DEFAULT_SERVER,
    mode: Annotated[str, typer.Option("--mode", help=" | ".join(MODES))] = "unary",
    rate: Annotated[
        float, typer.Option("--rate", help="RPCs per second (open loop); 0 = closed loop.")
    ] = 100.0,
    duration: Annotated[float, typer.Option("--duration", help="Seconds of sending.")] = 10.0,
    connections: Annotated[int, typer.Option("--connections", help="Connections per address.")] = 1,
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Reports per stream or batch RPC.")
    ] = 100,
    max_in_flight: Annotated[
        int,
        typer.Option(
            "--max-in-flight",
            help="RPCs in flight at most (closed loop: the number of workers).",
        ),
    ] = 256,
    timeout: Annotated[float, typer.Option("--timeout", help="Deadline of each RPC, s.")] = 10.0,
    max_requests: Annotated[
        int | None, typer.Option("--max-requests", help="Stop after this many RPCs.")
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Seed of the reports' random ids and bits (the same seed again sends the "
            "same reports: duplicates, counted once). Random by default.",
        ),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="PNG: latency over time and its distribution.")
    ] = None,
    helper: HelperAddress = None,
    helper_config: HelperConfigFile = None,
    helper_tls_ca: HelperTlsCa = None,
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """Send reports to a query at a fixed rate (or flat out) and measure: achieved rate,
    latency percentiles from the intended send time, statuses, pushback; then check that the
    aggregator counted exactly the acknowledged reports (with the admin token)."""

    def work() -> None:
        from client.loadtest import LoadTestConfig, parse_addresses

        helper_key = None
        if helper is not None or helper_config is not None:  # a secure query at a leader
            from client.secure_keys import helper_config_of

            helper_key = helper_config_of(helper, helper_config, helper_tls_ca)
        config = LoadTestConfig(
            parse_addresses(server), query, mode, rate, duration, connections, batch_size,
            max_in_flight, timeout, max_requests, seed, tls_ca, helper_key,
        )  # fmt: skip
        _run(config, admin_token, plot, json_out)

    guarded(work)


def _run(config: LoadTestConfig, token: str, plot: Path | None, json_out: bool) -> None:
    from client.loadtest import LoadTest, LoadTestError
    from client.loadtest_counts import read_counts, settled_check
    from client.loadtest_plot import plot_latency
    from ldpcollect_cli.loadtest_render import loop_words, print_result, result_json

    stdout = Console()
    before = (
        read_counts(config.addresses, config.query_id, 1, token, config.tls_ca) if token else None
    )
    with _progress(config.duration, enabled=not json_out) as on_tick:
        try:
            result = asyncio.run(LoadTest(config).run(on_tick))
        except LoadTestError as err:
            _fail(str(err))
    check: CountCheck | None = None
    if before is not None:
        check = settled_check(
            config.addresses,
            config.query_id,
            token,
            config.tls_ca,
            before,
            result.accepted_by_address,
            result.unknown_by_address,
        )
    if plot is not None:
        title = (
            f"{config.query_id}: {config.mode}, {loop_words(result)}, "
            f"{result.reports_per_second:,.0f} reports/s"
        )
        plot_latency(plot, result.intended_at, result.latencies, title)
    if json_out:
        print_json(result_json(result, check, NO_TOKEN, plot))
    else:
        print_result(stdout, result, check, NO_TOKEN)
        if plot is not None:
            stdout.print(f"plot: {plot}")
    if check is not None and not check.ok:
        raise typer.Exit(EXIT_RPC)


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit 1, as `guarded` does for a failed RPC."""
    stderr = Console(stderr=True)
    stderr.print(Text.assemble(("error: ", "bold red"), message), highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_RPC)


def register(app: typer.Typer) -> None:
    app.command("loadtest")(loadtest)
