"""`ldpcollect ledger [--json]` shows the privacy ledger; `ldpcollect ledger set-budget
--epsilon E --delta D [--json]` sets the operator's budget and shows the result. At a leader
both are its secure queries' ledger (SecureAdmin GetSecureLedger, SetSecureBudget)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from ldpcollect.errors import ParameterError
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect_cli.query_kinds import with_either
from ldpcollect_cli.service_errors import guarded
from ldpcollect_cli.service_options import (
    DEFAULT_SERVER,
    Json,
    Server,
    TlsCa,
    Token,
)
from ldpcollect_cli.service_render import ledger_json, ledger_tables, print_json

console = Console()

ledger_app = typer.Typer(
    help="The aggregator's privacy ledger (shown without a subcommand) and its budget.",
)


@ledger_app.callback(invoke_without_command=True)
def ledger(
    ctx: typer.Context,
    server: Server = DEFAULT_SERVER,
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """The aggregator's privacy ledger: budget, spent, remaining, odometer, every release's
    claims, budget changes and notes. `ldpcollect ledger set-budget --help` sets the budget."""
    if ctx.invoked_subcommand is not None:
        guarded(lambda: _no_group_options(ctx))
        return
    guarded(
        lambda: _show(
            with_either(server, admin_token, tls_ca, lambda a: a.ledger(), lambda s: s.ledger()),
            json_out,
        )
    )


@ledger_app.command("set-budget")
def set_budget(
    epsilon: Annotated[
        float,
        typer.Option(
            "--epsilon",
            help="The population's epsilon budget (public view). Fixed once a release is "
            "charged under it: it can never be raised within a filter.",
        ),
    ] = 0.0,
    delta: Annotated[
        float,
        typer.Option(
            "--delta",
            help="Its delta: > 0 filters zCDP rho (Feldman-Zrnic), 0 sums pure epsilons.",
        ),
    ] = 0.0,
    filter: Annotated[
        str,
        typer.Option(
            "--filter",
            help="zcdp (each release charged its zCDP rho) or renyi (its Renyi curve at several "
            "orders: count-level RR releases fit); empty keeps the ledger's. Only before the "
            "filter's first release.",
        ),
    ] = "",
    new_filter: Annotated[
        bool,
        typer.Option(
            "--new-filter",
            help="Start a new filter with this budget for the releases from now on (recorded; "
            "the ledger's odometer keeps covering every release). The only way to change a "
            "budget after a release was charged under it.",
        ),
    ] = False,
    no_budget: Annotated[
        bool,
        typer.Option(
            "--no-budget",
            help="Opt out of a budget explicitly: releases go out unbudgeted and say so.",
        ),
    ] = False,
    server: Server = DEFAULT_SERVER,
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
) -> None:
    """Fix the operator's privacy budget before the first release (releases past it are
    refused; `ldpcollect privacy plan` helps choose it). Works on a trusted aggregator and
    on a leader."""

    def call() -> pb.Ledger:
        if not no_budget and epsilon <= 0:
            raise ParameterError(
                "--epsilon", epsilon, "(0, inf)", "or --no-budget to opt out of a budget"
            )
        return with_either(
            server,
            admin_token,
            tls_ca,
            lambda a: a.set_budget(epsilon, delta, filter, new_filter, no_budget),
            lambda s: s.set_budget(epsilon, delta, filter, new_filter, no_budget),
        )

    guarded(lambda: _show(call(), json_out))


def _no_group_options(ctx: typer.Context) -> None:
    """`ldpcollect ledger --json set-budget ...` would silently drop --json: refuse it."""
    options = {
        "server": "--server",
        "admin_token": "--admin-token",
        "tls_ca": "--tls-ca",
        "json_out": "--json",
    }
    given = []
    for name, option in options.items():
        source = ctx.get_parameter_source(name)
        if source is not None and source.name == "COMMANDLINE":
            given.append(option)
    if given:
        where = f"ldpcollect ledger {ctx.invoked_subcommand} {' '.join(given)} ..."
        raise ParameterError(
            "/".join(given),
            "before the subcommand",
            "the subcommand's options",
            f"put them after it: {where}",
        )


def _show(result: pb.Ledger, json_out: bool) -> None:
    if json_out:
        print_json(ledger_json(result))
        return
    for table in ledger_tables(result, console.width):
        console.print(table)
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def register(app: typer.Typer) -> None:
    app.add_typer(ledger_app, name="ledger")
