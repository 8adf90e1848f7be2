"""`ldpcollect demo --tokens`: an issuer process beside the aggregator, every query (RR at the
trusted aggregator, SP on the leader and helper) requiring tokens, every simulated device
enrolled and counted."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.serving import cli_env


def test_the_demo_with_tokens_counts_every_enrolled_device() -> None:
    command = [sys.executable, "-m", "ldpcollect_cli.main", "demo", "--tokens", "-n", "120"]
    done = subprocess.run(
        [*command, "--json"], env=cli_env("unused"), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    for name in ("rr", "sp", "sp_noise"):
        fleet = out["fleet"][name]
        assert fleet["completed"] == 120
        assert all(r["accepted"] == 120 and r["failed"] == 0 for r in fleet["rounds"])
