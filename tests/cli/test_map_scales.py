"""The maps' colour scales: interval widths from 0 (tiny differences stay tiny), counts on a
symmetric log scale when a few cells dwarf the rest, legend ticks placed where their values
are, and the same colours for the PNG and the HTML page."""

from __future__ import annotations

import pytest

from ldpcollect_cli.release_map import ColourScale, Panel, colour, scales


def test_nearly_equal_interval_widths_get_nearly_equal_colours() -> None:
    shown: list[Panel] = [
        ("estimate", [10.0, 200.0, 35.0], "counts"),
        ("95% interval width", [549.0, 560.0, 571.0], "width"),
    ]
    width = scales(shown)["width"]
    assert width.low == 0
    spread = width.shade(571.0) - width.shade(549.0)
    assert spread == pytest.approx(22 / 571)  # 4% of the ramp, not all of it


def test_counts_share_one_scale_and_go_log_when_a_few_cells_dwarf_the_rest() -> None:
    quiet = [float(v) for v in range(20)] + [5000.0]
    shown: list[Panel] = [("estimate", quiet, "counts"), ("truth", quiet[::-1], "counts")]
    counts = scales(shown)["counts"]
    assert counts.linthresh is not None and "log scale" in counts.label
    assert counts.shade(counts.low) == 0 and counts.shade(counts.high) == 1
    for tick in counts.ticks():
        assert counts.inverse(counts.forward(tick)) == pytest.approx(tick)
    positions = [counts.shade(t) for t in counts.ticks()]
    assert positions == pytest.approx([0, 0.25, 0.5, 0.75, 1])


def test_one_ramp_for_both_outputs() -> None:
    scale = ColourScale("counts", 0, 100)
    assert colour("counts", scale.shade(0)) == (68, 1, 84)  # viridis' first stop
    assert colour("counts", scale.shade(100)) == (253, 231, 37)
    assert colour("width", 0.0) == (255, 245, 235)  # light for a width near 0
