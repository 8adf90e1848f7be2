"""Accuracy study: a fixed Yes population at one location while the No population grows.

This reproduces the central claim of the Sampling Privacy paper (seed 001): SP's absolute error
does not depend on the number of No devices, while randomized response's grows like sqrt(N).
Every (mechanism, No population) row runs `trials` independent queries over one target
location and compares the spread of the estimates with the mechanism's predicted sd.

Two simulation levels, so one can cross-check the other:
- "aggregate": exact binomial sampling of the round counts (`mech.sample_aggregate`); its cost
  does not depend on the population, so 10^8 or 10^9 devices are instant.
- "device": every device is randomized over an actual array of locations
  (`mech.fleet_counts`); practical up to `DEVICE_LEVEL_MAX_DEVICES` devices.

Each row draws from its own `numpy.random.SeedSequence`, keyed by the study seed and the row's
identity (mechanism and parameters, Yes and No counts, level), so rows are independent and a
row's numbers do not change when other rows are added to or removed from the study.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism
from ldpcollect.privacy_headline import round_up

Level = Literal["aggregate", "device"]
LEVELS: tuple[Level, ...] = ("aggregate", "device")

#: The paper's example target: the Eiffel Tower is location ID 28 (Figure 1 of seed 001).
TARGET_LOCATION = 28
#: Location IDs of the paper's grid: row * 63334 + col over 63334 x 63334 cells.
GRID_CELLS = 63_334 * 63_334
#: The device level materializes one location per device and randomizes each per trial.
DEVICE_LEVEL_MAX_DEVICES = 10**7
#: Yes and No counts are 64-bit device counts.
MAX_POPULATION = 2**62
#: Trials per row are held in memory (a few floats each).
MAX_TRIALS = 10_000_000
#: Two-sided 95% normal quantile, as in `Estimates`.
Z95 = 1.959963984540054

#: Called after each block of trials with the number of trials just completed.
ProgressFn = Callable[[int], None]


@dataclass(frozen=True)
class StudyRow:
    """Summary of `trials` independent queries for one mechanism and one No population.

    Error measures are about the estimate of the Yes count (`yes`, the truth):
    `empirical_sd` is the sample sd (ddof=1) of the estimates, `predicted_sd` the mechanism's
    formula (docs/design.md, "Mechanisms and estimators"). `bias_se` = empirical_sd /
    sqrt(trials) and `bias_z` = bias / bias_se. `sd_ratio_se` is the approximate relative
    standard error of an sd estimated from `trials` normal draws, 1 / sqrt(2 (trials - 1)), so
    `sd_ratio` should be within a few of those of 1. `coverage_95` is the fraction of trials
    whose plug-in 95% interval (estimate +- 1.96 standard errors) contains the truth; releases
    print exact intervals instead (`ldpcollect.intervals`), too slow to draw for every trial of
    randomized response over a billion devices. `epsilon` (delta 0) is what one device's
    reports for the query reveal to whoever holds them (the trusted aggregator); None with
    `unbounded` when there is no finite bound (Sampling Privacy: the linked rounds show the
    selection), `privacy` says it in words.
    """

    mechanism: str
    params: dict[str, str]
    level: Level
    yes: int
    no: int
    n_devices: int
    trials: int
    mean_estimate: float
    bias: float
    bias_se: float
    bias_z: float | None
    empirical_sd: float
    predicted_sd: float
    sd_ratio: float | None
    sd_ratio_se: float
    mean_abs_error: float
    rmse: float
    mean_std_error: float
    coverage_95: float
    epsilon: float | None
    unbounded: bool
    privacy: str

    def to_json(self) -> dict[str, object]:
        return {
            "mechanism": self.mechanism,
            "params": dict(self.params),
            "level": self.level,
            "yes": self.yes,
            "no": self.no,
            "n_devices": self.n_devices,
            "trials": self.trials,
            "mean_estimate": self.mean_estimate,
            "bias": self.bias,
            "bias_se": self.bias_se,
            "bias_z": self.bias_z,
            "empirical_sd": self.empirical_sd,
            "predicted_sd": self.predicted_sd,
            "sd_ratio": self.sd_ratio,
            "sd_ratio_se": self.sd_ratio_se,
            "mean_abs_error": self.mean_abs_error,
            "rmse": self.rmse,
            "mean_std_error": self.mean_std_error,
            "coverage_95": self.coverage_95,
            "epsilon": self.epsilon,
            "delta": 0.0,
            "unbounded": self.unbounded,
            "privacy": self.privacy,
        }


@dataclass(frozen=True)
class StudyResult:
    """All rows of one study, in the order (mechanism, No population) they were requested."""

    yes: int
    no_list: tuple[int, ...]
    trials: int
    seed: int
    level: Level
    target_location: int
    mechanisms: tuple[Mechanism, ...]
    rows: tuple[StudyRow, ...]

    def rows_for(self, mechanism: Mechanism) -> tuple[StudyRow, ...]:
        return tuple(
            row
            for row in self.rows
            if row.mechanism == mechanism.name and row.params == mechanism.params()
        )

    def summary(self) -> list[dict[str, object]]:
        """Per mechanism: how the error scales with the No population (log-log slopes).

        0 means flat (SP's claim), 1/2 means sqrt(N) (RR); None with fewer than two distinct
        positive No populations.
        """
        out: list[dict[str, object]] = []
        for mechanism in self.mechanisms:
            rows = self.rows_for(mechanism)
            nos = [row.no for row in rows]
            out.append(
                {
                    "mechanism": mechanism.name,
                    "params": mechanism.params(),
                    "sd_slope": loglog_slope(nos, [row.empirical_sd for row in rows]),
                    "predicted_sd_slope": loglog_slope(nos, [row.predicted_sd for row in rows]),
                    "max_abs_bias_z": max(
                        (abs(row.bias_z) for row in rows if row.bias_z is not None),
                        default=None,
                    ),
                }
            )
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "study": {
                "yes": self.yes,
                "no": list(self.no_list),
                "trials": self.trials,
                "seed": self.seed,
                "level": self.level,
                "target_location": self.target_location,
                "mechanisms": [
                    {
                        "mechanism": m.name,
                        "params": m.params(),
                        **local_privacy(m),
                    }
                    for m in self.mechanisms
                ],
            },
            "results": [row.to_json() for row in self.rows],
            "summary": self.summary(),
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, allow_nan=False)


def loglog_slope(no: Sequence[int], error: Sequence[float]) -> float | None:
    """Least-squares slope of log(error) against log(No): 0 is flat, 1/2 is sqrt(N)."""
    points = [(math.log(n), math.log(e)) for n, e in zip(no, error, strict=True) if n > 0 and e > 0]
    if len({x for x, _ in points}) < 2:
        return None
    xs = np.array([x for x, _ in points])
    ys = np.array([y for _, y in points])
    return round(float(np.polyfit(xs, ys, 1)[0]), 6) + 0.0  # + 0.0: no "-0.0"


def local_privacy(mechanism: Mechanism) -> dict[str, object]:
    """What one device's reports for one query reveal to whoever holds them (the trusted
    aggregator), in the names every command uses: `epsilon` (delta 0), `unbounded`, words."""
    one = mechanism.local_epsilon()
    if mechanism.rounds == 2 or not math.isfinite(one):
        rate = mechanism.params().get("sampling_rate", "1")
        words = (
            f"the two rounds of a device, linked, reveal its cell exactly with probability {rate}"
            + (f"; one round alone is {round_up(one, 4)}-DP" if math.isfinite(one) else "")
        )
        return {"epsilon": None, "delta": 0.0, "unbounded": True, "privacy": words}
    return {
        "epsilon": one,
        "delta": 0.0,
        "unbounded": False,
        "privacy": f"each report is pure {round_up(one, 4)}-DP",
    }


def _row_privacy(mechanism: Mechanism) -> dict[str, Any]:
    local = local_privacy(mechanism)
    return {k: local[k] for k in ("epsilon", "unbounded", "privacy")}


def finite_or_none(value: float) -> float | None:
    """JSON has no infinity: an unbounded epsilon or an undefined ratio becomes null."""
    return value if math.isfinite(value) else None


def validate_study(
    yes: int, no_list: Sequence[int], trials: int, seed: int, level: str
) -> tuple[int, ...]:
    """Check the study's inputs; raise ParameterError naming the first bad one."""
    if not 0 <= yes <= MAX_POPULATION:
        raise ParameterError("yes", yes, "[0, 2**62]")
    if len(no_list) == 0:
        raise ParameterError("no", list(no_list), "a non-empty list of counts in [0, 2**62]")
    for no in no_list:
        if not 0 <= no <= MAX_POPULATION - yes:
            raise ParameterError("no", no, "[0, 2**62 - yes]")
    if not 2 <= trials <= MAX_TRIALS:
        detail = "an sd needs at least two trials" if trials < 2 else ""
        raise ParameterError("trials", trials, f"[2, {MAX_TRIALS:,}]", detail)
    if seed < 0:
        raise ParameterError("seed", seed, "[0, inf)")
    if level not in LEVELS:
        raise ParameterError("level", level, "{aggregate, device}")
    if level == "device":
        largest = max(no_list)
        if yes + largest > DEVICE_LEVEL_MAX_DEVICES:
            raise ParameterError(
                "no",
                largest,
                f"[0, {DEVICE_LEVEL_MAX_DEVICES - yes:,}] at level device",
                f"the device level randomizes every device in memory and is practical up to "
                f"{DEVICE_LEVEL_MAX_DEVICES:,} devices (yes + no); use level aggregate "
                f"(exact binomial sampling) for larger populations",
            )
    return tuple(no_list)


def row_seed(
    seed: int, mechanism: Mechanism, yes: int, no: int, level: Level
) -> np.random.SeedSequence:
    """The row's own seed: the study seed spawned by the row's identity."""
    identity = json.dumps([mechanism.name, mechanism.params()], sort_keys=True)
    key = (zlib.crc32(identity.encode()), LEVELS.index(level), yes, no)
    return np.random.SeedSequence(seed, spawn_key=key)


def study_locations(yes: int, no: int, rng: np.random.Generator) -> npt.NDArray[np.uint64]:
    """One location per device: `yes` at the target, `no` spread over the rest of the grid."""
    others = rng.integers(0, GRID_CELLS - 1, size=no, dtype=np.uint64)
    others += others >= TARGET_LOCATION  # skip the target cell
    at_target = np.full(yes, TARGET_LOCATION, dtype=np.uint64)
    return np.concatenate([at_target, others])


def run_row(
    mechanism: Mechanism,
    yes: int,
    no: int,
    trials: int,
    seed: int,
    level: Level = "aggregate",
    progress: ProgressFn | None = None,
) -> StudyRow:
    """Run `trials` queries for one mechanism and one No population and summarize them."""
    rng = np.random.default_rng(row_seed(seed, mechanism, yes, no, level))
    n_devices = yes + no
    targets = np.array([TARGET_LOCATION], dtype=np.uint64)
    true_counts = np.array([yes], dtype=np.int64)
    locations = study_locations(yes, no, rng) if level == "device" else None
    estimates = np.empty(trials)
    std_errors = np.empty(trials)
    covered = np.empty(trials, dtype=bool)
    for trial in range(trials):
        if locations is None:
            counts = mechanism.sample_aggregate(true_counts, n_devices, rng)
        else:
            counts = mechanism.fleet_counts(locations, targets, rng)
        est = mechanism.estimate(counts, n_devices)
        estimates[trial] = est.estimate[0]
        std_errors[trial] = est.std_error[0]
        covered[trial] = est.ci_low[0] <= yes <= est.ci_high[0]
        if progress is not None:
            progress(1)
    return summarize(mechanism, level, yes, no, estimates, std_errors, covered)


def summarize(
    mechanism: Mechanism,
    level: Level,
    yes: int,
    no: int,
    estimates: npt.NDArray[np.float64],
    std_errors: npt.NDArray[np.float64],
    covered: npt.NDArray[np.bool_],
) -> StudyRow:
    trials = len(estimates)
    errors = estimates - yes
    mean = float(np.mean(estimates))
    bias = mean - yes
    sd = float(np.std(estimates, ddof=1))
    bias_se = sd / math.sqrt(trials)
    if bias_se > 0:
        bias_z: float | None = bias / bias_se
    else:
        bias_z = 0.0 if bias == 0 else None
    predicted = mechanism.predicted_sd(yes, yes + no)
    if predicted > 0:
        sd_ratio: float | None = sd / predicted
    else:
        sd_ratio = 1.0 if sd == 0 else None
    return StudyRow(
        mechanism=mechanism.name,
        params=mechanism.params(),
        level=level,
        yes=yes,
        no=no,
        n_devices=yes + no,
        trials=trials,
        mean_estimate=mean,
        bias=bias,
        bias_se=bias_se,
        bias_z=bias_z,
        empirical_sd=sd,
        predicted_sd=float(predicted),
        sd_ratio=sd_ratio,
        sd_ratio_se=1.0 / math.sqrt(2 * (trials - 1)),
        mean_abs_error=float(np.mean(np.abs(errors))),
        rmse=float(math.sqrt(np.mean(errors**2))),
        mean_std_error=float(np.mean(std_errors)),
        coverage_95=float(np.mean(covered)),
        **_row_privacy(mechanism),
    )


def run_study(
    mechanisms: Sequence[Mechanism],
    yes: int,
    no_list: Sequence[int],
    trials: int,
    seed: int,
    level: Level = "aggregate",
    progress: ProgressFn | None = None,
) -> StudyResult:
    """One row per (mechanism, No population), in that order. Raises ParameterError."""
    if len(mechanisms) == 0:
        raise ParameterError("mechanism", [], "at least one of {sp, rr}")
    no_tuple = validate_study(yes, no_list, trials, seed, level)
    rows = tuple(
        run_row(mechanism, yes, no, trials, seed, level, progress)
        for mechanism in mechanisms
        for no in no_tuple
    )
    return StudyResult(
        yes=yes,
        no_list=no_tuple,
        trials=trials,
        seed=seed,
        level=level,
        target_location=TARGET_LOCATION,
        mechanisms=tuple(mechanisms),
        rows=rows,
    )


def total_trials(mechanisms: Sequence[Mechanism], no_list: Sequence[int], trials: int) -> int:
    """Progress total for `run_study`: one step per simulated query."""
    return len(mechanisms) * len(no_list) * trials
