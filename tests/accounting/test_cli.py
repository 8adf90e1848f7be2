"""`ldpcollect privacy convert` and `ldpcollect privacy cost` through the real CLI app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ldpcollect_cli.main import app

runner = CliRunner()


def run_json(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["privacy", *args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_convert() -> None:
    data = run_json("convert", "--rho", "0.5", "--delta", "1e-5")
    assert data["eps_cks"] == pytest.approx(4.728386984943, rel=1e-11)
    assert data["eps_bun_steinke"] == pytest.approx(5.298525912188, rel=1e-11)
    inverse = run_json("convert", "--epsilon", "1", "--delta", "1e-6")
    assert inverse["rho"] == pytest.approx(0.0243559704, abs=5e-11)


def test_cost_rr_reference() -> None:
    data = run_json(
        "cost",
        "--mechanism",
        "rr",
        "--flip1",
        "0.85",
        "--flip2",
        "0.3",
        "--queries",
        "10",
        "--delta",
        "1e-6",
    )
    assert data["eps"] == pytest.approx(29.9016092528, abs=1e-9)
    assert data["eps_basic"] == pytest.approx(29.9016122850, abs=1e-9)
    two = run_json(
        "cost",
        "--mechanism",
        "rr",
        "--flip1",
        "0.85",
        "--flip2",
        "0.3",
        "--queries",
        "10",
        "--delta",
        "1e-6",
        "--targets",
        "2",
    )
    assert isinstance(two["eps"], float) and two["eps"] > 50


def test_cost_sp_with_and_without_noise() -> None:
    bare = run_json("cost", "--mechanism", "sp", "--sampling-rate", "0.5", "--delta", "1e-6")
    assert bare["eps"] is None and bare["approx_delta"] == 0.5
    assert bare["per_round_epsilon"] == pytest.approx(0.6931471805599453)
    noisy = run_json(
        "cost",
        "--mechanism",
        "sp",
        "--sampling-rate",
        "0.5",
        "--delta",
        "1e-6",
        "--noise-sigma",
        "4",
    )
    assert noisy["guarantee"] == "zcdp" and noisy["rho"] == pytest.approx(1 / 32)
    assert isinstance(noisy["eps"], float) and 0 < noisy["eps"] <= noisy["eps_cks"]  # type: ignore[operator]


def test_human_table_and_errors() -> None:
    result = runner.invoke(app, ["privacy", "convert", "--rho", "0.5", "--delta", "1e-5"])
    assert result.exit_code == 0 and "4.72839" in result.stdout
    bad = runner.invoke(app, ["privacy", "cost", "--mechanism", "sp", "--sampling-rate", "2"])
    assert bad.exit_code == 2 and "sampling_rate must be in (0, 1]" in bad.output
    bad = runner.invoke(app, ["privacy", "cost", "--mechanism", "rr", "--flip1", "0.5"])
    assert bad.exit_code == 2 and "flip1/flip2" in bad.output
