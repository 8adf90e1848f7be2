"""Entry point of the `ldpcollect` command.

Each command group lives in its own module with a `register(app)` function, so the groups
stay small and independent.
"""

from __future__ import annotations

import typer

from ldpcollect_cli import (
    issuer_command,
    loadtest_command,
    privacy,
    secure_command,
    service,
    simulate,
    store_command,
    vdaf_command,
    vectors_command,
)

app = typer.Typer(
    name="ldpcollect",
    help="Local-differential-privacy collection: simulate fleets, run the aggregator, account.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in (
    simulate,
    privacy,
    service,
    store_command,
    loadtest_command,
    vdaf_command,
    secure_command,
    issuer_command,
    vectors_command,
):
    module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
