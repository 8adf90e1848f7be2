"""`ldpcollect loadtest` results for a person (a table) and for a program (JSON)."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from client.loadtest import MAX_PREBUILT_BYTES, LoadTestResult
from client.loadtest_counts import CountCheck


def _finite(value: float, digits: int = 3) -> float | None:
    return round(value, digits) if math.isfinite(value) else None


def loop_words(result: LoadTestResult) -> str:
    config = result.config
    if config.open_loop:
        return f"open loop at {config.rate:g} RPC/s"
    return f"closed loop, {config.max_in_flight} in flight"


def result_json(
    result: LoadTestResult, check: CountCheck | None, skipped: str, plot: Path | None
) -> dict[str, object]:
    config = result.config
    return {
        "query": {
            "query_id": result.query.query_id,
            "mechanism": result.query.mechanism,
            "targets": result.query.n_targets,
            "round": result.query.round,
            "secure": result.query.secure is not None,
        },
        "mode": config.mode,
        "loop": "open" if config.open_loop else "closed",
        "target_rate": config.rate,
        "duration_s": config.duration,
        "addresses": list(config.addresses),
        "connections": config.connections,
        "reports_per_rpc": config.reports_per_rpc,
        "max_in_flight": config.max_in_flight,
        "requests": {
            "planned": result.planned,
            "sent": result.sent,
            "answered": result.answered,
            "unsent": result.unsent,
        },
        "elapsed_s": round(result.elapsed, 4),
        "achieved_rate": round(result.achieved_rate, 2),
        "reports_per_second": round(result.reports_per_second, 1),
        "reports": {
            "accepted": result.accepted,
            "duplicates": result.duplicates,
            "rejected": dict(result.rejected),
        },
        "latency_ms": {k: _finite(v) for k, v in result.latency.summary_ms().items()},
        "statuses": dict(result.statuses),
        "pushback": dict(result.pushback),
        "late_sends": result.late,
        "waited_for_slot": result.waited_for_slot,
        "max_send_delay_ms": round(result.max_send_delay * 1000.0, 3),
        "accepted_by_address": {a: result.accepted_by_address[a] for a in config.addresses},
        "unknown_outcome_reports": sum(result.unknown_by_address.values()),
        "reports_exhausted": result.exhausted,
        "count_check": (
            {"ok": check.ok, "message": check.message, "grew": check.grew}
            if check is not None
            else {"ok": None, "message": skipped, "grew": None}
        ),
        "plot": str(plot) if plot is not None else None,
    }


def _counter(counter: dict[str, int]) -> str:
    return "  ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"


def print_result(
    console: Console, result: LoadTestResult, check: CountCheck | None, skipped: str
) -> None:
    config = result.config
    latency = result.latency.summary_ms()
    table = Table(
        title=f"loadtest {result.query.query_id}: {config.mode}, {loop_words(result)}, "
        f"{config.duration:g} s, {len(config.addresses)} address(es) x {config.connections} "
        f"connection(s)",
        show_header=False,
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row(
        "requests",
        f"{result.answered} answered of {result.sent} sent ({result.planned} planned) in "
        f"{result.elapsed:.2f} s: {result.achieved_rate:,.1f}/s",
    )
    table.add_row(
        "reports",
        f"{result.reports_per_second:,.0f}/s acknowledged: {result.accepted} accepted, "
        f"{result.duplicates} duplicates, rejected: {_counter(dict(result.rejected))}",
    )
    table.add_row(
        "latency ms",
        "  ".join(f"{k} {v:.2f}" for k, v in latency.items() if k != "mean")
        + ("  (from the intended send time)" if config.open_loop else ""),
    )
    table.add_row("statuses", _counter(dict(result.statuses)))
    table.add_row("pushback", _counter(dict(result.pushback)))
    table.add_row(
        "late sends",
        f"{result.late} (waited for an in-flight slot {result.waited_for_slot}; max send delay "
        f"{result.max_send_delay * 1000:.1f} ms)",
    )
    if result.unsent:
        table.add_row(
            "not sent",
            f"{result.unsent} due before the end but still waiting for one of the "
            f"{config.max_in_flight} in-flight slots then",
        )
    if result.exhausted:
        why = (
            "--max-requests"
            if result.planned == config.max_requests
            else f"the pre-built reports ran out (at most {MAX_PREBUILT_BYTES // 2**20} MiB)"
        )
        table.add_row("stopped", f"after {result.sent} RPCs, before --duration: {why}")
    table.add_row("count check", check.message if check is not None else skipped)
    console.print(table)
