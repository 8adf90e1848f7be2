"""`ldpcollect demo` with post-processing and maps: RR at a trusted aggregator, both SP
queries on a leader and a helper; the effect on error is reported against the truth, and every
release gets a PNG and an HTML map."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.serving import cli_env


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ldpcollect_cli.main", "demo", "--devices", "3000", *args]
    return subprocess.run(
        command, env=cli_env("unused"), capture_output=True, text=True, timeout=300
    )


def test_demo_reports_post_processed_error_and_draws_maps(tmp_path: Path) -> None:
    done = demo("--postprocess", "norm-sub", "--maps", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    # RR at a trusted aggregator under its budget, both SP queries on two aggregators.
    assert set(out["errors"]) == {"rr", "sp", "sp_noise"} and out["refused"] == {}
    for name in ("rr", "sp", "sp_noise"):
        errors = out["errors"][name]
        assert errors["rmse"] == out["rmse"][name]
        assert errors["rmse_norm-sub"] >= 0 and errors["mae_norm-sub"] >= 0
    # SP ran on two aggregators: its releases state the three views of secure mode.
    for name in ("sp", "sp_noise"):
        views = {c["view"] for c in out["releases"][name]["claims"]}
        assert views == {"aggregator", "collector+aggregator", "public"}
        assert out["fleet"][name]["rounds"][0]["accepted"] == 3000
    assert {c["view"] for c in out["releases"]["rr"]["claims"]} == {"public", "aggregator"}
    # Norm-Sub projects onto non-negative vectors with the released total; the truth is
    # non-negative, so for RR's noisy near-zero cells it helps (with the demo's fixed seed).
    assert out["errors"]["rr"]["rmse_norm-sub"] <= out["errors"]["rr"]["rmse"]
    drawn = sorted(p.name for p in tmp_path.iterdir())
    queries = ("demo-rr", "demo-sp", "demo-sp-noise")
    assert drawn == sorted(f"{q}.{ext}" for q in queries for ext in ("html", "png"))
    assert all((tmp_path / name).stat().st_size > 1000 for name in drawn)


def test_demo_refuses_an_unknown_post_processing() -> None:
    done = demo("--postprocess", "round")
    assert done.returncode == 2
    assert "--postprocess must be clip or norm-sub" in done.stderr
