"""Tables in an 80-column terminal keep their important columns whole (nothing cut to '…')."""

from __future__ import annotations

import h3
from rich.console import Console

from ldpcollect import geo
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect_cli.release_command import release_table
from ldpcollect_cli.release_view import CellRow, ReleaseView
from ldpcollect_cli.service_render import ledger_tables


def rendered(*tables: object, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    for table in tables:
        console.print(table)
    return console.export_text()


def test_the_ledger_keeps_query_view_guarantee_epsilon_delta_and_rho() -> None:
    ledger = pb.Ledger(budget_mode="none", currency="rho")
    for query in ("flights-rr", "flights-sp-noise"):
        entry = ledger.entries.add(query_id=query)
        entry.released_at.GetCurrentTime()
        entry.claims.add(
            view="public", guarantee="zcdp", epsilon=3.2915, delta=1e-6,
            epsilon_bun_steinke=3.97, rho=0.25,
        )  # fmt: skip
        entry.claims.add(view="aggregator", guarantee="approximate", epsilon=0, delta=0.5)
    text = rendered(*ledger_tables(ledger, 80))
    assert max(len(line) for line in text.splitlines()) <= 80
    for whole in ("flights-sp-noise", "aggregator", "approximate", "3.292", "1e-06", "0.25"):
        assert whole in text, whole
    assert "…" not in text.split("releases (2)")[1]
    wide = rendered(*ledger_tables(ledger, 160), width=160)
    assert "Bun-Steinke" in wide and "released at" in wide


def test_the_release_keeps_hex_cells_and_estimates() -> None:
    scheme = geo.H3Scheme(9)
    cells = sorted(h3.str_to_int(c) for c in h3.grid_disk("891fb46741bffff", 1))
    rows = tuple(
        CellRow(cell, 1234.5 - k, 16.7, 1201.8 - k, 1267.2 - k, 20_000, truth=1230 - k)
        for k, cell in enumerate(cells)
    )
    view = ReleaseView(
        "paris-sp", scheme, "SP sampling_rate=1/2", "public: epsilon 3.3", 20_000, rows
    ).with_postprocess("clip")
    text = rendered(release_table(view, top=5))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "891fb46741bffff" in text and "1234.5" in text and "1230" in text
    assert "…" not in text
    assert "5 of 7 cells" in text
