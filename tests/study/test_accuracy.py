"""client.accuracy: the study's numbers, its two simulation levels and its input checks.

Tolerances are in standard errors: a mean's is sd/sqrt(trials); an sd estimated from `trials`
normal-ish draws has relative standard error 1/sqrt(2 (trials - 1)).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from client.accuracy import (
    DEVICE_LEVEL_MAX_DEVICES,
    GRID_CELLS,
    TARGET_LOCATION,
    Z95,
    StudyRow,
    run_row,
    run_study,
    study_locations,
    total_trials,
)
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy

SP = SamplingPrivacy("1/2")
RR = RandomizedResponse("17/20", "3/10")
NO_LIST = (10_000, 1_000_000, 100_000_000, 1_000_000_000)
#: 4 standard errors of a log-log slope fitted to NO_LIST's sds at 2000 trials.
SLOPE_TOLERANCE = 4 * 0.0158 * math.sqrt(2) / math.log(1e5)


def sd_se(row: StudyRow) -> float:
    """Relative standard error of the row's empirical sd."""
    return 1 / math.sqrt(2 * (row.trials - 1))


def loglog_slope(rows: tuple[StudyRow, ...]) -> float:
    x = np.log([row.no for row in rows])
    y = np.log([row.empirical_sd for row in rows])
    return float(np.polyfit(x, y, 1)[0])


@pytest.fixture(scope="module")
def big_study() -> tuple[tuple[StudyRow, ...], tuple[StudyRow, ...]]:
    """2000 trials per row over five orders of magnitude: sharper than the CLI's 200."""
    result = run_study([SP, RR], yes=100, no_list=NO_LIST, trials=2000, seed=7)
    return result.rows_for(SP), result.rows_for(RR)


def test_sp_error_flat_and_as_predicted(
    big_study: tuple[tuple[StudyRow, ...], tuple[StudyRow, ...]],
) -> None:
    sp_rows, _ = big_study
    for row in sp_rows:
        assert row.predicted_sd == pytest.approx(10.0)
        assert row.sd_ratio is not None
        assert abs(row.sd_ratio - 1) < 4 * sd_se(row)  # +-8.9% at 2000 trials
        assert abs(row.bias) < 4 * row.bias_se
    # Slope of log sd against log No: each log sd has se ~0.0158, so over No = 10^4, 10^6,
    # 10^8, 10^9 the least-squares slope has se ~0.0018 (bounded here by 0.0019). Flat: ~0.
    assert abs(loglog_slope(sp_rows)) < SLOPE_TOLERANCE


def test_rr_error_grows_like_sqrt_n_and_as_predicted(
    big_study: tuple[tuple[StudyRow, ...], tuple[StudyRow, ...]],
) -> None:
    _, rr_rows = big_study
    for row in rr_rows:
        assert row.sd_ratio is not None
        assert abs(row.sd_ratio - 1) < 4 * sd_se(row)
        assert abs(row.bias) < 4 * row.bias_se
    # sqrt(N): slope 1/2 (the 100 Yes devices bend it by < 0.002 at 10^4).
    assert abs(loglog_slope(rr_rows) - 0.5) < SLOPE_TOLERANCE + 0.002
    # Every RR row's error exceeds SP's: with 10^4 No devices already 2.4 times.
    assert rr_rows[0].empirical_sd > 2 * big_study[0][0].empirical_sd


def sp_exact_coverage(yes: int, s: float) -> float:
    """P(the SP 95% interval covers the truth), by enumerating S ~ Bin(yes, s).

    The estimate S/s is discrete and its plug-in standard error sqrt(max(est, 0)(1-s)/s)
    shrinks with it, so the coverage is not exactly 95% (0.938 for 100 Yes devices, s = 1/2).
    """
    covered = 0.0
    for selected in range(yes + 1):
        estimate = selected / s
        se = math.sqrt(estimate * (1 - s) / s)
        if abs(estimate - yes) <= Z95 * se:
            covered += math.comb(yes, selected) * s**selected * (1 - s) ** (yes - selected)
    return covered


def test_row_statistics_are_consistent(
    big_study: tuple[tuple[StudyRow, ...], tuple[StudyRow, ...]],
) -> None:
    for row in (*big_study[0], *big_study[1]):
        # rmse^2 = biased variance + bias^2, exactly.
        n = row.trials
        assert row.rmse**2 == pytest.approx(row.empirical_sd**2 * (n - 1) / n + row.bias**2)
        assert row.mean_abs_error <= row.rmse
        assert row.bias == pytest.approx(row.mean_estimate - row.yes)
        assert row.bias_se == pytest.approx(row.empirical_sd / math.sqrt(n))
        assert row.n_devices == row.yes + row.no
        # Reported standard errors average to about the predicted sd.
        assert row.mean_std_error == pytest.approx(row.predicted_sd, rel=0.1)
        # The 95% intervals cover the truth as often as they should (binomial se ~0.005 at
        # 2000 trials): for SP the exact discrete coverage, for RR (normal) 95%.
        nominal = sp_exact_coverage(row.yes, 0.5) if row.mechanism == "sp" else 0.95
        assert abs(row.coverage_95 - nominal) < 4 * math.sqrt(nominal * (1 - nominal) / n)


def test_device_level_agrees_with_aggregate_level() -> None:
    trials = 200
    for mechanism in (SP, RR):
        aggregate = run_row(mechanism, 100, 10_000, trials, seed=3, level="aggregate")
        device = run_row(mechanism, 100, 10_000, trials, seed=3, level="device")
        assert device.level == "device"
        assert device.predicted_sd == aggregate.predicted_sd
        # Independent draws (the level is part of the row's seed), so they must differ...
        assert device.mean_estimate != aggregate.mean_estimate
        # ...but only by noise: means within 4 se of their difference, sds within 4 se of
        # the log of their ratio.
        diff_se = math.hypot(aggregate.bias_se, device.bias_se)
        assert abs(device.mean_estimate - aggregate.mean_estimate) < 4 * diff_se
        ratio_se = math.sqrt(2) * sd_se(device)
        assert abs(math.log(device.empirical_sd / aggregate.empirical_sd)) < 4 * ratio_se
        for row in (aggregate, device):
            assert row.sd_ratio is not None
            assert abs(row.sd_ratio - 1) < 4 * sd_se(row)


def test_study_locations_put_only_the_yes_devices_at_the_target() -> None:
    rng = np.random.default_rng(0)
    locations = study_locations(37, 200_000, rng)
    assert locations.size == 200_037
    assert np.count_nonzero(locations == TARGET_LOCATION) == 37
    assert int(locations.max()) < GRID_CELLS
    assert np.unique(locations[37:]).size > 199_000  # spread over the grid


def test_rows_are_reproducible_and_independent() -> None:
    a = run_study([SP], 100, [10_000, 10_000], trials=50, seed=11)
    b = run_study([SP], 100, [10_000, 10_000], trials=50, seed=11)
    assert a.to_json_text() == b.to_json_text()
    c = run_study([SP], 100, [10_000], trials=50, seed=12)
    assert c.rows[0] != a.rows[0]
    # A row depends only on the seed and its own identity, not on its neighbours.
    alone = run_study([RR], 100, [1_000_000], trials=50, seed=11)
    mixed = run_study([SP, RR], 100, [10_000, 1_000_000], trials=50, seed=11)
    assert mixed.rows_for(RR)[1] == alone.rows[0]
    # Different parameters are a different row identity, hence different draws.
    other = run_study([SamplingPrivacy("1/4")], 100, [10_000], trials=50, seed=11)
    assert other.rows[0].empirical_sd != a.rows[0].empirical_sd


def test_json_document_shape() -> None:
    result = run_study([SP, RR], 5, [0, 1000], trials=20, seed=1)
    document = json.loads(result.to_json_text())
    assert document["study"] == {
        "yes": 5,
        "no": [0, 1000],
        "trials": 20,
        "seed": 1,
        "level": "aggregate",
        "target_location": TARGET_LOCATION,
        "mechanisms": [
            {
                "mechanism": "sp",
                "params": {"sampling_rate": "1/2"},
                "epsilon": None,
                "delta": 0.0,
                "unbounded": True,
                "privacy": "the two rounds of a device, linked, reveal its cell exactly with "
                "probability 1/2; one round alone is 0.6932-DP",
            },
            {
                "mechanism": "rr",
                "params": {"flip1": "17/20", "flip2": "3/10"},
                "epsilon": pytest.approx(2.9901612285),
                "delta": 0.0,
                "unbounded": False,
                "privacy": "each report is pure 2.991-DP",
            },
        ],
    }
    assert [(r["mechanism"], r["no"]) for r in document["results"]] == [
        ("sp", 0),
        ("sp", 1000),
        ("rr", 0),
        ("rr", 1000),
    ]


def test_unbounded_epsilon_and_zero_yes_stay_valid_json() -> None:
    # s = 1: every Yes device is selected, the estimate is exact (sd 0) and eps is infinite.
    result = run_study([SamplingPrivacy(1), SP], 0, [100], trials=5, seed=1)
    exact, zero = result.rows
    assert exact.epsilon is None and exact.unbounded
    assert exact.empirical_sd == 0 and exact.bias_z == 0.0
    assert zero.mean_estimate == 0 and zero.sd_ratio == 1.0
    json.loads(result.to_json_text())  # no NaN or Infinity tokens


def test_progress_reports_every_trial() -> None:
    seen: list[int] = []
    run_study([SP, RR], 10, [100, 1000], trials=7, seed=1, progress=seen.append)
    assert sum(seen) == total_trials([SP, RR], [100, 1000], 7) == 28


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"yes": -1}, "yes"),
        ({"no_list": [10, -1]}, "no"),
        ({"no_list": []}, "no"),
        ({"trials": 1}, "trials"),
        ({"seed": -1}, "seed"),
        ({"level": "fleet"}, "level"),
        ({"level": "device", "no_list": [DEVICE_LEVEL_MAX_DEVICES]}, "no"),
        ({"mechanisms": []}, "mechanism"),
    ],
)
def test_bad_study_input_is_refused(kwargs: dict[str, object], parameter: str) -> None:
    args: dict[str, object] = {
        "mechanisms": [SP],
        "yes": 100,
        "no_list": [1000],
        "trials": 10,
        "seed": 1,
        "level": "aggregate",
    }
    args.update(kwargs)
    with pytest.raises(ParameterError) as info:
        run_study(**args)  # type: ignore[arg-type]
    assert info.value.parameter == parameter
    assert parameter in str(info.value)
