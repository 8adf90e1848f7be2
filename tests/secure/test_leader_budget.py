"""A leader publishes releases, so it holds the trusted aggregator's rule (issue 27): a release
without any budget is refused, before the helper releases anything, until a budget is fixed or
the operator opts out (and the release then says so); `serve --role leader --budget` fixes one
at start and refuses a different one after a release. Real `ldpcollect serve` processes and
the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.secure.roles import ADMIN, Pair, secure_pair
from tests.serving import run_cli

RR = ["--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3", "--targets", "1,2,3"]


def cli(*args: str, server: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return run_cli(ADMIN, *args, server=server, ok=ok)


def answered_query(pair: Pair, query_id: str, key: str) -> None:
    """A closed secure RR query that 30 simulated devices answered."""
    leader = pair.leader.address
    create = ["query", "create", "--secure", "--id", query_id, *RR, "--min-reports", "20"]
    cli(*create, "--collector-key", key, server=leader)
    fleet = ["fleet", "run", "--no-progress", "--query", query_id, "-n", "30"]
    cli(*fleet, "--helper", pair.helper.address, server=leader)
    cli("query", "close", "--query", query_id, server=leader)


def release(
    leader: str, query_id: str, key: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    return cli("release", "-q", query_id, "--collector-key", key, "--json", server=leader, ok=ok)


def test_a_leader_without_a_budget_refuses_releases_until_one_is_fixed(tmp_path: Path) -> None:
    key = str(tmp_path / "collector.key")
    with secure_pair(tmp_path, budget=()) as pair:  # neither --budget nor --no-budget
        leader = pair.leader.address
        answered_query(pair, "q", key)
        refused = release(leader, "q", key, ok=False)
        assert refused.returncode == 1 and "FAILED_PRECONDITION" in refused.stderr
        words = " ".join(refused.stderr.split())
        assert "no privacy budget is set" in words and "set-budget --no-budget" in words
        # Nothing was released or charged, at either aggregator.
        assert json.loads(cli("ledger", "--json", server=leader).stdout)["entries"] == []
        shown = json.loads(cli("query", "show", "--query", "q", "--json", server=leader).stdout)
        assert shown["state"] == "closed"
        # Once a budget is fixed, the same release goes out and is charged to it.
        cli("ledger", "set-budget", "--epsilon", "25", "--delta", "1e-6", server=leader)
        released = json.loads(release(leader, "q", key).stdout)
        assert released["participants"] == 30 and released["unbounded"] is False
        ledger = json.loads(cli("ledger", "--json", server=leader).stdout)
        assert [e["query_id"] for e in ledger["entries"]] == ["q"]
        assert ledger["budget"]["epsilon"] == 25.0


def test_an_opted_out_leader_releases_and_says_no_budget_limits_it(tmp_path: Path) -> None:
    key = str(tmp_path / "collector.key")
    with secure_pair(tmp_path, budget=("--no-budget",)) as pair:
        answered_query(pair, "q", key)
        released = json.loads(release(pair.leader.address, "q", key).stdout)
        assert "WITHOUT a privacy budget" in json.dumps(released["privacy"])


def test_serve_budget_at_a_leader_is_fixed_at_start(tmp_path: Path) -> None:
    key = str(tmp_path / "collector.key")
    with secure_pair(tmp_path, budget=("--budget", "8,1e-6,renyi")) as pair:
        leader = pair.leader.address
        budget = json.loads(cli("ledger", "--json", server=leader).stdout)["budget"]
        assert (budget["epsilon"], budget["delta"], budget["mode"]) == (8.0, 1e-6, "renyi")
        answered_query(pair, "q", key)
        assert json.loads(release(leader, "q", key).stdout)["participants"] == 30
        helper = pair.helper.address
    # After a release, a restart with another budget is refused, naming the way out.
    command = ["serve", "--role", "leader", "--db", str(tmp_path / "leader.db")]
    other = run_cli(
        ADMIN, *command, "--listen", "127.0.0.1:0", "--helper", helper, "--peer-token", "p",
        "--budget", "9,1e-6", ok=False,
    )  # fmt: skip
    assert other.returncode != 0 and "--new-filter" in other.stderr


def test_a_helper_refuses_the_leaders_budget_options_naming_its_own(tmp_path: Path) -> None:
    command = [
        "serve",
        "--role",
        "helper",
        "--db",
        str(tmp_path / "h.db"),
        "--listen",
        "127.0.0.1:0",
    ]
    for option in (["--budget", "1,1e-6"], ["--no-budget"]):
        done = run_cli(ADMIN, *command, *option, ok=False)
        assert done.returncode == 2, done.stderr
        words = " ".join(done.stderr.split())
        assert "--role trusted|leader" in words and "--budget-epsilon" in words
