"""`query create --require-tokens` then `fleet run --issuer`: the CLI end to end, real
processes (issuer, aggregator, CLI), with the issuer's quota limiting a second run."""

from __future__ import annotations

import json
from pathlib import Path

from ldpcollect import geo
from tests.admission.issuer_process import issuing
from tests.serving import run_cli, serving

TOKEN = "admin-secret"
HOME = geo.GridScheme().locate(*geo.DEFAULT_CENTER)
TARGETS = ",".join(str(HOME + d) for d in (-1, 0, 1))


def test_a_fleet_enrolled_at_the_issuer_answers_a_token_query_within_its_quota(
    tmp_path: Path,
) -> None:
    state = tmp_path / "issuer"
    with issuing(state, tokens_per_epoch=2) as issuer:
        directory = ("--token-directory", str(issuer.directory))
        with serving(tmp_path / "agg.db", TOKEN, *directory) as served:

            def cli(*args: str, ok: bool = True) -> str:
                return run_cli(TOKEN, *args, server=served.address, ok=ok).stdout

            cli("query", "create", "--mechanism", "sp", "--sampling-rate", "1/2",
                "--targets", TARGETS, "--id", "sp-tokens", "--require-tokens")  # fmt: skip
            fleet = ["fleet", "run", "--query", "sp-tokens", "-n", "40", "--seed", "3",
                     "--no-progress", "--json", "--issuer", issuer.address,
                     "--enrollment-key", str(state / "enrollment.key")]  # fmt: skip
            # Without the issuer the fleet cannot answer at all.
            refused = run_cli(TOKEN, *fleet[:9], server=served.address, ok=False)
            assert "requires admission tokens" in refused.stderr
            result = json.loads(cli(*fleet, "--advance"))
            assert [r["accepted"] for r in result["rounds"]] == [40, 40]
            assert result["completed"] == 40
            # Each simulated device spent its K = 2 tokens: the same devices get none for a
            # second query in this epoch, and send nothing.
            cli("query", "create", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3",
                "--targets", TARGETS, "--id", "rr-tokens", "--require-tokens")  # fmt: skip
            rr_fleet = [a if a != "sp-tokens" else "rr-tokens" for a in fleet]
            again = json.loads(cli(*rr_fleet))
            [round1] = again["rounds"]
            assert round1["accepted"] == 0 and round1["failed"] == 40
            assert any("RESOURCE_EXHAUSTED" in f["code"] for f in round1["failures"]), round1
            # Other devices (another prefix) still can.
            other = json.loads(cli(*rr_fleet, "--device-prefix", "other"))
            assert other["rounds"][0]["accepted"] == 40
            shown = json.loads(cli("query", "show", "--query", "rr-tokens", "--json"))
            assert shown["reports_per_round"] == [40] and shown["require_tokens"] is True
