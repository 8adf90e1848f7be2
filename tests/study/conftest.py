"""Run the real `ldpcollect` app in-process with typer's CliRunner."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import typer
from typer.testing import CliRunner, Result

RunCli = Callable[[Sequence[str]], Result]


def command_args(app: typer.Typer, args: Sequence[str]) -> list[str]:
    """`simulate ...` as the app expects it.

    typer runs an app with a single registered command as that command (no sub-command name);
    while `simulate` is the only one registered, the name must be left out.
    """
    registered = len(app.registered_commands) + len(app.registered_groups)
    return list(args) if registered > 1 else list(args[1:])


@pytest.fixture
def run_cli() -> RunCli:
    # Imported here, not at module level, so the library tests beside the CLI tests still run
    # when another command module of the app fails to import.
    from ldpcollect_cli.main import app

    runner = CliRunner()

    def run(args: Sequence[str]) -> Result:
        assert args[0] == "simulate"
        return runner.invoke(app, command_args(app, args))

    return run
