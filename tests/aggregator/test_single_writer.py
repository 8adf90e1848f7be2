"""One writer per database file, one server per port: a second one fails at start, loudly.

Before: a second `ldpcollect serve --db same.db` started silently and both acknowledged
reports the other never counted (15,000 of 30,000 acknowledged reports missing from the counts
after a restart); a second serve on a port in use silently shared it (SO_REUSEPORT).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aggregator.store.single_writer import DatabaseInUse
from aggregator.store.sqlite import SqliteStore
from tests.serving import cli_env, serving

TOKEN = "single-writer-token"


def _serve_once(db: Path, listen: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ldpcollect_cli.main", "serve", "--db", str(db)]
    return subprocess.run(
        [*command, "--listen", listen],
        env=cli_env(TOKEN),
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_second_store_on_the_same_file_is_refused_until_the_first_closes(
    tmp_path: Path,
) -> None:
    db = tmp_path / "one.db"
    first = SqliteStore(db)
    await first.open()
    second = SqliteStore(db)
    with pytest.raises(DatabaseInUse, match=r"in use by another aggregator") as err:
        await second.open()
    assert str(db) in str(err.value)
    await first.close()
    await second.open()  # the first one's close released the lock
    await second.close()


def test_second_serve_on_the_same_database_exits_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    with serving(db, TOKEN) as first:
        result = _serve_once(db, "127.0.0.1:0")
        assert first.proc.poll() is None  # the first keeps serving
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(db) in lines[0] and "in use by another aggregator" in lines[0]
    assert f"pid {first.proc.pid}" in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # never announced itself as serving


def test_second_serve_on_a_port_in_use_exits_instead_of_sharing_it(tmp_path: Path) -> None:
    with serving(tmp_path / "a.db", TOKEN) as first:
        result = _serve_once(tmp_path / "b.db", first.address)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"cannot listen on {first.address}" in lines[0]
    assert result.stdout == ""
    assert not (tmp_path / "b.db").exists()  # refused before the database was touched


def test_the_lock_dies_with_its_process(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    command = [sys.executable, "-m", "ldpcollect_cli.main", "serve", "--db", str(db)]
    proc = subprocess.Popen(
        [*command, "--listen", "127.0.0.1:0"],
        env=cli_env(TOKEN),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("ldpcollect aggregator serving on ")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    with serving(db, TOKEN) as again:  # no stale lock after a crash
        assert again.proc.poll() is None
