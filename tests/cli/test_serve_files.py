"""`ldpcollect serve` and its database file: what it says at start, what it leaves on disk.

Real `ldpcollect serve` processes on 127.0.0.1: a database that cannot be used is one line
naming the file and what to do; a new file is announced; the files are private to the user;
after a release and a SIGKILL no pseudonym or report id is left in any of them; reflection
lists the Admin service only when asked.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from tests.serving import READY, cli_env

TOKEN = "files-test-token"
ADMIN = (("authorization", f"Bearer {TOKEN}"),)


def serve_command(db: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ldpcollect_cli.main",
        "serve",
        "--db",
        str(db),
        "--listen",
        "127.0.0.1:0",
        "--no-budget",
        *args,
    ]


@contextmanager
def started(db: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A running `serve`, its address and process; killed at the end if still running."""
    proc = subprocess.Popen(
        serve_command(db, *args),
        env=cli_env(TOKEN),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    try:
        assert line.startswith(READY), line + (proc.stderr.read() if proc.stderr else "")
        yield line[len(READY) :].split()[0], proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def refused_start(db: Path) -> tuple[int, list[str]]:
    done = subprocess.run(
        serve_command(db), env=cli_env(TOKEN), capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stderr.strip().splitlines()


def test_a_corrupt_database_is_one_line_naming_the_file_and_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "corrupt.db"
    db.write_bytes(b"this is not an SQLite database\n" * 200)
    code, lines = refused_start(db)
    assert code != 0
    assert len(lines) == 1, lines
    assert str(db) in lines[0] and "backup" in lines[0] and "--db" in lines[0]
    assert db.read_bytes() == b"this is not an SQLite database\n" * 200  # left as it was


def test_an_unopenable_database_is_one_line_naming_the_path(tmp_path: Path) -> None:
    for db in (tmp_path, tmp_path / "no-such-dir" / "agg.db"):
        code, lines = refused_start(db)
        assert code != 0
        assert len(lines) == 1, lines
        assert str(db) in lines[0] and "cannot be opened" in lines[0]
        assert "Traceback" not in lines[0]


def test_a_new_database_is_announced_and_private(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    with started(db) as (_, proc):
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0
    assert f"{db} does not exist; creating a new, empty database" in err
    with started(db) as (_, proc):
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "creating" not in err  # an existing file is used as it is


@pytest.mark.parametrize("targets", [10, 1000])  # answers in the log rows, in an answer file
def test_after_a_release_and_a_kill_no_report_bytes_remain_in_any_file(
    tmp_path: Path, targets: int
) -> None:
    db = tmp_path / "agg.db"
    rng = random.Random(20261201)
    n_devices = 300
    pseudonyms = [rng.randbytes(16) for _ in range(n_devices)]
    report_ids = [rng.randbytes(16) for _ in range(n_devices)]
    with started(db) as (address, proc), grpc.insecure_channel(address) as channel:
        admin, collector = pb_grpc.AdminStub(channel), pb_grpc.CollectorStub(channel)
        admin.CreateQuery(
            pb.CreateQueryRequest(
                query_id="gone",
                mechanism=pb.MechanismSpec(
                    randomized_response=pb.RandomizedResponse(flip1="0.85", flip2="0.3")
                ),
                location_scheme=pb.LocationScheme(grid=pb.GridScheme()),
                targets=list(range(1, targets + 1)),
                min_reports=1,
            ),
            metadata=ADMIN,
        )
        sent: list[bytes] = []
        for pseudonym, report_id in zip(pseudonyms, report_ids, strict=True):
            report = pb.Report(
                query_id="gone",
                round=1,
                device_pseudonym=pseudonym,
                report_id=report_id,
                answers=(
                    rng.randbytes(targets // 8)
                    if targets % 8 == 0
                    else bytes([rng.randrange(256), rng.randrange(4) << 6])
                ),
            )
            collector.SubmitReport(pb.SubmitReportRequest(report=report))
            sent.append(report.answers)
        if targets > 10:  # wide: its answers went to the query's answer file
            assert len(list(Path(f"{db}.answers").iterdir())) == 1
        admin.CloseQuery(pb.CloseQueryRequest(query_id="gone"), metadata=ADMIN)
        # The key the reports are encrypted under: a release must leave it nowhere either.
        with closing(sqlite3.connect(db)) as reader:
            (key,) = reader.execute(
                "SELECT key FROM report_keys WHERE query_id = 'gone'"
            ).fetchone()
        release = admin.Release(pb.ReleaseRequest(query_id="gone"), metadata=ADMIN)
        assert release.participants == n_devices
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    paths = sorted(p for p in tmp_path.rglob("*") if str(p).startswith(str(db)))
    for path in paths:  # the file, its -wal and -shm, the answer files' directory
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    files = [p for p in paths if p.is_file()]
    assert db in files
    assert not [p for p in files if p.parent != tmp_path]  # the answer file went with it
    contents = b"".join(path.read_bytes() for path in files)
    left = [key.hex() for key in pseudonyms + report_ids if key in contents]
    assert not left, f"{len(left)} pseudonyms or report ids left in {[p.name for p in files]}"
    assert not [a for a in sent if len(a) >= 16 and a in contents]  # nor a wide answer
    assert len(key) == 32 and key not in contents


def test_reflection_lists_the_admin_service_only_with_the_flag(tmp_path: Path) -> None:
    def listed(*args: str) -> set[str]:
        with (
            started(tmp_path / "r.db", *args) as (address, _),
            grpc.insecure_channel(address) as channel,
        ):
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            replies = stub.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")])
            )
            return {s.name for r in replies for s in r.list_services_response.service}

    assert "ldpcollect.v1.Admin" not in listed()
    assert "ldpcollect.v1.Collector" in listed()
    assert "ldpcollect.v1.Admin" in listed("--reflection")
