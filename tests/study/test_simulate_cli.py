"""The `ldpcollect simulate` command: the issue's two commands, JSON, table, plot, bad input.

Statistical tolerances are stated in standard errors: an sd estimated from `trials` draws has
relative standard error ~ 1/sqrt(2 (trials - 1)) (0.050 for 200 trials); a mean has standard
error sd/sqrt(trials).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.study.conftest import RunCli

SP_COMMAND = [
    "simulate",
    "--mechanism",
    "sp",
    "--sampling-rate",
    "0.5",
    "--yes",
    "100",
    "--no",
    "10000,1000000,100000000",
    "--trials",
    "200",
    "--seed",
    "1",
    "--json",
]
RR_COMMAND = [
    "simulate",
    "--mechanism",
    "rr",
    "--flip1",
    "0.85",
    "--flip2",
    "0.3",
    "--yes",
    "100",
    "--no",
    "10000,1000000,100000000",
    "--trials",
    "200",
    "--seed",
    "1",
    "--json",
]
NO_LIST = [10_000, 1_000_000, 100_000_000]
REQUIRED = {
    "mechanism",
    "yes",
    "no",
    "trials",
    "mean_estimate",
    "empirical_sd",
    "predicted_sd",
    "epsilon",
    "delta",
    "unbounded",
}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def results_of(run_cli: RunCli, args: list[str]) -> list[dict[str, object]]:
    result = run_cli(args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # stdout is pure JSON: progress and notes go to stderr
    rows = document["results"]
    assert isinstance(rows, list)
    return rows


def number(row: dict[str, object], key: str) -> float:
    value = row[key]
    assert isinstance(value, int | float), (key, value)
    return float(value)


def test_sp_command_json_schema_and_flat_error(run_cli: RunCli) -> None:
    rows = results_of(run_cli, SP_COMMAND)
    assert [row["no"] for row in rows] == NO_LIST
    for row in rows:
        assert row.keys() >= REQUIRED
        assert (row["mechanism"], row["yes"], row["trials"]) == ("sp", 100, 200)
        assert row["params"] == {"sampling_rate": "1/2"}
        # Both rounds, linked, reveal the selection: no finite epsilon, said in words.
        assert row["epsilon"] is None and row["unbounded"] is True
        assert "probability 1/2" in str(row["privacy"])
        # SP's predicted sd is sqrt(n_t (1-s)/s) = 10 for every No population...
        assert number(row, "predicted_sd") == pytest.approx(10.0, rel=1e-12)
        # ...and the simulated sd matches it at each one (4 standard errors of an sd).
        sd_se = number(row, "predicted_sd") / math.sqrt(2 * (200 - 1))
        assert abs(number(row, "empirical_sd") - number(row, "predicted_sd")) < 4 * sd_se
        # Unbiased: within 4 standard errors of the truth.
        mean_se = number(row, "empirical_sd") / math.sqrt(200)
        assert abs(number(row, "mean_estimate") - 100) < 4 * mean_se
    # Flat across four orders of magnitude: largest / smallest sd within what two independent
    # sd estimates allow (relative se of a ratio of two sds: sqrt(2) * 0.050).
    sds = [number(row, "empirical_sd") for row in rows]
    assert abs(math.log(max(sds) / min(sds))) < 4 * math.sqrt(2) / math.sqrt(2 * 199)


def test_rr_command_error_grows_like_sqrt_n(run_cli: RunCli) -> None:
    rows = results_of(run_cli, RR_COMMAND)
    assert [row["no"] for row in rows] == NO_LIST
    p, q = 0.85, 0.3
    a1, a0 = p + (1 - p) * q, (1 - p) * q
    for row in rows:
        assert row.keys() >= REQUIRED
        assert row["mechanism"] == "rr"
        assert row["params"] == {"flip1": "17/20", "flip2": "3/10"}
        assert number(row, "epsilon") == pytest.approx(2.9901612285, abs=1e-9)
        assert row["unbounded"] is False
        no = int(number(row, "no"))
        formula = math.sqrt((100 * a1 * (1 - a1) + no * a0 * (1 - a0)) / p**2)
        assert number(row, "predicted_sd") == pytest.approx(formula, rel=1e-9)
        sd_se = number(row, "predicted_sd") / math.sqrt(2 * 199)
        assert abs(number(row, "empirical_sd") - number(row, "predicted_sd")) < 4 * sd_se
        mean_se = number(row, "empirical_sd") / math.sqrt(200)
        assert abs(number(row, "mean_estimate") - 100) < 4 * mean_se
    # sd(10^6) / sd(10^4) close to sqrt(N(10^6) / N(10^4)) ~ 9.95 (relative se of the ratio
    # of two independent sds: sqrt(2) * 0.050; 4 of them).
    ratio = number(rows[1], "empirical_sd") / number(rows[0], "empirical_sd")
    expected = math.sqrt((1_000_000 + 100) / (10_000 + 100))
    assert abs(math.log(ratio / expected)) < 4 * math.sqrt(2) / math.sqrt(2 * 199)
    # And it keeps growing: 10^8 is about 100 times 10^4, far from SP's flat line.
    ratio_8 = number(rows[2], "empirical_sd") / number(rows[0], "empirical_sd")
    assert abs(math.log(ratio_8 / math.sqrt((10**8 + 100) / (10**4 + 100)))) < 0.3


def test_same_seed_same_json_other_seed_differs(run_cli: RunCli) -> None:
    first = run_cli(SP_COMMAND)
    again = run_cli(SP_COMMAND)
    assert first.exit_code == again.exit_code == 0
    assert first.stdout == again.stdout
    other = run_cli([*SP_COMMAND[:-3], "--seed", "2", "--json"])
    assert other.exit_code == 0
    assert json.loads(other.stdout)["results"] != json.loads(first.stdout)["results"]


def test_both_mechanisms_in_one_run_match_separate_runs(run_cli: RunCli) -> None:
    both = results_of(run_cli, [*RR_COMMAND[:2], "sp", *RR_COMMAND[1:]])
    assert [(row["mechanism"], row["no"]) for row in both] == [
        *(("sp", no) for no in NO_LIST),
        *(("rr", no) for no in NO_LIST),
    ]
    # Rows are seeded by their identity, so a row does not depend on what else ran.
    assert both[:3] == results_of(run_cli, SP_COMMAND)
    assert both[3:] == results_of(run_cli, RR_COMMAND)


def test_summary_slopes_flat_for_sp_sqrt_for_rr(run_cli: RunCli) -> None:
    result = run_cli([*RR_COMMAND[:2], "sp", *RR_COMMAND[1:]])
    assert result.exit_code == 0, result.output
    summary = {item["mechanism"]: item for item in json.loads(result.stdout)["summary"]}
    # Log sd has se 0.050 at 200 trials; a slope fitted over No = 10^4, 10^6, 10^8 then has
    # se 0.050 / sqrt(8 ln(10)^2) = 0.0077; 4 of them is 0.031.
    tolerance = 4 * 0.050 / math.sqrt(8 * math.log(10) ** 2)
    assert abs(summary["sp"]["sd_slope"]) < tolerance
    assert summary["sp"]["predicted_sd_slope"] == 0
    assert abs(summary["rr"]["sd_slope"] - 0.5) < tolerance + 0.002
    assert abs(summary["rr"]["predicted_sd_slope"] - 0.5) < 0.002
    assert summary["sp"]["max_abs_bias_z"] < 4
    assert summary["rr"]["max_abs_bias_z"] < 4


def test_table_plot_and_json_out(run_cli: RunCli, tmp_path: Path) -> None:
    plot = tmp_path / "error.png"
    json_out = tmp_path / "study.json"
    result = run_cli(
        [
            "simulate",
            "--mechanism",
            "both",
            "--no",
            "10000,1000000,100000000",
            "--plot",
            str(plot),
            "--json-out",
            str(json_out),
        ]
    )
    assert result.exit_code == 0, result.output
    table = result.stdout
    for text in ("No devices", "emp. sd", "pred. sd", "100,000,000", "SP: error grows like No^"):
        assert text in table
    with pytest.raises(json.JSONDecodeError):
        json.loads(table)
    data = plot.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 20_000  # a drawn chart, not an empty canvas
    document = json.loads(json_out.read_text())
    assert len(document["results"]) == 6
    assert document["study"]["seed"] == 1


def test_single_mechanism_plot_is_drawn(run_cli: RunCli, tmp_path: Path) -> None:
    plot = tmp_path / "sp.png"
    result = run_cli(["simulate", "-m", "sp", "--no", "1000,100000", "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert plot.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize(
    ("args", "option", "allowed"),
    [
        (["--trials", "1"], "--trials", "[2, 10,000,000]"),
        (["--trials", "100000000"], "--trials", "[2, 10,000,000]"),
        (["--no", "10**100000"], "--no", "exponent in [0, 64]"),
        (["--yes", "-1"], "--yes", "[0, 2**62]"),
        (["--no", "10,-5"], "--no", "[0, 2**62 - yes]"),
        (["--no", "ten"], "--no", "whole numbers"),
        (["--no", "1.5"], "--no", "whole numbers"),
        (["--flip1", "1.5"], "--flip1", "(0, 1]"),
        (["--flip1", "0"], "--flip1", "(0, 1]"),
        (["--flip2", "-0.1"], "--flip2", "[0, 1]"),
        (["--sampling-rate", "0"], "--sampling-rate", "(0, 1]"),
        (["--sampling-rate", "2"], "--sampling-rate", "(0, 1]"),
        (["--mechanism", "laplace"], "--mechanism", "sp, rr, both"),
        (["--level", "fleet"], "--level", "aggregate, device"),
        (["--seed", "-3"], "--seed", "[0, inf)"),
        (["--level", "device", "--no", "100000000"], "--no", "at level device"),
    ],
)
def test_bad_input_exits_2_naming_the_option(
    run_cli: RunCli, tmp_path: Path, args: list[str], option: str, allowed: str
) -> None:
    plot = tmp_path / "never.png"
    result = run_cli(["simulate", *args, "--plot", str(plot)])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.replace("│", " ").split())
    assert option in message
    assert allowed in message
    assert "Traceback" not in result.output
    assert not plot.exists()


def test_missing_plot_directory_is_refused_before_running(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli(["simulate", "--plot", str(tmp_path / "no" / "such" / "dir.png")])
    assert result.exit_code == 2
    assert "--plot" in result.output
