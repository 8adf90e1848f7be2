"""Command: `ldpcollect simulate`, the accuracy study of SP against RR as the No population grows.

The numbers come from `client.accuracy`; this module parses and validates options, shows
progress on stderr (so `--json` stdout stays clean JSON), prints the table and draws the chart.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from client.accuracy import (
    LEVELS,
    Z95,
    Level,
    StudyResult,
    local_privacy,
    loglog_slope,
    run_study,
    total_trials,
)
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

MECHANISM_CHOICES = ("sp", "rr", "both")
#: Mechanism parameter name -> the option a user typed.
OPTION_OF_PARAMETER = {
    "sampling_rate": "--sampling-rate",
    "flip1": "--flip1",
    "flip2": "--flip2",
    "yes": "--yes",
    "no": "--no",
    "trials": "--trials",
    "seed": "--seed",
    "level": "--level",
    "mechanism": "--mechanism",
}
#: Show a progress bar only when the study is big enough to take a noticeable time.
PROGRESS_MIN_TRIALS = 2_000
#: Width of the table when stdout is not a terminal (a pipe or a file).
TABLE_WIDTH = 120
#: Mean absolute error of a normal estimate per unit sd: sqrt(2/pi).
MAE_PER_SD = math.sqrt(2 / math.pi)
STYLE = {"sp": ("tab:blue", "o"), "rr": ("tab:red", "s")}


def bad(parameter: str, message: str) -> typer.BadParameter:
    return typer.BadParameter(
        message, param_hint=f"'{OPTION_OF_PARAMETER.get(parameter, parameter)}'"
    )


def parse_count(text: str) -> int:
    """An integer count: "10000", "10_000", "1e6" or "10**8"."""
    text = text.strip().replace("_", "").replace("^", "**")
    if "**" in text:
        base, _, exponent = text.partition("**")
        power = int(exponent)
        if not 0 <= power <= 64:  # counts stop at 2**62: no need to build giant integers
            raise ValueError(f"{text!r} needs an exponent in [0, 64]")
        result: int = int(base) ** power
        return result
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)  # "1e6"
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        if not value.is_integer():
            raise ValueError(f"{text!r} is not a whole number") from None
        return int(value)


def parse_no_list(text: str) -> list[int]:
    try:
        counts = [parse_count(part) for part in text.split(",") if part.strip()]
    except (ValueError, OverflowError) as exc:
        raise bad(
            "no", f"expected comma-separated whole numbers >= 0, got {text!r} ({exc})"
        ) from None
    if not counts:
        raise bad("no", f"expected at least one count, got {text!r}")
    return counts


def build_mechanisms(
    requested: list[str], sampling_rate: str, flip1: str, flip2: str
) -> list[Mechanism]:
    """The requested mechanisms in order, without repeats. All probabilities are checked."""
    names: list[str] = []
    for choice in requested:
        choice = choice.strip().lower()
        if choice not in MECHANISM_CHOICES:
            raise bad("mechanism", f"must be one of sp, rr, both; got {choice!r}")
        for name in ("sp", "rr") if choice == "both" else (choice,):
            if name not in names:
                names.append(name)
    try:
        sp = SamplingPrivacy(sampling_rate)
        rr = RandomizedResponse(flip1, flip2)
    except ParameterError as exc:
        raise bad(exc.parameter, str(exc)) from None
    except (ValueError, TypeError, ZeroDivisionError) as exc:
        raise typer.BadParameter(str(exc)) from None
    by_name: dict[str, Mechanism] = {"sp": sp, "rr": rr}
    return [by_name[name] for name in names]


def run_with_progress(
    mechanisms: list[Mechanism], yes: int, no_list: list[int], trials: int, seed: int, level: Level
) -> StudyResult:
    err = Console(stderr=True)
    total = total_trials(mechanisms, no_list, trials)
    if not err.is_terminal or (total < PROGRESS_MIN_TRIALS and level == "aggregate"):
        return run_study(mechanisms, yes, no_list, trials, seed, level)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("queries"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("simulate", total=total)
        return run_study(
            mechanisms,
            yes,
            no_list,
            trials,
            seed,
            level,
            progress=lambda done: progress.advance(task, done),
        )


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def study_table(result: StudyResult) -> Table:
    ratio_se = result.rows[0].sd_ratio_se if result.rows else math.nan
    mechanisms = "; ".join(mechanism_label(m) for m in result.mechanisms)
    table = Table(
        title=(
            f"{result.yes:,} Yes devices at location {result.target_location}, growing No "
            f"population: {result.trials} trials per row, seed {result.seed}, "
            f"{result.level} level"
        ),
        caption=(
            f"{mechanisms}\n"
            f"ratio = empirical sd / predicted sd (se of the ratio {ratio_se:.3f}); "
            "bias z = bias / (sd / sqrt(trials)); "
            "MAE = mean absolute error; cover95 = share of plug-in 95% intervals (estimate "
            "+- 1.96 standard errors) holding the truth (releases print exact intervals, which "
            "hold at least 95%: docs/privacy.md)"
        ),
    )
    headers = (
        "mech.",
        "No devices",
        "mean est.",
        "bias z",
        "emp. sd",
        "pred. sd",
        "ratio",
        "MAE",
        "RMSE",
        "cover95",
    )
    for header in headers:
        table.add_column(header, justify="left" if header == "mech." else "right")
    for row in result.rows:
        table.add_row(
            row.mechanism,
            f"{row.no:,}",
            fmt(row.mean_estimate),
            fmt(row.bias_z),
            fmt(row.empirical_sd),
            fmt(row.predicted_sd),
            fmt(row.sd_ratio, 3),
            fmt(row.mean_abs_error),
            fmt(row.rmse),
            fmt(row.coverage_95, 3),
        )
    return table


def scaling_summary(result: StudyResult) -> str:
    """One line per mechanism: how its error scales with the No population."""
    lines = []
    for item in result.summary():
        slope, predicted = item["sd_slope"], item["predicted_sd_slope"]
        if not isinstance(slope, float) or not isinstance(predicted, float):
            continue
        lines.append(
            f"{str(item['mechanism']).upper()}: error grows like No^{round(slope, 3) + 0.0:.3f} "
            f"(predicted No^{round(predicted, 3) + 0.0:.3f}; 0 = flat, 0.5 = sqrt(N))"
        )
    return "\n".join(lines)


def mechanism_label(mechanism: Mechanism) -> str:
    params = ", ".join(f"{k}={v}" for k, v in mechanism.params().items())
    local = local_privacy(mechanism)
    eps = local["epsilon"]
    # Rounded up: a printed privacy figure is never below the true one (2.990 -> 2.991).
    eps_text = (
        f"epsilon {math.ceil(eps * 1000) / 1000:.3f} per report"
        if isinstance(eps, float)
        else f"NO finite epsilon: {local['privacy']}"
    )
    return f"{mechanism.name.upper()} ({params}; {eps_text})"


def plot_study(result: StudyResult, path: Path) -> None:
    """Absolute error of the estimate against the No population, log-log, one series each.

    Lines are the predicted sd (solid) and the mean absolute error it implies for a normal
    estimate, sqrt(2/pi) sd (dashed); markers are the simulation's empirical sd (with a 95%
    band for an sd estimated from `trials` draws) and its mean absolute error.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 5.5), dpi=120)
    positive = [no for no in result.no_list if no > 0] or [1]
    grid = np.unique(np.geomspace(min(positive) / 2, max(positive) * 2, 200).round()).astype(int)
    handles = []
    plotted: list[float] = []
    for mechanism in result.mechanisms:
        rows = result.rows_for(mechanism)
        color, marker = STYLE.get(mechanism.name, ("tab:gray", "^"))
        name = mechanism.name.upper()
        predicted = np.array([mechanism.predicted_sd(result.yes, result.yes + n) for n in grid])
        nos = [row.no for row in rows]
        sds = np.array([row.empirical_sd for row in rows])
        band = Z95 * sds * np.array([row.sd_ratio_se for row in rows])
        slope = loglog_slope(nos, [float(sd) for sd in sds])
        slope_text = "" if slope is None else f", log-log slope {round(slope, 2) + 0.0:.2f}"
        (line,) = ax.plot(grid, predicted, color=color, lw=1.6)
        (mae_line,) = ax.plot(grid, MAE_PER_SD * predicted, color=color, lw=1.0, ls="--")
        points = ax.errorbar(nos, sds, yerr=band, fmt=marker, color=color, ms=7, capsize=3)
        (mae_points,) = ax.plot(
            nos, [row.mean_abs_error for row in rows], marker, mfc="none", color=color, ms=10
        )
        line.set_label(f"{mechanism_label(mechanism)}: predicted sd")
        mae_line.set_label(f"{name}: predicted mean abs. error (0.80 sd)")
        points.set_label(f"{name}: empirical sd, 95% band{slope_text}")
        mae_points.set_label(f"{name}: empirical mean absolute error")
        handles.extend([line, points, mae_line, mae_points])
        plotted.extend([*predicted, *(sds + band), *(row.mean_abs_error for row in rows)])
    ax.set_xscale("log")
    # Errors spanning orders of magnitude (RR) need a log y axis; a flat error alone (SP) reads
    # honestly only on a linear axis from 0, where sampling noise does not look like a trend.
    finite = [y for y in plotted if y > 0 and math.isfinite(y)]
    log_y = bool(finite) and max(finite) / min(finite) > 20
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, 1.25 * max(finite, default=1.0))
    ax.set_xlabel("No population (devices not at the target location, log scale)")
    ax.set_ylabel(
        "absolute error of the Yes-count estimate (devices" + (", log scale)" if log_y else ")")
    )
    ax.set_title(
        f"Absolute error as the No population grows: {result.yes:,} Yes devices at one "
        f"location,\n{result.trials} trials per point, {result.level}-level simulation, "
        f"seed {result.seed}",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.12)
    ax.legend(handles=handles, fontsize=7.5, loc="upper left", framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def register(app: typer.Typer) -> None:
    """Add the `simulate` command to the top-level app."""

    @app.command()
    def simulate(
        mechanism: Annotated[
            list[str] | None,
            typer.Option(
                "--mechanism",
                "-m",
                help="sp, rr or both; may be repeated. Default: both.",
            ),
        ] = None,
        sampling_rate: Annotated[
            str, typer.Option(help="SP sampling rate s in (0, 1], e.g. 0.5 or 1/2.")
        ] = "0.5",
        flip1: Annotated[
            str, typer.Option(help="RR truthful-answer probability p in (0, 1].")
        ] = "0.85",
        flip2: Annotated[str, typer.Option(help="RR say-Yes probability q in [0, 1].")] = "0.3",
        yes: Annotated[int, typer.Option(help="Devices at the target location (>= 0).")] = 100,
        no: Annotated[
            str,
            typer.Option(help="Comma-separated No populations, e.g. 10000,1e6,10**8."),
        ] = "10000,1000000,100000000",
        trials: Annotated[int, typer.Option(help="Queries simulated per row (>= 2).")] = 200,
        seed: Annotated[int, typer.Option(help="Seed of the study (>= 0).")] = 1,
        level: Annotated[
            str,
            typer.Option(
                help="aggregate: exact binomial sampling (any size); device: every device "
                "randomized (up to 10^7 devices)."
            ),
        ] = "aggregate",
        json_output: Annotated[
            bool, typer.Option("--json", help="Print the results as JSON on stdout.")
        ] = False,
        json_out: Annotated[
            Path | None, typer.Option(help="Also write the JSON results to this file.")
        ] = None,
        plot: Annotated[
            Path | None, typer.Option(help="Draw absolute error against No population (PNG).")
        ] = None,
    ) -> None:
        """Accuracy study: fixed Yes population at one location, growing No population."""
        mechanisms = build_mechanisms(mechanism or ["both"], sampling_rate, flip1, flip2)
        no_list = parse_no_list(no)
        if level not in LEVELS:
            raise bad("level", f"must be one of {', '.join(LEVELS)}; got {level!r}")
        study_level: Level = "device" if level == "device" else "aggregate"
        for option, target in (("--json-out", json_out), ("--plot", plot)):
            if target is not None and not target.resolve().parent.is_dir():
                raise typer.BadParameter(
                    f"directory {str(target.resolve().parent)!r} does not exist",
                    param_hint=f"'{option}'",
                )
        started = time.perf_counter()
        try:
            result = run_with_progress(mechanisms, yes, no_list, trials, seed, study_level)
        except ParameterError as exc:
            raise bad(exc.parameter, str(exc)) from None
        elapsed = time.perf_counter() - started
        text = result.to_json_text()
        if json_output:
            sys.stdout.write(text + "\n")
        else:
            out = Console()
            if not out.is_terminal:
                out = Console(width=TABLE_WIDTH)
            out.print(study_table(result))
            out.print(scaling_summary(result), highlight=False)
        err = Console(stderr=True)
        err.print(
            f"{len(result.rows)} rows x {trials} trials simulated in {elapsed:.2f} s",
            highlight=False,
        )
        if json_out is not None:
            json_out.write_text(text + "\n")
            err.print(f"wrote {json_out}", highlight=False)
        if plot is not None:
            plot_study(result, plot)
            err.print(f"wrote {plot}", highlight=False)
