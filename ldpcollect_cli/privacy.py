"""Commands: `ldpcollect privacy convert` and `ldpcollect privacy cost` (a budget calculator).

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
    from ldpcollect.accounting.conversions import round_up

    for key, value in data.items():
        if isinstance(value, dict | list):
            continue
        if isinstance(value, float):
            shown = "inf" if math.isinf(value) else f"{round_up(value):.6g}"
        else:
            shown = "none" if value is None else str(value)
        table.add_row(key, shown)
    console = Console()
    console.print(table)
    for note in data.get("notes", []):
        console.print(f"note: {note}")


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
                "rho": rho,
                "delta": delta,
                "eps_cks": cks_epsilon(rho, delta),
                "eps_bun_steinke": bun_steinke_epsilon(rho, delta),
                "delta_cks_at_eps_0": cks_delta(rho, 0.0),
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
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """What K queries cost: `eps` is the tightest valid (epsilon at delta) for the public."""
    try:
        mech: RandomizedResponse | SamplingPrivacy
        if mechanism == "rr":
            if flip1 is None or flip2 is None:
                raise ParameterError("flip1/flip2", None, "both given for --mechanism rr")
            mech = RandomizedResponse(flip1, flip2)
        elif mechanism == "sp":
            if sampling_rate is None:
                raise ParameterError("sampling-rate", None, "(0, 1] for --mechanism sp")
            mech = SamplingPrivacy(sampling_rate)
        else:
            raise ParameterError("mechanism", mechanism, "one of 'rr', 'sp'")
        sigma = None
        if noise_sigma is not None:
            try:
                sigma = Fraction(noise_sigma)
            except (ValueError, ZeroDivisionError) as exc:
                raise ParameterError("noise-sigma", noise_sigma, "(0, inf)") from exc
        from ldpcollect.accounting.calculator import queries_cost

        data = queries_cost(mech, queries, delta, targets, sigma)
    except ParameterError as exc:
        _fail(str(exc))
        return
    _show(data, as_json, f"privacy cost of {queries} {mechanism} queries")
