"""The README's by-hand run through the real CLI: a helper serving TLS, a leader reaching it
with --helper-tls-ca, `ldpcollect query create --secure`, `fleet run` and `ldpcollect release
--json` opening both shares with the collector key file."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from tests.cli.tls_certs import make_tls_files
from tests.secure.roles import ADMIN, Role
from tests.serving import run_cli


def test_by_hand_with_a_tls_helper_and_the_query_fleet_release_commands(tmp_path: Path) -> None:
    tls = make_tls_files(tmp_path)
    helper = Role(
        "helper",
        tmp_path / "helper.db",
        "127.0.0.1:0",
        extra=("--tls-cert", str(tls.cert), "--tls-key", str(tls.key)),
    )
    helper.start()
    assert "(TLS," in helper.ready_line
    leader = Role(
        "leader",
        tmp_path / "leader.db",
        "127.0.0.1:0",
        helper=helper.address,
        extra=("--helper-tls-ca", str(tls.ca), "--metrics-port", "0"),
    )
    key = str(tmp_path / "collector.key")
    try:
        leader.start()
        server = leader.address
        rr = ["--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3", "--targets", "1,2,3"]
        create = ["query", "create", "--secure", "--id", "hand", *rr, "--min-reports", "20"]
        run_cli(ADMIN, *create, "--collector-key", key, server=server)
        fleet = ["fleet", "run", "--no-progress", "-n", "30"]
        run_cli(ADMIN, *fleet, "--query", "hand", server=server)
        bad = run_cli(ADMIN, *fleet, "--query", "nope", server=server, ok=False)
        assert bad.returncode == 1 and "NOT_FOUND" in bad.stderr
        release = ["release", "-q", "hand", "--collector-key", key, "--json"]
        done = run_cli(ADMIN, *release, server=server)
        metrics_port = leader.ready_line.split("metrics on port ")[1].split(")")[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as page:
            metrics = page.read().decode()
    finally:
        leader.stop()
        helper.stop()
    data = json.loads(done.stdout)
    assert data["secure"] is True and data["participants"] == 30
    assert [e["location_id"] for e in data["estimates"]] == [1, 2, 3]
    assert set(data["views"]) == {"aggregator", "collector+aggregator", "public"}
    assert (Path(key).stat().st_mode & 0o777) == 0o600
    assert 'ldpcollect_secure_uploads_total{outcome="accepted"} 30.0' in metrics
    assert 'ldpcollect_secure_reports_total{outcome="aggregated"} 30.0' in metrics


def test_serve_refuses_role_option_mistakes_naming_the_option(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "x.db"), "--listen", "127.0.0.1:0"]
    cases = {
        ("--role", "bogus", "--peer-token", "p"): "--role",
        ("--role", "leader", "--peer-token", "p"): "--helper",
        ("--role", "helper"): "--peer-token",
        ("--role", "helper", "--peer-token", "p", "--helper", "h:1"): "--helper",
        ("--helper", "h:1"): "--helper",
    }
    for args, option in cases.items():
        done = run_cli(ADMIN, "serve", *args, *db, ok=False)
        assert done.returncode == 2, (args, done.stderr)
        assert option in done.stderr, (args, done.stderr)
    assert not (tmp_path / "x.db.secure").exists()
