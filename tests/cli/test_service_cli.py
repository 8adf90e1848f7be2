"""The `ldpcollect` service commands end to end: a real `ldpcollect serve` subprocess and the
real CLI in subprocesses (query create, fleet run, query close, release --json, ledger)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ldpcollect import geo
from ldpcollect.accounting.conversions import round_up
from tests.serving import cli_env, run_cli, serving

TOKEN = "cli-test-token"
HOME = geo.GridScheme().locate(*geo.DEFAULT_CENTER)
TARGETS = ",".join(str(HOME + d) for d in (-1, 0, 1, 2))


def _env() -> dict[str, str]:
    return cli_env(TOKEN)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path / "agg.db", TOKEN) as served:
        yield served.address


def cli(*args: str, server: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return run_cli(TOKEN, *args, server=server, ok=ok)


def test_create_run_close_release_json(server: str, tmp_path: Path) -> None:
    created = cli(
        "query", "create", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3",
        "--targets", TARGETS, "--id", "rr-cli", "--json", server=server,
    )  # fmt: skip
    query = json.loads(created.stdout)
    assert query["query_id"] == "rr-cli"
    assert query["params"] == {"flip1": "17/20", "flip2": "3/10"}
    assert query["state"] == "open"

    run = cli(
        "fleet", "run", "--query", "rr-cli", "--devices", "800", "--mode", "stream",
        "--seed", "4", "--no-progress", "--json", server=server,
    )  # fmt: skip
    fleet = json.loads(run.stdout)
    assert fleet["completed"] == 800
    assert fleet["rounds"][0]["accepted"] == 800
    truth = {g["location_id"]: g["true_count"] for g in fleet["ground_truth"]}

    closed = json.loads(cli("query", "close", "--query", "rr-cli", "--json", server=server).stdout)
    assert closed["state"] == "closed"

    release = json.loads(cli("release", "--query", "rr-cli", "--json", server=server).stdout)
    assert release["participants"] == 800
    assert len(release["estimates"]) == 4
    for e in release["estimates"]:
        assert {"location_id", "estimate", "std_error", "ci_low", "ci_high", "participants"} <= set(
            e
        )
        assert e["participants"] == 800
        # Exact intervals are of counts in [0, 800]: they hold the estimate clipped to them.
        assert e["ci_low"] <= min(max(e["estimate"], 0), 800) <= e["ci_high"]
        assert abs(e["estimate"] - truth[e["location_id"]]) < 4.5 * e["std_error"]
    # asking again shows the same release rather than failing
    again = json.loads(cli("release", "--query", "rr-cli", "--json", server=server).stdout)
    assert again["estimates"] == release["estimates"]
    ledger = json.loads(cli("ledger", "--json", server=server).stdout)
    assert [e["query_id"] for e in ledger["entries"]] == ["rr-cli"]


def test_sp_fleet_with_advance_and_state_file(server: str, tmp_path: Path) -> None:
    cli(
        "query", "create", "--mechanism", "sp", "--sampling-rate", "0.5", "--targets", TARGETS,
        "--id", "sp-cli", server=server,
    )  # fmt: skip
    state = tmp_path / "fleet.npz"
    run = cli(
        "fleet", "run", "--query", "sp-cli", "--devices", "600", "--mode", "batch",
        "--batch-size", "100", "--advance", "--state", str(state), "--no-progress", "--json",
        server=server,
    )  # fmt: skip
    fleet = json.loads(run.stdout)
    assert [r["round"] for r in fleet["rounds"]] == [1, 2]
    assert fleet["completed"] == 600
    assert state.exists()
    shown = json.loads(cli("query", "show", "--query", "sp-cli", "--json", server=server).stdout)
    assert shown["completed_devices"] == 600
    listed = json.loads(cli("query", "list", "--json", server=server).stdout)
    assert [q["query_id"] for q in listed] == ["sp-cli"]


def test_errors_print_code_and_message_without_traceback(server: str) -> None:
    missing = cli("release", "--query", "nope", "--json", server=server, ok=False)
    assert missing.returncode == 1
    assert "NOT_FOUND" in missing.stderr
    assert "Traceback" not in missing.stderr

    bad = cli(
        "query", "create", "--mechanism", "rr", "--flip1", "1.5", "--flip2", "0.3",
        "--targets", TARGETS, server=server, ok=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "flip1" in bad.stderr and "Traceback" not in bad.stderr

    env = {k: v for k, v in _env().items() if k != "LDPCOLLECT_ADMIN_TOKEN"}
    command = [sys.executable, "-m", "ldpcollect_cli.main", "query", "list", "--server", server]
    wrong = subprocess.run(
        [*command, "--admin-token", "wrong"], env=env, capture_output=True, text=True, timeout=60
    )
    assert wrong.returncode == 1
    assert "PERMISSION_DENIED" in wrong.stderr or "UNAUTHENTICATED" in wrong.stderr


def test_demo_json_small(tmp_path: Path) -> None:
    done = cli("demo", "--devices", "1000", "--json")
    out = json.loads(done.stdout)
    assert len(out["targets"]) == 25  # the 5 x 5 busiest block
    # SP runs on two aggregators; the trusted aggregator (RR) fixes its budget first.
    assert set(out["releases"]) == {"rr", "sp", "sp_noise"} and out["refused"] == {}
    assert out["ledger"]["budget"]["epsilon"] == 6.0
    assert out["ledger"]["budget"]["mode"] == "renyi"
    for name in ("rr", "sp", "sp_noise"):
        release = out["releases"][name]
        assert release["participants"] == out["fleet"][name]["completed"] > 0
        assert isinstance(release["claims"], list)  # the release's privacy cost, as returned
    noised = {c["view"]: c for c in out["releases"]["sp_noise"]["claims"]}
    assert noised["public"]["guarantee"] == "zcdp" and noised["public"]["rho"] > 0
    busiest = out["busiest"]
    assert busiest[0]["ground_truth"] >= busiest[-1]["ground_truth"]


def test_ledger_set_budget_and_the_human_ledger(server: str) -> None:
    budget = json.loads(
        cli(
            "ledger", "set-budget", "--epsilon", "5", "--delta", "1e-6", "--json", server=server
        ).stdout
    )
    assert (budget["budget"]["epsilon"], budget["budget"]["delta"]) == (5.0, 1e-6)
    assert budget["budget"]["mode"] == "zcdp" and budget["spent"] == 0
    cli(
        "query", "create", "--mechanism", "sp", "--sampling-rate", "0.5", "--targets", TARGETS,
        "--id", "noisy", "--noise-sigma", "2", server=server,
    )  # fmt: skip
    cli(
        "fleet", "run", "--query", "noisy", "--devices", "200", "--advance", "--no-progress",
        server=server,
    )  # fmt: skip
    cli("query", "close", "--query", "noisy", server=server)
    cli("release", "--query", "noisy", server=server)

    shown = json.loads(cli("ledger", "--json", server=server).stdout)
    text = cli("ledger", server=server).stdout

    def row(label: str, value: str) -> None:
        """A summary table row `label | value...` (columns padded by rich)."""
        pattern = rf"│ {re.escape(label)}\s+│ {re.escape(value)}"
        assert re.search(pattern, text), (label, value)

    row("budget mode", "zcdp - zCDP filter")
    row("budget", "epsilon 5 at delta 1e-06")
    row("budget as rho", f"{shown['budget']['rho']:.6g}")
    row("spent (rho)", "0.25")
    row("remaining (rho)", f"{-round_up(-shown['remaining'], 6):.6g}")  # rounded down
    # Losses print rounded up: a printed bound is never below the figure.
    row("spent as epsilon", f"{up(shown['spent_epsilon'])} (CKS); ")
    assert f"{up(shown['spent_epsilon_bun_steinke'])} (Bun-Steinke) at delta 1e-06" in text
    row("odometer", f"epsilon {up(shown['odometer']['epsilon'])} at delta 1e-06 (")
    assert shown["odometer"]["method"] in text
    row("reporting delta", "1e-06")
    for words in ("releases (1)", "noisy", "aggregator", "approximate", "budget changes", "note:"):
        assert words in text, words

    lowered = cli(
        "ledger", "set-budget", "--epsilon", "0.1", "--delta", "1e-6", server=server, ok=False
    )
    assert lowered.returncode == 1
    assert "FAILED_PRECONDITION" in lowered.stderr and "Traceback" not in lowered.stderr
    after = json.loads(cli("ledger", "--json", server=server).stdout)
    assert after["budget"] == shown["budget"]  # the refused change changed nothing

    misplaced = cli("ledger", "--json", "set-budget", "--epsilon", "9", "--delta", "0", ok=False)
    assert misplaced.returncode == 2 and "--json" in misplaced.stderr


def up(value: float) -> str:
    return f"{round_up(value, 4):.4g}"


def test_no_privacy_needs_the_explicit_flag_and_bad_noise_is_refused_at_create(
    server: str,
) -> None:
    truthful = ("query", "create", "--mechanism", "rr", "--flip1", "1", "--flip2", "0")
    refused = cli(*truthful, "--targets", TARGETS, "--id", "census", server=server, ok=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: INVALID_ARGUMENT: mechanism must be")
    assert "--allow-no-privacy" in refused.stderr
    assert "census" not in cli("query", "list", "--json", server=server).stdout

    created = cli(
        *truthful, "--targets", TARGETS, "--id", "census", "--allow-no-privacy", "--json",
        server=server,
    )  # fmt: skip
    assert json.loads(created.stdout)["params"] == {"flip1": "1", "flip2": "0"}

    for sigma, why in (("1e300", "exponent beyond"), ("0.001", "[1/10, 1000]"), ("abc", "not")):
        bad = cli(
            "query", "create", "--mechanism", "sp", "--sampling-rate", "0.5",
            "--targets", TARGETS, "--noise-sigma", sigma, server=server, ok=False,
        )  # fmt: skip
        assert bad.returncode == 2, bad.stderr
        assert bad.stderr.startswith("error: --noise-sigma must be in [1/10, 1000]")
        assert why in bad.stderr and "Traceback" not in bad.stderr
