"""TLS end to end: `ldpcollect serve --tls-cert --tls-key` with a CA and certificate made in the
test; the CLI (--tls-ca and env LDPCOLLECT_TLS_CA), the fleet runner and the Device class
through it; plaintext clients and clients trusting another CA are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.channels import ClientIdentity, open_channel
from client.device import Device
from ldpcollect import geo
from ldpcollect_cli.serving import is_loopback, plaintext_warning
from tests.cli.tls_certs import TlsFiles, make_tls_files
from tests.serving import cli_env, serving

TOKEN = "tls-test-token"
HOME = geo.GridScheme().locate(*geo.DEFAULT_CENTER)
TARGETS = ",".join(str(HOME + d) for d in (-1, 0, 1, 2))


def _env(**extra: str) -> dict[str, str]:
    return cli_env(TOKEN, **extra)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ldpcollect_cli.main", *args]
    return subprocess.run(command, env=env or _env(), capture_output=True, text=True, timeout=120)


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    done = cli(*args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls_files(tmp_path)


@pytest.fixture
def tls_server(tmp_path: Path, tls: TlsFiles) -> Iterator[str]:
    tls_args = ("--tls-cert", str(tls.cert), "--tls-key", str(tls.key))
    with serving(tmp_path / "agg.db", TOKEN, *tls_args) as served:
        assert "(TLS, db " in served.ready_line
        yield served.address
    assert served.proc.stderr is not None
    assert "WITHOUT TLS" not in served.proc.stderr.read()


def test_queries_fleet_device_and_release_over_tls(
    tls_server: str, tls: TlsFiles, tmp_path: Path
) -> None:
    server = ["--server", tls_server, "--tls-ca", str(tls.ca)]
    created = ok(
        "query", "create", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3",
        "--targets", TARGETS, "--id", "tls-rr", "--json", *server,
    )  # fmt: skip
    assert json.loads(created)["state"] == "open"
    ok(
        "query", "create", "--mechanism", "sp", "--sampling-rate", "0.5", "--targets", TARGETS,
        "--id", "tls-sp", *server,
    )  # fmt: skip

    # The Device class over a TLS channel.
    device = Device(tmp_path / "device.json", *geo.DEFAULT_CENTER)
    with open_channel(tls_server, tls_ca=tls.ca) as channel:
        (outcome,) = device.participate(channel, query_ids=["tls-rr"])
    assert outcome.status == "accepted", outcome

    # The fleet runner (Collector over grpc.aio, AdvanceRound through the admin client).
    fleet = ok(
        "fleet", "run", "--query", "tls-sp", "--devices", "300", "--mode", "stream",
        "--advance", "--seed", "7", "--no-progress", "--json", *server,
    )  # fmt: skip
    assert [r["accepted"] for r in json.loads(fleet)["rounds"]] == [300, 300]
    ok("fleet", "run", "--query", "tls-rr", "--devices", "200", "--no-progress", *server)

    # The CA from the environment instead of --tls-ca.
    env = _env(LDPCOLLECT_TLS_CA=str(tls.ca), LDPCOLLECT_SERVER=tls_server)
    for query in ("tls-rr", "tls-sp"):
        ok("query", "close", "--query", query, env=env)
    rr = json.loads(ok("release", "--query", "tls-rr", "--json", env=env))
    sp = json.loads(ok("release", "--query", "tls-sp", "--json", env=env))
    assert (rr["participants"], sp["participants"]) == (201, 300)
    ledger = json.loads(ok("ledger", "--json", env=env))
    assert [e["query_id"] for e in ledger["entries"]] == ["tls-rr", "tls-sp"]
    budget = json.loads(ok("ledger", "set-budget", "--no-budget", "--json", *server))
    assert budget["budget"]["mode"] == "none"


def words(text: str) -> str:
    return " ".join(text.split())


def test_plaintext_and_wrong_ca_clients_are_refused_in_one_line_naming_the_fix(
    tls_server: str, tmp_path: Path
) -> None:
    plaintext = cli("query", "list", "--server", tls_server)
    assert plaintext.returncode == 1
    said = words(plaintext.stderr)
    assert said == (
        f"error: UNAVAILABLE: the server at {tls_server} closed the connection, as a TLS "
        "server does to a plaintext client: give its CA with --tls-ca CA.pem (or "
        "LDPCOLLECT_TLS_CA)"
    )

    other_ca = make_tls_files(tmp_path, "other").ca
    wrong = cli("query", "list", "--server", tls_server, "--tls-ca", str(other_ca), "--json")
    assert wrong.returncode == 1
    assert f"the certificate of the server at {tls_server} is not signed by the CA in --tls-ca" in (
        words(wrong.stderr)
    )
    error = json.loads(wrong.stdout)["error"]  # --json: the error on stdout too
    assert error["code"] == "UNAVAILABLE" and error["exit_code"] == 1
    assert "is not signed by the CA in --tls-ca" in error["message"]

    missing = cli("query", "list", "--server", tls_server, "--tls-ca", str(tmp_path / "no.pem"))
    assert missing.returncode == 2
    assert "--tls-ca must be a readable PEM file of CA certificates" in words(missing.stderr)
    not_pem = tmp_path / "not-a-ca.pem"
    not_pem.write_text("hello\n")
    bad = cli("query", "list", "--server", tls_server, "--tls-ca", str(not_pem))
    assert bad.returncode == 2 and "--tls-ca" in bad.stderr


def test_no_server_and_a_plaintext_server_named_in_one_line(tmp_path: Path, tls: TlsFiles) -> None:
    with serving(tmp_path / "plain.db", TOKEN) as served:
        tls_client = cli("query", "list", "--server", served.address, "--tls-ca", str(tls.ca))
        assert f"the server at {served.address} does not speak TLS" in words(tls_client.stderr)
        assert "leave out --tls-ca" in words(tls_client.stderr)
        address = served.address
    stopped = cli("query", "list", "--server", address, "--json")
    assert stopped.returncode == 1
    assert words(stopped.stderr).startswith(
        f"error: UNAVAILABLE: no aggregator is listening at {address}: start one "
        "(`ldpcollect serve`)"
    )
    assert "connections to all backends failing" not in stopped.stderr
    assert json.loads(stopped.stdout)["error"]["code"] == "UNAVAILABLE"


def test_serve_refuses_half_or_unreadable_tls_settings(tls: TlsFiles, tmp_path: Path) -> None:
    base = ["serve", "--db", str(tmp_path / "x.db"), "--listen", "127.0.0.1:0"]
    half = cli(*base, "--tls-cert", str(tls.cert))
    assert half.returncode == 2 and "--tls-cert/--tls-key" in half.stderr
    missing = cli(*base, "--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", str(tls.key))
    assert missing.returncode == 1
    assert "cannot read the TLS certificate" in missing.stderr and "nope.pem" in missing.stderr
    swapped = cli(*base, "--tls-cert", str(tls.key), "--tls-key", str(tls.cert))
    assert swapped.returncode == 1 and "not PEM" in swapped.stderr


def test_plaintext_warning_only_beyond_loopback() -> None:
    for listen in ("127.0.0.1:0", "127.0.0.53:50051", "localhost:50051", "[::1]:50051"):
        assert is_loopback(listen), listen
        assert plaintext_warning(listen, tls=False) is None
    for listen in ("0.0.0.0:50051", "[::]:50051", "10.0.0.5:50051", "collector.example:443"):
        assert not is_loopback(listen), listen
        warning = plaintext_warning(listen, tls=False)
        assert warning is not None and "WITHOUT TLS" in warning and listen in warning
        assert plaintext_warning(listen, tls=True) is None


def test_mutual_tls_admits_only_clients_with_a_certificate_from_the_client_ca(
    tls: TlsFiles, tmp_path: Path
) -> None:
    mutual = (
        "--tls-cert", str(tls.cert), "--tls-key", str(tls.key), "--tls-client-ca", str(tls.ca),
    )  # fmt: skip
    with serving(tmp_path / "mtls.db", TOKEN, *mutual) as served:
        assert "(mutual TLS, db " in served.ready_line
        server = ["--server", served.address, "--tls-ca", str(tls.ca)]
        enrolled = _env(
            LDPCOLLECT_TLS_CLIENT_CERT=str(tls.client_cert),
            LDPCOLLECT_TLS_CLIENT_KEY=str(tls.client_key),
        )
        ok(
            "query", "create", "--mechanism", "sp", "--sampling-rate", "0.5",
            "--targets", TARGETS, "--id", "mtls-sp", *server, env=enrolled,
        )  # fmt: skip
        ok(
            "query", "create", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3",
            "--targets", TARGETS, "--id", "mtls-rr", *server, env=enrolled,
        )  # fmt: skip
        fleet = ok(
            "fleet", "run", "--query", "mtls-sp", "--devices", "200", "--advance", "--seed", "3",
            "--no-progress", "--json", *server, env=enrolled,
        )  # fmt: skip
        assert [r["accepted"] for r in json.loads(fleet)["rounds"]] == [200, 200]

        # A device with an enrolled certificate, through the SDK.
        device = Device(tmp_path / "device.json", *geo.DEFAULT_CENTER)
        identity = ClientIdentity(tls.client_cert, tls.client_key)
        with open_channel(served.address, tls_ca=tls.ca, identity=identity) as channel:
            assert device.participate(channel, query_ids=["mtls-rr"])[0].status == "accepted"

        # No certificate, or one from another CA: the handshake fails, nothing is counted.
        stranger = make_tls_files(tmp_path, "stranger")
        for env in (
            _env(),
            _env(
                LDPCOLLECT_TLS_CLIENT_CERT=str(stranger.client_cert),
                LDPCOLLECT_TLS_CLIENT_KEY=str(stranger.client_key),
            ),
        ):
            refused = cli("query", "list", *server, env=env)
            assert refused.returncode == 1
            assert "UNAVAILABLE" in refused.stderr and "Traceback" not in refused.stderr
            fleet_refused = cli(
                "fleet", "run", "--query", "mtls-rr", "--devices", "5", "--no-progress", *server,
                env=env,
            )  # fmt: skip
            assert fleet_refused.returncode == 1
        listed = json.loads(ok("query", "list", "--json", *server, env=enrolled))
        counts = {q["query_id"]: q["reports_per_round"] for q in listed}
        assert counts == {"mtls-sp": [200, 200], "mtls-rr": [1]}

        half = cli(
            "query", "list", *server, env=_env(LDPCOLLECT_TLS_CLIENT_CERT=str(tls.client_cert))
        )
        assert half.returncode == 2 and "LDPCOLLECT_TLS_CLIENT_KEY" in half.stderr


def test_serve_refuses_client_ca_without_its_own_certificate(tls: TlsFiles, tmp_path: Path) -> None:
    base = ["serve", "--db", str(tmp_path / "y.db"), "--listen", "127.0.0.1:0"]
    alone = cli(*base, "--tls-client-ca", str(tls.ca))
    assert alone.returncode == 2 and "--tls-client-ca" in alone.stderr
    assert not (tmp_path / "y.db").exists()
