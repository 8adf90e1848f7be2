"""`ldpcollect serve` as a child process for tests: start it, read its address, stop it."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

READY = "ldpcollect aggregator serving on "


def cli_env(token: str, **extra: str) -> dict[str, str]:
    """This process's environment without LDPCOLLECT_* settings, plus the admin token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDPCOLLECT_")}
    # The CLI's own state (fleet key, default fleet states, the last fleet's points) stays out
    # of the user's home, one folder per test so that no test sees another's.
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    digest = hashlib.sha256(test.encode()).hexdigest()[:16]
    state = os.path.join(tempfile.gettempdir(), f"ldpcollect-test-state-{os.getpid()}-{digest}")
    return {
        **env,
        "LDPCOLLECT_ADMIN_TOKEN": token,
        "LDPCOLLECT_STATE_DIR": state,
        "COLUMNS": "200",
        **extra,
    }


def run_cli(
    token: str, *args: str, server: str | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `ldpcollect ARGS [--server SERVER]` with `token` as the admin token; with `ok`,
    assert that it succeeded (showing its stderr when not)."""
    command = [sys.executable, "-m", "ldpcollect_cli.main", *args]
    if server is not None:
        command += ["--server", server]
    done = subprocess.run(command, env=cli_env(token), capture_output=True, text=True, timeout=120)
    if ok:
        assert done.returncode == 0, done.stderr
    return done


@dataclass(frozen=True)
class Served:
    address: str
    ready_line: str
    proc: subprocess.Popen[str]


def spawn_serve(token: str, *args: str) -> Served:
    """Start `ldpcollect serve --listen 127.0.0.1:0 ARGS` and wait for its ready line. A
    trusted aggregator given neither `--budget` nor `--no-budget` gets `--no-budget` (the
    explicit opt-out): tests about budgets pass their own."""
    command = [sys.executable, "-m", "ldpcollect_cli.main", "serve", "--listen", "127.0.0.1:0"]
    if not {"--budget", "--no-budget", "--role"} & set(args):
        args = (*args, "--no-budget")
    proc = subprocess.Popen(
        [*command, *args],
        env=cli_env(token),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    if not line.startswith(READY):
        proc.kill()
        raise AssertionError(f"serve did not start: {line}{proc.stderr.read()}")
    return Served(line[len(READY) :].split()[0], line, proc)


@contextmanager
def serving(db: Path, token: str, *args: str) -> Iterator[Served]:
    """Run `ldpcollect serve --db DB --listen 127.0.0.1:0 ARGS`; stop it with SIGTERM after,
    checking that it exits cleanly."""
    served = spawn_serve(token, "--db", str(db), *args)
    proc = served.proc
    try:
        yield served
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
