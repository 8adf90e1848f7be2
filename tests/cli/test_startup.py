"""Start-up: `ldpcollect --help` and `query list` load no accounting (scipy) or plotting
(matplotlib) module; those load only in the commands that use them. Speed itself is measured,
not asserted (the report gives the figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serving import cli_env, serving

TOKEN = "startup-token"
HEAVY = ("scipy", "matplotlib", "ldpcollect.accounting", "client.fleet")

PROBE = """
import json, sys
args, prefixes = json.loads(sys.argv[1]), tuple(json.loads(sys.argv[2]))
sys.argv = ["ldpcollect", *args]
from ldpcollect_cli.main import app
try:
    app()
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] if m.startswith(("scipy", "matplotlib")) else m
                for m in sys.modules if m.startswith(prefixes)})
sys.stderr.write("HEAVY=" + json.dumps(heavy) + "\\n")
"""


def heavy_modules(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args)), json.dumps(HEAVY)],
        env=cli_env(TOKEN),
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("HEAVY=")]
    assert line, done.stderr
    loaded: list[str] = json.loads(line[-1][len("HEAVY=") :])
    return loaded


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path / "agg.db", TOKEN) as served:
        yield served.address


def test_help_loads_no_heavy_module() -> None:
    assert heavy_modules("--help") == []
    assert heavy_modules("query", "--help") == []


def test_query_list_loads_no_heavy_module(server: str) -> None:
    assert heavy_modules("query", "list", "--server", server) == []


def test_the_commands_that_need_them_still_load_them() -> None:
    assert "scipy" in heavy_modules("privacy", "convert", "--rho", "0.5", "--delta", "1e-5")


def test_each_command_loads_the_module_that_defines_it() -> None:
    import importlib

    import typer

    from ldpcollect_cli.main import COMMAND_MODULES, MODULES, modules_for

    defined: dict[str, str] = {}
    for name in MODULES:
        app = typer.Typer()
        importlib.import_module(f"ldpcollect_cli.{name}").register(app)
        commands = [
            c.name or (c.callback.__name__ if c.callback else None) for c in app.registered_commands
        ] + [g.name for g in app.registered_groups]
        defined.update({command: name for command in commands if command})
    assert defined == COMMAND_MODULES
    assert modules_for(["query", "list"]) == ("service",)
    assert modules_for(["--help"]) == MODULES and modules_for(["nope"]) == MODULES


def test_the_command_overview_is_the_help_the_modules_give() -> None:
    import importlib

    import typer
    from typer.testing import CliRunner

    from ldpcollect_cli.main import MODULES, register_overview

    def top_level_help(register: list[object]) -> str:
        app = typer.Typer(name="ldpcollect", help="x", no_args_is_help=True, add_completion=False)
        for step in register:
            step(app)  # type: ignore[operator]
        return CliRunner().invoke(app, ["--help"], prog_name="ldpcollect").output

    modules = [importlib.import_module(f"ldpcollect_cli.{name}").register for name in MODULES]
    assert top_level_help([register_overview]) == top_level_help(list(modules))


@pytest.mark.parametrize("command", ["simulate", "loadtest", "privacy", "query", "serve"])
def test_a_command_loaded_alone_is_still_a_subcommand(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ldpcollect_cli.main", command, "--help"],
        env=cli_env(TOKEN),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"ldpcollect_cli.main {command} [OPTIONS]" in done.stdout  # not the root command
