"""`ldpcollect loadtest` end to end: real `ldpcollect serve` processes on 127.0.0.1, the real CLI
in a subprocess, and the aggregator's own count afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.admin import connect_admin
from ldpcollect.mechanisms import mechanism_from_params
from tests.cli.tls_certs import make_tls_files
from tests.serving import cli_env, serving

TOKEN = "loadtest-token"
TARGETS = list(range(1, 101))
RR = mechanism_from_params("rr", {"flip1": "17/20", "flip2": "3/10"})


def cli(*args: str, token: str = TOKEN) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ldpcollect_cli.main", *args]
    env = cli_env(token)
    if not token:
        env.pop("LDPCOLLECT_ADMIN_TOKEN")
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def create_query(server: str, query_id: str) -> str:
    with connect_admin(server, TOKEN) as admin:
        admin.create_query(RR, "grid", TARGETS, query_id=query_id)
    return query_id


def loadtest_json(server: str, query_id: str, *args: str, token: str = TOKEN) -> dict[str, Any]:
    done = cli("loadtest", "--server", server, "--query", query_id, "--json", *args, token=token)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One aggregator for the module; each test loads its own query."""
    with serving(tmp_path_factory.mktemp("loadtest") / "agg.db", TOKEN) as served:
        yield served.address


@pytest.fixture
def query(server: str, request: pytest.FixtureRequest) -> str:
    return create_query(server, request.node.name[:60].replace("[", "-").replace("]", ""))


def assert_ordered(latency: dict[str, float]) -> None:
    values = [latency[k] for k in ("p50", "p90", "p99", "p99.9", "max")]
    assert all(v > 0 for v in values)
    assert values == sorted(values)


def test_open_loop_unary_counts_exactly_what_was_acknowledged(server: str, query: str) -> None:
    out = loadtest_json(server, query, "--mode", "unary", "--rate", "100", "--duration", "2")
    assert out["loop"] == "open"
    assert out["requests"] == {"planned": 200, "sent": 200, "answered": 200, "unsent": 0}
    assert out["statuses"] == {"OK": 200}
    assert out["reports"] == {"accepted": 200, "duplicates": 0, "rejected": {}}
    assert out["count_check"]["ok"] is True
    assert out["count_check"]["grew"] == {server: 200}
    shown = cli("query", "show", "--query", query, "--server", server, "--json")
    assert json.loads(shown.stdout)["reports_per_round"] == [200]
    assert_ordered(out["latency_ms"])
    assert out["achieved_rate"] > 0 and out["reports_per_second"] > 0


def test_closed_loop_batches_as_fast_as_acknowledged(server: str, query: str) -> None:
    out = loadtest_json(
        server, query, "--mode", "batch", "--rate", "0", "--duration", "1", "--batch-size", "50",
        "--max-in-flight", "4",
    )  # fmt: skip
    assert out["loop"] == "closed"
    assert out["requests"]["sent"] == out["requests"]["answered"] > 0
    assert set(out["statuses"]) == {"OK"}
    assert out["reports"]["accepted"] == 50 * out["requests"]["answered"]
    assert out["count_check"]["ok"] is True
    assert out["count_check"]["grew"] == {server: out["reports"]["accepted"]}
    assert out["late_sends"] == 0  # closed loop: sent when the previous one is answered
    assert_ordered(out["latency_ms"])


def test_two_servers_each_take_part_of_the_traffic_and_the_sum_matches(tmp_path: Path) -> None:
    with (
        serving(tmp_path / "one.db", TOKEN) as one,
        serving(tmp_path / "two.db", TOKEN) as two,
    ):
        for served in (one, two):
            create_query(served.address, "q2")
        both = f"{one.address},{two.address}"
        out = loadtest_json(
            both, "q2", "--mode", "stream", "--rate", "40", "--duration", "1.5",
            "--batch-size", "20", "--connections", "2",
        )  # fmt: skip
        per_address = out["accepted_by_address"]
        assert per_address[one.address] > 0 and per_address[two.address] > 0
        assert sum(per_address.values()) == out["reports"]["accepted"] == 60 * 20
        assert out["count_check"]["ok"] is True
        assert out["count_check"]["grew"] == per_address


def test_plot_draws_a_png_and_the_table_says_ok(server: str, query: str, tmp_path: Path) -> None:
    png = tmp_path / "out" / "load.png"
    done = cli(
        "loadtest", "--server", server, "--query", query, "--rate", "50", "--duration", "1",
        "--plot", str(png),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "OK: counted exactly the 50 accepted reports" in done.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(png).shape
    assert height > 400 and width > 400


def test_refused_batches_are_counted_not_retried(server: str, query: str) -> None:
    """A batch over the server's 10,000-report limit is RESOURCE_EXHAUSTED; nothing counted."""
    out = loadtest_json(
        server, query, "--mode", "batch", "--batch-size", "10001", "--rate", "2", "--duration", "1"
    )
    assert out["statuses"] == {"RESOURCE_EXHAUSTED": 2}
    assert out["pushback"] == {}  # the server gave no retry pushback
    assert out["reports"]["accepted"] == 0
    assert out["count_check"]["ok"] is True and out["count_check"]["grew"] == {server: 0}


def test_without_the_admin_token_the_count_check_is_skipped(server: str, query: str) -> None:
    out = loadtest_json(server, query, "--rate", "20", "--duration", "0.5", token="")
    assert out["count_check"]["ok"] is None
    assert "no admin token" in out["count_check"]["message"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--rate", "-1"), "--rate must be in [0, inf)"),
        (("--duration", "0"), "--duration must be in (0, inf) seconds, got 0.0"),
        (("--mode", "bidi"), "--mode must be unary | stream | batch"),
        (("--max-in-flight", "0"), "--max-in-flight must be in [1, inf)"),
        (("--server", "127.0.0.1:50051,nohost"), "--server must be host:port"),
    ],
)
def test_bad_arguments_give_one_line_errors_before_connecting(
    args: tuple[str, ...], says: str
) -> None:
    done = cli("loadtest", "--server", "127.0.0.1:9", "--query", "q1", "--duration", "1", *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_an_unknown_query_is_one_line_not_found(server: str) -> None:
    done = cli("loadtest", "--server", server, "--query", "nope", "--duration", "1")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.count("\n") == 1 and "NOT_FOUND: no query 'nope'" in done.stderr


def test_a_run_too_large_to_pre_build_is_refused_before_sending(server: str, query: str) -> None:
    done = cli(
        "loadtest", "--server", server, "--query", query, "--rate", "1e7", "--duration", "60"
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1, done.stderr
    assert "--rate x --duration must be in [0, 256] MiB of pre-built reports" in done.stderr
    with connect_admin(server, TOKEN) as admin:
        assert list(admin.get_query(query).reports_per_round) == [0]


def test_round_one_of_a_sampling_privacy_query(server: str) -> None:
    with connect_admin(server, TOKEN) as admin:
        sp = mechanism_from_params("sp", {"sampling_rate": "1/2"})
        admin.create_query(sp, "grid", TARGETS, query_id="sp-round1")
    out = loadtest_json(server, "sp-round1", "--mode", "batch", "--rate", "20", "--duration", "1")
    assert out["query"]["mechanism"] == "sampling_privacy"
    assert out["statuses"] == {"OK": 20}
    assert out["count_check"]["ok"] is True and out["count_check"]["grew"] == {server: 2000}


def test_over_tls(tmp_path: Path) -> None:
    tls = make_tls_files(tmp_path)
    tls_args = ("--tls-cert", str(tls.cert), "--tls-key", str(tls.key))
    with serving(tmp_path / "tls.db", TOKEN, *tls_args) as served:
        with connect_admin(served.address, TOKEN, tls_ca=tls.ca) as admin:
            admin.create_query(RR, "grid", TARGETS, query_id="q-tls")
        out = loadtest_json(
            served.address, "q-tls", "--tls-ca", str(tls.ca), "--rate", "20", "--duration", "1"
        )
    assert out["statuses"] == {"OK": 20}
    assert out["count_check"]["ok"] is True
