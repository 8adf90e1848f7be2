"""Commands: `ldpcollect privacy convert`, `privacy cost` (a budget calculator) and `privacy plan`
(the noise or participants floor a target (epsilon, delta) needs).

The accounting modules (scipy) are imported inside the commands, so `ldpcollect --help` and
the other commands start without them.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.privacy_headline import HONEST_PARTICIPANTS

privacy_app = typer.Typer(
    help="Privacy calculator: convert zCDP to (epsilon, delta), cost a plan of queries.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.add_typer(privacy_app, name="privacy")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _show(data: dict[str, Any], as_json: bool, title: str) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value (rounded up)")
    table.add_column("meaning")
    from ldpcollect.accounting.conversions import round_up

    def shown(value: object) -> str:
        if isinstance(value, float):
            return "inf" if math.isinf(value) else f"{round_up(value):.6g}"
        return "none" if value is None else str(value)

    if "unbounded" in data:  # the headline first: the figure to publish
        eps = "NONE (unbounded)" if data["unbounded"] else shown(data["epsilon"])
        table.add_row("EPSILON (publish this)", eps, str(data.get("words", "")))
    for key, value in data.items():
        if isinstance(value, dict | list) or key in ("epsilon", "unbounded", "words"):
            continue
        table.add_row(key, shown(value), "")
    settings = data.get("settings", {})
    for key, value in settings.items():
        if isinstance(value, dict):
            value = ", ".join(
                f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in value.items()
            )
        table.add_row(f"SETTINGS: {key}", shown(value), SETTING_WORDS.get(key, ""))
    details = data.get("details", {})
    for name, detail in details.items():
        figure = next((detail[k] for k in ("epsilon", "rho") if k in detail), None)
        label = "rho" if "rho" in detail else "epsilon"
        sentence = str(detail.get("sentence", detail.get("explanation", "")))
        table.add_row(f"  details: {name} ({label})", shown(figure), sentence)
    console = Console()
    console.print(table)
    for note in data.get("notes", []):
        console.print(f"note: {note}")


SETTING_WORDS = {
    "noise_sigma": "query create --noise-sigma (discrete Gaussian noise on every count)",
    "min_reports": "query create --min-reports (nothing released below it; sets the public's "
    "count-level epsilon)",
    "per_release_epsilon": "the public's headline epsilon of one such release",
    "budget": "fix before the first release: serve --budget EPS,DELTA,renyi",
    "std_error": "a cell's standard error at `count` devices: the accuracy this buys",
    "count": "the true count at which std_error is shown (--count)",
}


@privacy_app.command()
def convert(
    rho: Annotated[float | None, typer.Option(help="zCDP rho to convert.")] = None,
    delta: Annotated[float, typer.Option(help="Target delta, in (0, 1).")] = 1e-6,
    epsilon: Annotated[
        float | None, typer.Option(help="Inverse: the rho (and sigma) meeting this epsilon.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """rho-zCDP to (epsilon, delta): CKS (tight) and Bun-Steinke; or, with --epsilon, the
    inverse: the rho and discrete Gaussian sigma (sensitivity 1 and sqrt(2)) that meet it."""
    from ldpcollect.accounting.conversions import (
        bun_steinke_epsilon,
        cks_delta,
        cks_epsilon,
        rho_for_target,
        sigma_for_target,
    )

    try:
        if (rho is None) == (epsilon is None):
            raise ParameterError("rho/epsilon", None, "exactly one of --rho or --epsilon")
        if rho is not None:
            data: dict[str, Any] = {
                "epsilon": cks_epsilon(rho, delta),
                "delta": delta,
                "unbounded": False,
                "words": "rho-zCDP converted by Canonne-Kamath-Steinke (tight)",
                "rho": rho,
                "details": {
                    "bun_steinke": {
                        "epsilon": bun_steinke_epsilon(rho, delta),
                        "delta": delta,
                        "sentence": "the conservative conversion (Bun-Steinke)",
                    },
                    "delta_at_epsilon_0": {
                        "epsilon": 0.0,
                        "delta": cks_delta(rho, 0.0),
                        "sentence": "the delta at which epsilon 0 holds (CKS)",
                    },
                },
            }
        else:
            assert epsilon is not None
            data = {
                "epsilon": epsilon,
                "delta": delta,
                "rho": rho_for_target(epsilon, delta),
                "sigma_sensitivity_1": sigma_for_target(epsilon, delta, 1.0),
                "sigma_sensitivity_sqrt2": sigma_for_target(epsilon, delta, math.sqrt(2.0)),
            }
    except ParameterError as exc:
        _fail(str(exc))
        return
    _show(data, as_json, "zCDP conversion")


def _mechanism(
    mechanism: str, flip1: str | None, flip2: str | None, sampling_rate: str | None
) -> RandomizedResponse | SamplingPrivacy:
    if mechanism == "rr":
        if flip1 is None or flip2 is None:
            raise ParameterError("flip1/flip2", None, "both given for --mechanism rr")
        return RandomizedResponse(flip1, flip2)
    if mechanism == "sp":
        if sampling_rate is None:
            raise ParameterError("sampling-rate", None, "(0, 1] for --mechanism sp")
        return SamplingPrivacy(sampling_rate)
    raise ParameterError("mechanism", mechanism, "one of 'rr', 'sp'")


def _fraction(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


@privacy_app.command()
def plan(
    mechanism: Annotated[str, typer.Option(help="rr or sp.")],
    epsilon: Annotated[float, typer.Option(help="Target epsilon for the public, over K queries.")],
    delta: Annotated[float, typer.Option(help="Target delta, in (0, 1).")] = 1e-6,
    queries: Annotated[
        int, typer.Option("--queries", "--releases", help="Number of releases in the campaign.")
    ] = 1,
    targets: Annotated[int, typer.Option(help="Targets per query (2+ = two answers change).")] = 1,
    flip1: Annotated[
        str | None, typer.Option(help="RR: probability of answering truthfully.")
    ] = None,
    flip2: Annotated[str | None, typer.Option(help="RR: probability of Yes otherwise.")] = None,
    sampling_rate: Annotated[str | None, typer.Option(help="SP: sampling rate s.")] = None,
    per: Annotated[
        str,
        typer.Option(
            "--per",
            help="release: --epsilon is each release's; campaign: it is the whole campaign's "
            "(--queries releases, each chosen after seeing earlier ones: the budget's filter).",
        ),
    ] = "release",
    count: Annotated[
        int, typer.Option(help="A cell's true count at which to show the standard error.")
    ] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The settings that meet a privacy target, and what they cost in accuracy: the release
    noise sigma (SP) or the participants floor --min-reports (RR), the budget to fix before the
    first release (`serve --budget`), and the standard error per cell they buy. `sigma` and
    `participants` also answer "K queries fixed in advance" (PLD composition)."""
    from ldpcollect.accounting.planner import (
        gaussian_sigma,
        plan_settings,
        rr_participants,
        sp_sigma,
    )

    try:
        mech = _mechanism(mechanism, flip1, flip2, sampling_rate)
        if not 1 <= queries <= 1000:
            raise ParameterError("queries", queries, "[1, 1000]")
        if not 1 <= targets <= 65_536:
            raise ParameterError("targets", targets, "[1, 65536]")
        gaussian = gaussian_sigma(epsilon, delta, targets, queries)
        data: dict[str, Any] = {
            "mechanism": mech.name,
            "params": mech.params(),
            "epsilon": epsilon,
            "delta": delta,
            "queries": queries,
            "targets": targets,
            "sigma_noise_alone": _fraction(gaussian),
            "notes": [
                "sigma_noise_alone: discrete Gaussian sigma on every released count, from the "
                "noise's sensitivity alone (exact profile); sigmas are rounded up to hundredths"
            ],
        }
        if isinstance(mech, SamplingPrivacy):
            exact = sp_sigma(mech.sampling_rate, epsilon, delta, targets, queries)
            data["sigma"] = _fraction(exact if exact is not None else gaussian)
            data["sigma_sp_exact_pair"] = _fraction(exact)
        else:
            floor = rr_participants(mech, epsilon, delta, targets, queries)
            data["sigma"] = _fraction(gaussian)
            data["participants"] = floor
            data["notes"].append(
                "participants: the smallest --min-reports for which the count-level public "
                "figure meets the target without noise"
            )
        settings = plan_settings(mech, epsilon, delta, targets, queries, per, count)
        data["per"] = per
        data["settings"] = settings
        data["commands"] = _commands(mech, settings)
        data["notes"].append(
            f"settings: meet epsilon {epsilon:g} per {per} ({queries} release(s)); the budget "
            "is for the Renyi filter, fixed before the first release; std_error is a cell's "
            f"standard error with {count} devices truly there"
            + (" (RR: among min_reports participants)" if settings["min_reports"] else "")
        )
        if settings["min_reports"]:
            data["notes"].append(HONEST_PARTICIPANTS)
    except ParameterError as exc:
        _fail(str(exc))
        return
    _show(data, as_json, f"plan for epsilon {epsilon:g} at delta {delta:g}")
    if not as_json:
        for line in data["commands"]:
            typer.echo(line)


def _commands(mech: RandomizedResponse | SamplingPrivacy, s: dict[str, Any]) -> list[str]:
    """The commands that apply a plan."""
    budget = s["budget"]
    mechanism = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in mech.params().items())
    query = f"ldpcollect query create --mechanism {mech.name} {mechanism}"
    if s["noise_sigma"] is not None:
        query += f" --noise-sigma {s['noise_sigma']:g}"
    if s["min_reports"] is not None:
        query += f" --min-reports {s['min_reports']}"
    return [
        f"ldpcollect serve --budget {budget['epsilon']:g},{budget['delta']:g},renyi ...",
        query + " ...",
    ]


@privacy_app.command()
def cost(
    mechanism: Annotated[str, typer.Option(help="rr or sp.")],
    queries: Annotated[int, typer.Option(help="Number of queries a device answers.")] = 1,
    delta: Annotated[float, typer.Option(help="Target delta, in (0, 1).")] = 1e-6,
    flip1: Annotated[
        str | None, typer.Option(help="RR: probability of answering truthfully.")
    ] = None,
    flip2: Annotated[str | None, typer.Option(help="RR: probability of Yes otherwise.")] = None,
    sampling_rate: Annotated[str | None, typer.Option(help="SP: sampling rate s.")] = None,
    targets: Annotated[int, typer.Option(help="Targets per query (2+ = two answers change).")] = 1,
    noise_sigma: Annotated[
        str | None, typer.Option(help="Discrete Gaussian release noise sigma.")
    ] = None,
    participants: Annotated[
        int | None,
        typer.Option(help="RR: the release floor (min_reports); adds the count-level public view."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """What K queries cost: `eps` is the tightest valid (epsilon at delta) for the public."""
    try:
        mech = _mechanism(mechanism, flip1, flip2, sampling_rate)
        sigma = None
        if noise_sigma is not None:
            try:
                sigma = Fraction(noise_sigma)
            except (ValueError, ZeroDivisionError) as exc:
                raise ParameterError("noise-sigma", noise_sigma, "(0, inf)") from exc
        from ldpcollect.accounting.calculator import queries_cost

        data = queries_cost(mech, queries, delta, targets, sigma, participants)
    except ParameterError as exc:
        _fail(str(exc))
        return
    _show(data, as_json, f"privacy cost of {queries} {mechanism} queries")
