"""`ldpcollect serve ...` (or `issuer serve ...`) in a child process: start it, read its ready
line, stop it. Used by the demos and benchmarks (the trusted aggregator, the secure leader and
helper, the token issuer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def serve_subprocess(
    args: list[str], env: Mapping[str, str], ready_prefix: str, what: str
) -> Iterator[str]:
    """`ldpcollect serve ARGS`; yields the host:port its ready line names; SIGTERM after."""
    with cli_subprocess(["serve", *args], env, ready_prefix, what) as address:
        yield address


@contextmanager
def cli_subprocess(
    args: list[str], env: Mapping[str, str], ready_prefix: str, what: str
) -> Iterator[str]:
    """`ldpcollect ARGS` for a command that prints a ready line naming its host:port."""
    command = [sys.executable, "-m", "ldpcollect_cli.main", *args]
    proc = subprocess.Popen(
        command,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith(ready_prefix):
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise OSError(f"{what} did not start: {line.strip()} {err.strip()}")
        yield line[len(ready_prefix) :].split()[0]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
