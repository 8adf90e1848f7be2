"""`ldpcollect privacy convert` and `ldpcollect privacy cost` through the real CLI app."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from fractions import Fraction

import pytest
from typer.testing import CliRunner

from ldpcollect.accounting.ledger import PrivacyLedger
from ldpcollect.accounting.release_cost import (
    release_claims,
    rr_count_level_epsilon,
    sp_noised_epsilon,
)
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect_cli.main import app

runner = CliRunner()


def run_json(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["privacy", *args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


def figure(data: dict[str, object], name: str, key: str = "epsilon") -> object:
    """A figure under `details` (None when the command lists none by that name)."""
    details = data["details"]
    assert isinstance(details, dict)
    return details.get(name, {}).get(key)


def test_convert() -> None:
    data = run_json("convert", "--rho", "0.5", "--delta", "1e-5")
    assert data["epsilon"] == pytest.approx(4.728386984943, rel=1e-11)
    assert figure(data, "bun_steinke") == pytest.approx(5.298525912188, rel=1e-11)
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
    assert data["epsilon"] == pytest.approx(29.9016092528, abs=1e-9)
    assert figure(data, "basic") == pytest.approx(29.9016122850, abs=1e-9)
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
    assert isinstance(two["epsilon"], float) and two["epsilon"] > 50


def test_cost_sp_with_and_without_noise() -> None:
    bare = run_json("cost", "--mechanism", "sp", "--sampling-rate", "0.5", "--delta", "1e-6")
    assert bare["epsilon"] is None and bare["unbounded"] is True
    assert figure(bare, "aggregator", "reveal_probability") == 0.5
    assert figure(bare, "per_round_epsilon") == pytest.approx(0.6931471805599453)
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
    assert noisy["guarantee"] == "zcdp" and figure(noisy, "rho", "rho") == pytest.approx(1 / 32)
    assert isinstance(noisy["epsilon"], float) and 0 < noisy["epsilon"] <= figure(noisy, "zcdp_cks")  # type: ignore[operator]


def test_human_table_and_errors() -> None:
    result = runner.invoke(app, ["privacy", "convert", "--rho", "0.5", "--delta", "1e-5"])
    assert result.exit_code == 0 and "4.72839" in result.stdout
    bad = runner.invoke(app, ["privacy", "cost", "--mechanism", "sp", "--sampling-rate", "2"])
    assert bad.exit_code == 2 and "sampling_rate must be in (0, 1]" in bad.output
    bad = runner.invoke(app, ["privacy", "cost", "--mechanism", "rr", "--flip1", "0.5"])
    assert bad.exit_code == 2 and "flip1/flip2" in bad.output


def test_cost_with_participants_shows_the_count_level_public_view() -> None:
    rr = ("cost", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3", "--targets", "2")
    data = run_json(*rr, "--participants", "20000")
    assert data["epsilon"] == figure(data, "count_level") == pytest.approx(0.15479, abs=1e-5)
    aggregator = figure(data, "aggregator", "epsilon")
    assert aggregator == pytest.approx(5.198, abs=1e-3)
    several = run_json(*rr, "--participants", "20000", "--queries", "10")
    assert several["epsilon"] == figure(several, "count_level") == pytest.approx(0.5297, abs=1e-4)
    assert figure(several, "basic") == pytest.approx(51.98, abs=0.01)  # the local figure
    bad = runner.invoke(app, ["privacy", *rr, "--participants", "0"])
    assert bad.exit_code == 2 and "participants" in bad.output


def test_cost_sp_with_noise_composes_the_exact_pair() -> None:
    data = run_json(
        "cost", "--mechanism", "sp", "--sampling-rate", "1/2", "--noise-sigma", "5",
        "--targets", "2", "--queries", "10",
    )  # fmt: skip
    assert data["epsilon"] == figure(data, "sp_exact_pair") == pytest.approx(1.379, abs=5e-4)
    zcdp = figure(data, "zcdp_cks")
    assert isinstance(zcdp, float) and zcdp > 4.6  # the zCDP figure


def test_plan_sigma_for_sp_before_and_after_the_exact_pair() -> None:
    data = run_json(
        "plan", "--mechanism", "sp", "--sampling-rate", "1/2", "--epsilon", "1", "--targets", "2"
    )
    assert data["sigma"] == data["sigma_sp_exact_pair"] == 2.31
    assert data["sigma_noise_alone"] == 5.98  # what the sensitivity bound alone needed
    half = Fraction(1, 2)
    assert sp_noised_epsilon(half, Fraction("2.31"), 2, 1e-6) <= 1.0
    assert sp_noised_epsilon(half, Fraction("2.30"), 2, 1e-6) > 1.0  # the smallest hundredth


def test_plan_participants_floor_for_rr() -> None:
    data = run_json(
        "plan", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3", "--epsilon", "1.5"
    )
    floor = data["participants"]
    assert isinstance(floor, int)
    rr = RandomizedResponse("0.85", "0.3")
    assert rr_count_level_epsilon(rr, 1, floor, 1e-6) <= 1.5
    assert rr_count_level_epsilon(rr, 1, floor - 1, 1e-6) > 1.5
    bad = runner.invoke(app, ["privacy", "plan", "--mechanism", "sp", "--epsilon", "1"])
    assert bad.exit_code == 2 and "sampling-rate" in bad.output


def test_cost_shows_what_the_odometer_reads_when_queries_are_adaptive() -> None:
    """`eps` composes K queries fixed in advance (PLD); `eps_adaptive` is the ledger's
    odometer after the same K releases, each chosen after seeing the earlier results."""
    data = run_json(
        "cost", "--mechanism", "sp", "--sampling-rate", "1/2", "--noise-sigma", "5",
        "--targets", "2", "--queries", "10",
    )  # fmt: skip
    ledger = PrivacyLedger()
    for i in range(10):
        claims = release_claims(SamplingPrivacy("1/2"), 2, Fraction(5), 1e-6)
        ledger.charge(f"q{i}", claims, datetime(2025, 1, 1, tzinfo=UTC))
    assert data["epsilon"] == pytest.approx(1.379, abs=5e-4)
    assert figure(data, "adaptive") == ledger.odometer()["epsilon"]
    adaptive = figure(data, "adaptive")
    assert isinstance(adaptive, float) and 1.379 < adaptive < 2.3
    weak = run_json("cost", "--mechanism", "sp", "--sampling-rate", "1/2", "--queries", "3")
    assert figure(weak, "adaptive") is None and weak["unbounded"] is True


def test_plan_answers_the_operators_question() -> None:
    """A target epsilon per release -> the noise, the budget to fix first, the error it buys;
    each figure checked again by the accounting the ledger uses."""
    from ldpcollect.accounting.planner import _admits

    data = run_json(
        "plan", "--mechanism", "sp", "--sampling-rate", "1/2", "--epsilon", "1", "--targets",
        "2", "--releases", "3", "--count", "100",
    )  # fmt: skip
    settings = data["settings"]
    assert isinstance(settings, dict)
    assert settings["noise_sigma"] == 2.31 and settings["min_reports"] is None
    assert settings["per_release_epsilon"] <= 1.0
    # The error it buys: sqrt(n (1-s)/s + 2 sigma^2 / s^2) at 100 devices.
    assert settings["std_error"] == pytest.approx(math.sqrt(100 + 8 * 2.31**2))
    budget = settings["budget"]
    claims = release_claims(SamplingPrivacy("1/2"), 2, Fraction("2.31"), 1e-6)
    assert _admits(claims, 3, budget["epsilon"], 1e-6)  # the budget admits the campaign
    assert not _admits(claims, 3, budget["epsilon"] - 0.02, 1e-6)  # and is the smallest
    commands = data["commands"]
    assert isinstance(commands, list)
    assert commands[0].startswith(f"ldpcollect serve --budget {budget['epsilon']:g},1e-06,renyi")
    assert "--noise-sigma 2.31" in commands[1]


def test_plan_for_a_whole_campaign_fits_the_budgets_filter() -> None:
    from ldpcollect.accounting.planner import _admits

    data = run_json(
        "plan", "--mechanism", "sp", "--sampling-rate", "1/2", "--epsilon", "2", "--targets",
        "2", "--releases", "3", "--per", "campaign",
    )  # fmt: skip
    settings = data["settings"]
    assert isinstance(settings, dict) and settings["budget"]["epsilon"] == 2.0
    sigma = Fraction(str(settings["noise_sigma"]))
    fits = release_claims(SamplingPrivacy("1/2"), 2, sigma, 1e-6)
    assert _admits(fits, 3, 2.0, 1e-6)
    tighter = release_claims(SamplingPrivacy("1/2"), 2, sigma - Fraction(1, 100), 1e-6)
    assert not _admits(tighter, 3, 2.0, 1e-6)  # the smallest sigma (in hundredths)
