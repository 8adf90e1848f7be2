"""Entry point of the `ldpcollect` command.

Each command group lives in its own module with a `register(app)` function, so the groups
stay small and independent. A command named on the command line loads only the module that
defines it (`COMMAND_MODULES`): `ldpcollect query list` does not import the load tester, the
VDAF or the simulator (start-up time, `make bench-startup`). `ldpcollect --help` (or no
arguments) lists the commands from `OVERVIEW`, their names and help as the modules define
them (tests/cli/test_startup.py renders both and compares), importing none. Anything else (a
name not listed) loads them all, so typo suggestions see every command.
"""

from __future__ import annotations

import importlib
import sys

import typer

MODULES = (
    "simulate",
    "privacy",
    "service",
    "store_command",
    "loadtest_command",
    "vdaf_command",
    "issuer_command",
    "vectors_command",
)
COMMAND_MODULES = {
    "simulate": "simulate",
    "privacy": "privacy",
    "serve": "service",
    "release": "service",
    "demo": "service",
    "query": "service",
    "fleet": "service",
    "ledger": "service",
    "store": "store_command",
    "loadtest": "loadtest_command",
    "vdaf": "vdaf_command",
    "issuer": "issuer_command",
    "vectors": "vectors_command",
}

# (command or group, name, help) in the order the modules register them.
OVERVIEW: tuple[tuple[str, str, str], ...] = (
    ("command", "simulate", "Accuracy study: fixed Yes population at one location, growing No "
     "population."),
    ("command", "serve", "Run the aggregator (gRPC Collector + Admin) until SIGINT/SIGTERM. "
     "Plaintext unless\n--tls-cert/--tls-key are given (a warning says so when listening "
     "beyond loopback)."),
    ("command", "release", "Release a closed query's estimates (or show the release if it "
     "already happened), or\nreload a saved one; optionally map and export it. At a leader "
     "(a secure query): close it,\ncollect both aggregators' noised shares and open them "
     "with --collector-key."),
    ("command", "demo", "End to end: RR at a trusted aggregator, SP on two aggregators "
     "(leader and helper), one\nsimulated fleet, releases beside the truth, stop. --secure: "
     "RR on two aggregators too."),
    ("command", "loadtest", "Send reports to a query at a fixed rate (or flat out) and "
     "measure: achieved rate,\nlatency percentiles from the intended send time, statuses, "
     "pushback; then check that the\naggregator counted exactly the acknowledged reports "
     "(with the admin token)."),
    ("group", "privacy", "Privacy calculator: convert zCDP to (epsilon, delta), cost a plan "
     "of queries."),
    ("group", "query", "Create and manage queries (operator, Admin RPCs)."),
    ("group", "fleet", "Simulated device fleets through the real gRPC service."),
    ("group", "ledger", "The aggregator's privacy ledger (shown without a subcommand) and its "
     "budget."),
    ("group", "store", "The aggregator's database: PostgreSQL schema, SQLite backups."),
    ("group", "vdaf", "The VDAF (Prio3, draft-irtf-cfrg-vdaf-20) behind the two-aggregator "
     "secure mode."),
    ("group", "issuer", "The token issuer: anonymous, rate-limited admission tokens for "
     "devices."),
    ("group", "vectors", "Conformance vectors for implementations in other languages."),
)  # fmt: skip

app = typer.Typer(
    name="ldpcollect",
    help="Local-differential-privacy collection: simulate fleets, run the aggregator, account.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """Keeps `ldpcollect` a group of commands when only one command's module is loaded (typer
    would otherwise run that one command as the program itself)."""


def register_overview(target: typer.Typer) -> None:
    """Every command's name and help, without importing its module (only for listing them)."""

    def listed_only() -> None:
        """Never run: `--help` lists commands, and a named command loads its module."""

    for kind, name, text in OVERVIEW:
        if kind == "command":
            target.command(name, help=text)(listed_only)
        else:
            target.add_typer(typer.Typer(help=text), name=name)


def modules_for(argv: list[str]) -> tuple[str, ...]:
    """The command modules `argv` (without the program name) needs: one for a known command,
    all of them otherwise."""
    if argv and argv[0] in COMMAND_MODULES:
        return (COMMAND_MODULES[argv[0]],)
    return MODULES


if sys.argv[1:] in ([], ["--help"]):
    register_overview(app)
else:
    for _name in modules_for(sys.argv[1:]):
        importlib.import_module(f"ldpcollect_cli.{_name}").register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
