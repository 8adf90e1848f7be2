"""Entry point of the `ldpcollect` command.

Each command group lives in its own module with a `register(app)` function, so the groups
stay small and independent. A command named on the command line loads only the module that
defines it (`COMMAND_MODULES`): `ldpcollect query list` does not import the load tester, the
VDAF or the simulator (start-up time, `make bench-startup`). Anything else (`--help`, no
command, a name not listed) loads them all, so help and typo suggestions see every command.
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
    "secure_command",
    "issuer_command",
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
    "secure": "secure_command",
    "issuer": "issuer_command",
}

app = typer.Typer(
    name="ldpcollect",
    help="Local-differential-privacy collection: simulate fleets, run the aggregator, account.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def modules_for(argv: list[str]) -> tuple[str, ...]:
    """The command modules `argv` (without the program name) needs: one for a known command,
    all of them otherwise."""
    if argv and argv[0] in COMMAND_MODULES:
        return (COMMAND_MODULES[argv[0]],)
    return MODULES


for _name in modules_for(sys.argv[1:]):
    importlib.import_module(f"ldpcollect_cli.{_name}").register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
