"""`ldpcollect issuer serve` as a child process for tests (beside tests/serving.py's serve)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.serving import cli_env

READY = "ldpcollect issuer serving on "


@dataclass(frozen=True)
class Issuing:
    address: str
    state_dir: Path
    directory: Path
    proc: subprocess.Popen[str]


@contextmanager
def issuing(state_dir: Path, *args: str, tokens_per_epoch: int = 3) -> Iterator[Issuing]:
    """Run the issuer on an ephemeral 127.0.0.1 port, writing its directory beside its state."""
    directory = state_dir.parent / f"{state_dir.name}-directory.json"
    command = [sys.executable, "-m", "ldpcollect_cli.main", "issuer", "serve"]
    command += ["--state-dir", str(state_dir), "--listen", "127.0.0.1:0"]
    command += ["-k", str(tokens_per_epoch), "--directory-out", str(directory), *args]
    proc = subprocess.Popen(
        command, env=cli_env("unused"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    if not line.startswith(READY):
        proc.kill()
        raise AssertionError(f"issuer did not start: {line}{proc.stderr.read()}")
    try:
        yield Issuing(line[len(READY) :].split()[0], state_dir, directory, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def enroll(state_dir: Path, *device_ids: str) -> dict[str, str]:
    """`ldpcollect issuer enroll`: device id -> secret."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ldpcollect_cli.main",
            "issuer",
            "enroll",
            *device_ids,
            "--state-dir",
            str(state_dir),
        ],
        env=cli_env("unused"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(line.split() for line in done.stdout.splitlines())
