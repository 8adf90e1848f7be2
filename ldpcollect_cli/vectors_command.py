"""Command: `ldpcollect vectors device --out DIR`, writing the device conformance vectors
(docs/device-protocol.md) as this build's SDK computes them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

vectors_app = typer.Typer(
    help="Conformance vectors for implementations in other languages.", no_args_is_help=True
)


@vectors_app.command("device")
def device(
    out: Annotated[
        Path, typer.Option("--out", help="Directory to write the JSON files to (created).")
    ] = Path("vectors/device"),
) -> None:
    """Write one JSON file per device case (inputs: location, query bytes, every random byte,
    keys; outputs: cell, draw, answers per round, report bytes) and refusals.json."""
    from client.device_vector_files import write_vectors  # loaded only by this command

    written = write_vectors(out)
    typer.echo(f"wrote {len(written)} files to {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(vectors_app, name="vectors")
