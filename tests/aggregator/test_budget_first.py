"""A budget fixed before the first release, against real `ldpcollect serve` subprocesses: a
release without any budget is refused unless the operator opted out (and then says so),
`serve --budget` fixes it at start, it is never raised within a filter, and a new filter is an
explicit recorded act whose odometer covers everything released before."""

from __future__ import annotations

import json
from pathlib import Path

from tests.aggregator.test_ledger_cli import TOKEN, cli, run_sp_query
from tests.serving import run_cli, serving


def release_json(server: str, query_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        cli("release", "--query", query_id, "--json", server=server).stdout
    )
    return data


def ledger_json(server: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(cli("ledger", "--json", server=server).stdout)
    return data


def test_without_a_budget_releases_are_refused_until_one_is_fixed_or_opted_out(
    tmp_path: Path,
) -> None:
    with serving(tmp_path / "fresh.db", TOKEN, "--budget", "0.5,1e-6") as served:
        budget = ledger_json(served.address)["budget"]
        assert isinstance(budget, dict)
        assert (budget["epsilon"], budget["delta"], budget["mode"]) == (0.5, 1e-6, "zcdp")
    # A trusted aggregator given neither --budget nor --no-budget refuses releases.
    db = tmp_path / "none.db"
    with serving(db, TOKEN, "--role", "trusted") as served:  # neither --budget nor --no-budget
        server = served.address
        run_sp_query(server, "first", "2")
        refused = cli("release", "--query", "first", "--json", server=server, ok=False)
        assert refused.returncode == 1 and "FAILED_PRECONDITION" in refused.stderr
        assert "no privacy budget is set" in refused.stderr
        assert "set-budget --no-budget" in refused.stderr
        # The explicit opt-out is recorded; the release then says it had no budget.
        out = json.loads(cli("ledger", "set-budget", "--no-budget", "--json", server=server).stdout)
        assert out["budget_changes"][-1]["epsilon"] == 0.0
        released = release_json(server, "first")
        assert "WITHOUT a privacy budget" in str(released["privacy"])


def test_serve_budget_is_fixed_and_cannot_be_raised_after_a_release(tmp_path: Path) -> None:
    db = tmp_path / "agg.db"
    with serving(db, TOKEN, "--budget", "5,1e-6") as served:
        server = served.address
        run_sp_query(server, "first", "2")
        first = release_json(server, "first")
        assert first["unbounded"] is False and isinstance(first["epsilon"], float)
        assert first["delta"] == 1e-6
        raised = cli(
            "ledger", "set-budget", "--epsilon", "50", "--delta", "1e-6", server=server, ok=False
        )
        assert raised.returncode == 1 and "FAILED_PRECONDITION" in raised.stderr
        assert "budget is fixed once a release was charged" in raised.stderr
        before = ledger_json(server)
        assert before["budget"]["epsilon"] == 5.0  # type: ignore[index]
    # A restart with the same budget is fine; with another one (after a release) it refuses
    # to start, naming the way out.
    with serving(db, TOKEN, "--budget", "5,1e-6") as served:
        assert ledger_json(served.address)["spent"] == before["spent"]
    other = run_cli(
        TOKEN, "serve", "--db", str(db), "--listen", "127.0.0.1:0", "--budget", "9,1e-6", ok=False
    )
    assert other.returncode != 0 and "--new-filter" in other.stderr
    # A new filter is an explicit, recorded act: its budget limits later releases, and the
    # ledger's headline (the odometer) covers every release.
    with serving(db, TOKEN) as served:
        server = served.address
        fresh = json.loads(
            cli(
                "ledger", "set-budget", "--new-filter", "--epsilon", "5", "--delta", "1e-6",
                "--json", server=server,
            ).stdout
        )  # fmt: skip
        assert fresh["spent"] == 0.0 and fresh["budget_changes"][-1]["releases_before"] == 1
        run_sp_query(server, "second", "2")
        release_json(server, "second")
        after = ledger_json(server)
        entries = after["entries"]
        assert isinstance(entries, list)
        assert [e["query_id"] for e in entries] == ["first", "second"]
        assert after["spent"] == before["spent"]  # only the new filter's release
        earlier = first["epsilon"]
        assert isinstance(after["epsilon"], float) and isinstance(earlier, float)
        assert after["epsilon"] > earlier
