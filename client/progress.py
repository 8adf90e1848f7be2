"""Rich progress bars for fleet runs (on stderr, so `--json` output on stdout stays clean)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

ProgressFactory = Callable[[int, int], Callable[[int], None]]


@contextmanager
def fleet_progress(label: str, *, enabled: bool = True) -> Iterator[ProgressFactory | None]:
    """Yields `factory(round, total) -> advance(n)` that adds one bar per round answered."""
    if not enabled:
        yield None
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bars:

        def factory(round_: int, total: int) -> Callable[[int], None]:
            task = bars.add_task(f"{label} round {round_}", total=total)
            return lambda n: bars.advance(task, n)

        yield factory
