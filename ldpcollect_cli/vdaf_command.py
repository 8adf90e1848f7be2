"""Command: `ldpcollect vdaf test-vectors DIR [--json]`, checking this build's VDAF (Prio3,
draft-irtf-cfrg-vdaf-20) against a directory of the draft's published test vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

vdaf_app = typer.Typer(
    help="The VDAF (Prio3, draft-irtf-cfrg-vdaf-20) behind the two-aggregator secure mode.",
    no_args_is_help=True,
)


@vdaf_app.command("test-vectors")
def test_vectors(
    directory: Annotated[
        Path,
        typer.Argument(
            help="A directory of the draft's test vector files (*.json).",
            exists=True,
            file_okay=False,
            dir_okay=True,
            readable=True,
        ),
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Replay every supported vector file in DIR byte for byte (bad_* files must be refused);
    exit 1 if any fails. Files for other algorithms are listed as skipped."""
    from ldpcollect.vdaf.test_vectors import SUPPORTED, check_directory  # not at start-up

    results = check_directory(directory)
    checked = [r for r in results if not r.skipped]
    skipped = [r for r in results if r.skipped]
    failed = sum(not r.passed for r in checked)
    if json_out:
        report = {
            "files": [{"name": r.name, "passed": r.passed, "detail": r.detail} for r in checked],
            "skipped": [r.name for r in skipped],
            "failed": failed,
        }
        typer.echo(json.dumps(report, indent=2))
    else:
        for r in checked:
            typer.echo(f"{'PASS' if r.passed else 'FAIL'}  {r.name}: {r.detail}")
        for r in skipped:
            typer.echo(f"SKIP  {r.name}: {r.detail}")
        typer.echo(
            f"{len(checked) - failed} passed, {failed} failed, {len(skipped)} skipped "
            f"(supported: {', '.join(SUPPORTED)})"
        )
    if not checked:
        typer.echo(f"error: no supported vector files in {directory}", err=True)
        raise typer.Exit(2)
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.add_typer(vdaf_app, name="vdaf")
