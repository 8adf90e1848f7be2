"""Run the real `ldpcollect` app in-process with typer's CliRunner."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from typer.testing import CliRunner, Result

from ldpcollect_cli.main import app

RunCli = Callable[[Sequence[str]], Result]


def command_args(args: Sequence[str]) -> list[str]:
    """`simulate ...` as the app expects it.

    typer runs an app with a single registered command as that command (no sub-command name);
    while `simulate` is the only one registered, the name must be left out.
    """
    registered = len(app.registered_commands) + len(app.registered_groups)
    return list(args) if registered > 1 else list(args[1:])


@pytest.fixture
def run_cli() -> RunCli:
    runner = CliRunner()

    def run(args: Sequence[str]) -> Result:
        assert args[0] == "simulate"
        return runner.invoke(app, command_args(args))

    return run
