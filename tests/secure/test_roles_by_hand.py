"""The README's by-hand run through the real CLI: a helper serving mutual TLS with its own
policy, a leader reaching it with --helper-tls-ca and its client certificate, `ldpcollect
secure create|simulate` (devices fetch the helper's key from its public port, or pin its
published config), and `ldpcollect release --secure --json` opening both shares with the
collector key file."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from tests.cli.tls_certs import TlsFiles, make_tls_files
from tests.secure.roles import ADMIN, Role
from tests.serving import run_cli


def mutual_tls_helper(tmp_path: Path, tls: TlsFiles, *policy: str) -> Role:
    """A started helper serving TLS that requires a client certificate from the test CA."""
    helper = Role(
        "helper",
        tmp_path / "helper.db",
        "127.0.0.1:0",
        extra=(
            "--tls-cert", str(tls.cert), "--tls-key", str(tls.key),
            "--tls-client-ca", str(tls.ca), *policy,
        ),
    )  # fmt: skip
    helper.start()
    return helper


def test_by_hand_with_a_mutual_tls_helper_and_release_secure(tmp_path: Path) -> None:
    tls = make_tls_files(tmp_path)
    helper = mutual_tls_helper(tmp_path, tls, "--min-batch", "20", "--public-listen", "127.0.0.1:0")
    assert "(mutual TLS," in helper.ready_line
    pinned = tmp_path / "helper.db.hpke-helper.config"
    leader = Role(
        "leader",
        tmp_path / "leader.db",
        "127.0.0.1:0",
        helper=helper.address,
        extra=(
            "--helper-tls-ca", str(tls.ca), "--metrics-port", "0",
            "--peer-tls-cert", str(tls.client_cert), "--peer-tls-key", str(tls.client_key),
        ),
    )  # fmt: skip
    key = str(tmp_path / "collector.key")
    try:
        leader.start()
        server = leader.address
        rr = ["--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3", "--targets", "1,2,3"]
        create = ["secure", "create", "-q", "hand", *rr, "--min-reports", "20"]
        run_cli(ADMIN, *create, "--collector-key", key, server=server)
        # devices take the helper's key from the helper (its public port: the main one
        # wants the leader's client certificate), or from the file its operator publishes
        public = "127.0.0.1:" + helper.ready_line.split("its key on port ")[1].split(")")[0]
        from_helper = ["--helper", public, "--helper-tls-ca", str(tls.ca)]
        simulate = ["secure", "simulate", "-q", "hand", "-n", "30", *from_helper]
        run_cli(ADMIN, *simulate, server=server)
        pinning = ["secure", "simulate", "--helper-config", str(pinned)]
        bad = run_cli(ADMIN, *pinning, "-q", "nope", server=server, ok=False)
        assert bad.returncode == 1 and "NOT_FOUND" in bad.stderr
        release = ["release", "--secure", "-q", "hand", "--collector-key", key, "--json"]
        done = run_cli(ADMIN, *release, server=server)
        metrics_port = leader.ready_line.split("metrics on port ")[1].split(")")[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as page:
            metrics = page.read().decode()
    finally:
        leader.stop()
        helper.stop()
    data = json.loads(done.stdout)
    assert data["release"]["participants"] == 30
    assert [e["location_id"] for e in data["release"]["estimates"]] == [1, 2, 3]
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
    helper = ("--role", "helper", "--peer-token", "p")
    leader = ("--role", "leader", "--peer-token", "p", "--helper", "127.0.0.1:1")
    more_cases = {
        (*helper, "--accept-mechanism", "bogus"): "--accept-mechanism",
        (*helper, "--collector-config", "zz"): "--collector-config",
        (*helper, "--min-noise-sigma", "-1"): "--min-noise-sigma",
        (*leader, "--min-batch", "5"): "helper policy options",
        ("--min-batch", "5"): "--role helper",
        ("--insecure-peer",): "--role leader|helper",
        (*leader, "--peer-tls-cert", "c.pem"): "--peer-tls-cert/--peer-tls-key",
        (*leader, "--peer-tls-cert", "c.pem", "--peer-tls-key", "k.pem"): "--helper-tls-ca",
    }
    for args, option in {**cases, **more_cases}.items():
        done = run_cli(ADMIN, "serve", *args, *db, ok=False)
        assert done.returncode == 2, (args, done.stderr)
        assert option in done.stderr, (args, done.stderr)
    assert not (tmp_path / "x.db.secure").exists()


def test_a_plaintext_peer_channel_beyond_loopback_is_refused_unless_insecure_peer(
    tmp_path: Path,
) -> None:
    db = ["--db", str(tmp_path / "x.db"), "--peer-token", "p"]
    far_helper = ["--role", "leader", "--helper", "192.0.2.1:50051", "--listen", "127.0.0.1:0"]
    wide_helper = ["--role", "helper", "--listen", "0.0.0.0:0"]
    for args, option in ((far_helper, "--helper-tls-ca"), (wide_helper, "--tls-cert")):
        done = run_cli(ADMIN, "serve", *args, *db, ok=False)
        assert done.returncode == 2, done.stderr
        assert option in done.stderr and "is not loopback" in done.stderr, done.stderr
    leader = Role(
        "leader", tmp_path / "l.db", "127.0.0.1:0", "192.0.2.1:50051", ("--insecure-peer",)
    )
    leader.start()
    proc = leader.proc
    leader.stop()
    assert proc is not None and proc.stderr is not None
    assert "INSECURE PEER CHANNEL (leader)" in proc.stderr.read()


def test_a_mutual_tls_helper_refuses_a_leader_without_its_client_certificate(
    tmp_path: Path,
) -> None:
    tls = make_tls_files(tmp_path)
    helper = mutual_tls_helper(tmp_path, tls)
    leader = Role(
        "leader", tmp_path / "leader.db", "127.0.0.1:0", helper.address,
        ("--helper-tls-ca", str(tls.ca)),
    )  # fmt: skip
    try:
        leader.start()
        rr = ["--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3", "--targets", "1,2,3"]
        key = str(tmp_path / "collector.key")
        done = run_cli(
            ADMIN, "secure", "create", *rr, "--collector-key", key, server=leader.address, ok=False
        )
    finally:
        leader.stop()
        helper.stop()
    assert done.returncode == 1
    assert "UNAVAILABLE" in done.stderr and "the helper did not give its HPKE config" in done.stderr
