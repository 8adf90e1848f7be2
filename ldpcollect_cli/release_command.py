"""`ldpcollect release`: release a closed query (or show or reload a release), print it, and
write it as maps (PNG, HTML), GeoJSON and CSV."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from client.admin import AdminClient
from ldpcollect.errors import ParameterError
from ldpcollect.postprocess import METHODS
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect_cli.query_kinds import with_either
from ldpcollect_cli.release_view import (
    ReleaseView,
    check_truth_query,
    read_truth_file,
    truth_by_cell,
)
from ldpcollect_cli.secure_release import fetch_secure_release, view_lines
from ldpcollect_cli.service_errors import guarded
from ldpcollect_cli.service_options import (
    DEFAULT_COLLECTOR_KEY,
    DEFAULT_SERVER,
    CollectorKey,
    Json,
    Server,
    TlsCa,
    Token,
)
from ldpcollect_cli.service_render import (
    print_json,
    privacy_table,
    release_json,
    trusted_sp_warning,
)

MAP_SUFFIXES = (".png", ".html")


@dataclass(frozen=True)
class Outputs:
    maps: tuple[Path, ...] = ()
    geojson: Path | None = None
    csv: Path | None = None

    def check(self) -> None:
        for path in self.maps:
            if path.suffix.lower() not in MAP_SUFFIXES:
                raise ParameterError("--map", str(path), "a file name ending in .png or .html")

    def write(self, view: ReleaseView) -> list[Path]:
        """Write every file asked for; returns them in order."""
        from ldpcollect_cli import release_export

        for path in self.maps:
            if path.suffix.lower() == ".png":
                from ldpcollect_cli.release_map import write_png

                write_png(view, path)
            else:
                from ldpcollect_cli.release_html import write_html

                write_html(view, path)
        if self.geojson is not None:
            release_export.write_geojson(view, self.geojson)
        if self.csv is not None:
            release_export.write_csv(view, self.csv)
        return [*self.maps, *(p for p in (self.geojson, self.csv) if p is not None)]


def release_table(view: ReleaseView, top: int) -> Table:
    """The busiest `top` cells (0: all). The cell and estimate columns never fold, so a
    narrow terminal (80 columns) keeps them; the others shrink first."""
    rows = sorted(view.rows, key=lambda r: -r.estimate)
    shown = rows if top == 0 else rows[:top]
    what = f"{len(shown)} of {len(rows)} cells" if len(shown) < len(rows) else "all cells"
    table = Table(
        title=f"release of {view.query_id}, {view.participants:,} participants ({what})",
        caption=view.privacy,
        caption_justify="left",
    )
    table.add_column("cell", justify="right", no_wrap=True)
    table.add_column("estimate", justify="right", no_wrap=True)
    if view.postprocess is not None:
        table.add_column(view.postprocess, justify="right", no_wrap=True)
    if view.has_truth:
        table.add_column("truth", justify="right", no_wrap=True)
    table.add_column("std err", justify="right")
    table.add_column("95% interval", justify="right")
    participants = {r.participants for r in rows}
    if len(participants) > 1:
        table.add_column("participants", justify="right")
    for r in shown:
        cells = [view.cell_text(r.cell), f"{r.estimate:.1f}"]
        if view.postprocess is not None:
            cells.append(f"{r.adjusted:.1f}")
        if view.has_truth:
            cells.append("-" if r.truth is None else str(r.truth))
        cells += [f"{r.std_error:.1f}", f"[{r.ci_low:.1f}, {r.ci_high:.1f}]"]
        if len(participants) > 1:
            cells.append(str(r.participants))
        table.add_row(*cells)
    return table


def accuracy_lines(view: ReleaseView) -> list[str]:
    errors = view.errors()
    if errors is None:
        return []
    line = f"against the truth: RMSE {errors['rmse']:.2f}, mean absolute error {errors['mae']:.2f}"
    if view.postprocess is not None:
        line += (
            f"; {view.postprocess}: RMSE {errors[f'rmse_{view.postprocess}']:.2f}, "
            f"mean absolute error {errors[f'mae_{view.postprocess}']:.2f} (post-processing "
            "costs no privacy)"
        )
    return [line]


def release(
    query: Annotated[
        str | None, typer.Option("--query", "-q", help="Query id (not with --from-json).")
    ] = None,
    from_json: Annotated[
        Path | None,
        typer.Option(
            "--from-json",
            help="A release saved by `release --json`: show and map it without a server.",
        ),
    ] = None,
    map_files: Annotated[
        list[Path] | None,
        typer.Option(
            "--map",
            help="Draw the cells coloured by estimate (and interval width, truth): FILE.png, or "
            "FILE.html for an interactive page that needs no network. Repeatable.",
        ),
    ] = None,
    geojson: Annotated[
        Path | None,
        typer.Option("--geojson", help="Write one GeoJSON Feature per target cell to FILE."),
    ] = None,
    csv: Annotated[
        Path | None, typer.Option("--csv", help="Write one CSV row per target cell to FILE.")
    ] = None,
    truth: Annotated[
        Path | None,
        typer.Option(
            "--truth",
            help="The `fleet run --json` output of the fleet that answered: adds the true "
            "counts (a simulation knows them) to the table, map and files.",
        ),
    ] = None,
    postprocess: Annotated[
        str | None,
        typer.Option(
            "--postprocess",
            help="Also show the estimates made non-negative (free for privacy): clip (negatives "
            "to 0) or norm-sub (keeps the total). Off by default.",
        ),
    ] = None,
    top: Annotated[
        int, typer.Option("--top", min=0, help="Busiest cells in the table (0 = all).")
    ] = 20,
    server: Server = DEFAULT_SERVER,
    admin_token: Token = "",
    tls_ca: TlsCa = None,
    json_out: Json = False,
    collector_key: CollectorKey = DEFAULT_COLLECTOR_KEY,
) -> None:
    """Release a closed query's estimates (or show the release if it already happened), or
    reload a saved one; optionally map and export it. At a leader (a secure query): close it,
    collect both aggregators' noised shares and open them with --collector-key."""
    console = Console()

    def work() -> None:
        if (query is None) == (from_json is None):
            raise ParameterError("--query/--from-json", (query, from_json), "exactly one of them")
        if postprocess is not None and postprocess not in METHODS:
            raise ParameterError("--postprocess", postprocess, "clip or norm-sub")
        outputs = Outputs(tuple(map_files or ()), geojson, csv)
        outputs.check()
        truth_entries = read_truth_file(truth) if truth is not None else None
        released: pb.QueryRelease | None = None
        views: dict[str, dict[str, object]] | None = None
        if from_json is not None:
            data: dict[str, object] | None = None
            view = ReleaseView.from_file(from_json)
            if truth is not None:
                check_truth_query(truth, view.query_id)
        else:
            assert query is not None
            if truth is not None:
                check_truth_query(truth, query)
            got, released, views = with_either(
                server,
                admin_token,
                tls_ca,
                lambda a: (*_fetch(a, query), None),
                lambda s: fetch_secure_release(s, collector_key, query),
            )
            data = release_json(released, got)
            if views is not None:
                data = {**data, "secure": True, "views": views}
            view = ReleaseView.from_json(data)
        if truth_entries is not None:
            view = view.with_truth(truth_by_cell(truth_entries, view.scheme))
        view = view.with_postprocess(postprocess)
        written = outputs.write(view)
        if json_out:
            shown = _view_json(view) if data is None else data
            if data is not None and (truth is not None or postprocess is not None):
                shown = {**data, "view": _view_json(view)}
            print_json(shown)
            return
        console.print(release_table(view, top))
        if released is not None:
            deltas = [c.delta for c in released.claims if c.view == "public"]
            console.print(privacy_table([released], deltas[0] if deltas else None))
        for line in view_lines(views or {}):
            console.print(line)
        given = data or {}
        params = given.get("params")
        if views is None and given.get("mechanism") == "sp" and isinstance(params, dict):
            console.print(trusted_sp_warning(view.query_id, str(params["sampling_rate"])))
        for line in accuracy_lines(view):
            console.print(line)
        for path in written:
            console.print(f"wrote {path}")

    guarded(work)


def _fetch(admin: AdminClient, query_id: str) -> tuple[pb.Query, pb.QueryRelease]:
    got = admin.get_query(query_id)
    if got.state == pb.QUERY_STATE_RELEASED:
        return got, admin.get_release(query_id)
    return got, admin.release(query_id)


def _view_json(view: ReleaseView) -> dict[str, object]:
    from ldpcollect_cli.release_export import cell_properties

    return {
        "query_id": view.query_id,
        "scheme": view.scheme.describe(),
        "mechanism": view.mechanism,
        "privacy": view.privacy,
        "participants": view.participants,
        "estimates": [cell_properties(view, r) for r in view.rows],
        "errors": view.errors(),
    }
