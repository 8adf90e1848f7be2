"""deploy/: the dev-certificate script makes files `ldpcollect serve` and the CLI accept; the
README's online backup (`ldpcollect store backup` of a live WAL database) restores into a
working server; the systemd unit passes `systemd-analyze verify`. Each part is skipped when
its tool (openssl, systemd-analyze) is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cli.test_tls import TARGETS, TOKEN, ok
from tests.serving import serving as serving_cli

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@contextmanager
def serving(db: Path, *tls: str) -> Iterator[str]:
    with serving_cli(db, TOKEN, *tls) as served:
        yield served.address


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_dev_certs_serve_tls_and_online_backup_restores(tmp_path: Path) -> None:
    certs = tmp_path / "tls"
    made = subprocess.run(
        ["bash", str(DEPLOY / "tls" / "make-dev-certs.sh"), str(certs), "collector.example"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    assert "DNS:collector.example" in made.stdout
    assert (certs / "server.key").stat().st_mode & 0o077 == 0  # key not readable by others
    tls = ("--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"))
    db = tmp_path / "agg.db"
    backup = tmp_path / "backup.db"
    with serving(db, *tls) as address:
        server = ["--server", address, "--tls-ca", str(certs / "ca.pem")]
        ok(
            "query", "create", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3",
            "--targets", TARGETS, "--id", "kept", *server,
        )  # fmt: skip
        ok("fleet", "run", "--query", "kept", "--devices", "100", "--no-progress", *server)
        ok("store", "backup", "--db", str(db), str(backup))
    with serving(backup) as address:
        listed = json.loads(ok("query", "list", "--json", "--server", address))
    assert [(q["query_id"], q["reports_per_round"]) for q in listed] == [("kept", [100])]


def test_bad_host_is_refused_by_the_cert_script(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(DEPLOY / "tls" / "make-dev-certs.sh"), str(tmp_path), "bad host!"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "HOST must be" in done.stderr
    assert not (tmp_path / "server.pem").exists()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    unit = (DEPLOY / "systemd" / "ldpcollect-aggregator.service").read_text()
    assert "/opt/ldpcollect/.venv/bin/ldpcollect serve" in unit
    # verify checks that ExecStart's program exists: point it at this checkout's command.
    local = Path(sys.executable).parent / "ldpcollect"
    copy = tmp_path / "ldpcollect-aggregator.service"
    copy.write_text(unit.replace("/opt/ldpcollect/.venv/bin/ldpcollect", str(local)))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "ldpcollect-aggregator.service" not in done.stderr, done.stderr
