"""`ldpcollect release --json` and `ldpcollect ledger --json` against a real `ldpcollect serve`
subprocess: claims in both views and conversions, budget, spent, remaining, odometer, refusal."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ldpcollect import geo
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from tests.serving import cli_env, serving

TOKEN = "ledger-cli-token"
HOME = geo.GridScheme().locate(*geo.DEFAULT_CENTER)
TARGETS = ",".join(str(HOME + d) for d in (-1, 0, 1, 2))


def _env() -> dict[str, str]:
    return cli_env(TOKEN)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path / "agg.db", TOKEN) as served:
        yield served.address


def cli(*args: str, server: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ldpcollect_cli.main", *args, "--server", server]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=120)
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def set_budget(server: str, epsilon: float, delta: float) -> None:
    with grpc.insecure_channel(server) as channel:
        pb_grpc.AdminStub(channel).SetBudget(
            pb.SetBudgetRequest(epsilon=epsilon, delta=delta),
            metadata=(("authorization", f"Bearer {TOKEN}"),),
            timeout=30,
        )


def run_sp_query(server: str, query_id: str, sigma: str) -> None:
    cli(
        "query", "create", "--mechanism", "sp", "--sampling-rate", "0.5", "--targets", TARGETS,
        "--id", query_id, "--noise-sigma", sigma, server=server,
    )  # fmt: skip
    cli(
        "fleet", "run", "--query", query_id, "--devices", "200", "--mode", "batch",
        "--advance", "--no-progress", "--json", server=server,
    )  # fmt: skip
    cli("query", "close", "--query", query_id, server=server)


def test_release_and_ledger_json_show_claims_budget_and_odometer(server: str) -> None:
    set_budget(server, 5.0, 1e-6)
    run_sp_query(server, "noisy", "2")
    run_sp_query(server, "again", "2")

    release = json.loads(cli("release", "--query", "noisy", "--json", server=server).stdout)
    claims = {c["view"]: c for c in release["claims"]}
    assert set(claims) == {"public", "aggregator"}
    public = claims["public"]
    assert (public["guarantee"], public["rho"], public["delta"]) == ("zcdp", 0.25, 1e-6)
    # Both conversions: the tight one never exceeds Bun-Steinke's rho + 2 sqrt(rho ln(1/delta)).
    bun_steinke = 0.25 + 2 * math.sqrt(0.25 * math.log(1e6))
    assert public["epsilon_bun_steinke"] == pytest.approx(bun_steinke)
    assert 0 < public["epsilon"] < public["epsilon_bun_steinke"]
    assert claims["aggregator"]["guarantee"] == "approximate"
    assert claims["aggregator"]["reveal_probability"] == 0.5
    assert claims["aggregator"]["epsilon"] is None and claims["aggregator"]["unbounded"] is True
    # One headline: the public's tightest epsilon at the ledger's delta, printed first.
    assert (release["epsilon"], release["delta"]) == (public["epsilon"], 1e-6)
    assert release["unbounded"] is False and release["privacy"]["details"]
    assert all(c["explanation"] for c in claims.values())

    refused = cli("release", "--query", "again", "--json", server=server, ok=False)
    assert refused.returncode == 1
    assert "RESOURCE_EXHAUSTED" in refused.stderr
    for word in ("spent rho 0.25", "requested rho 0.25", "remaining rho"):
        assert word in refused.stderr
    assert "Traceback" not in refused.stderr

    ledger = json.loads(cli("ledger", "--json", server=server).stdout)
    assert ledger["budget"]["epsilon"] == 5.0 and ledger["budget"]["delta"] == 1e-6
    assert ledger["budget"]["mode"] == "zcdp" and ledger["currency"] == "rho"
    budget_rho = ledger["budget"]["rho"]
    assert 0.25 < budget_rho < 0.5
    assert ledger["spent"] == ledger["spent_rho"] == 0.25
    assert ledger["remaining"] == pytest.approx(budget_rho - 0.25)
    assert ledger["remaining_rho"] == pytest.approx(budget_rho - 0.25)
    assert 0 < ledger["spent_epsilon"] < ledger["spent_epsilon_bun_steinke"]
    assert ledger["spent_epsilon_bun_steinke"] == pytest.approx(bun_steinke)
    assert 0 < ledger["remaining_epsilon"] < 5.0
    odometer = ledger["odometer"]
    # The odometer may be the release's own exact figure restated at a smaller delta (basic
    # composition with scheduled deltas), below the CKS reading of the spent rho; it is never
    # below the release's claim.
    (public,) = [c for c in release["claims"] if c["view"] == "public"]
    assert odometer["epsilon"] >= public["epsilon"] and odometer["delta"] == 1e-6
    assert public["headline"] and public["epsilon"] in public["figures"].values()
    assert "inf" not in json.dumps(ledger)  # numbers or null, never spelled out
    assert "tier" in odometer["method"]
    assert ledger["reporting_delta"] == 1e-6
    (entry,) = ledger["entries"]
    assert entry["query_id"] == "noisy" and entry["charged"] == 0.25
    assert entry["claims"] == release["claims"]
    assert [c["releases_before"] for c in ledger["budget_changes"]] == [0]
    assert ledger["notes"]
