"""A release as a picture: each target cell drawn as its true shape, coloured by a value.

Panels side by side: the estimate, the width of its 95% interval, and the truth when the run
knows it (estimate and truth share one colour scale, so they compare by eye). Axes are
longitude and latitude in degrees, shown with the local aspect ratio (a degree of longitude is
cos(latitude) as long as a degree of latitude), so H3 hexagons look like hexagons.

The PNG and the HTML page (`release_html`) colour alike, from the definitions here:
- counts (estimate, truth, post-processed) on `COUNT_RAMP` (viridis), from the lowest to the
  highest count shown, on a symmetric log scale when a few busy cells stand among many quiet
  ones (`log_threshold`);
- interval widths on `WIDTH_RAMP` (light to dark orange) from 0, not from the narrowest width:
  widths of 549 and 571 devices then look alike, as they are, instead of spanning the whole
  ramp and suggesting a pattern that is not there;
- a cell whose 95% interval includes 0 is hatched: the release cannot tell it from an empty
  cell.
Under the cells the PNG draws a light outline of land and water (`ldpcollect_cli.land`) when
the land data is installed. matplotlib is imported here, only when a map is asked for.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from client.atomic import write_atomic
from ldpcollect_cli.release_view import CellRow, ReleaseView

Kind = Literal["counts", "width"]
Panel = tuple[str, list[float], Kind]  # title, one value per cell, which scale
Rgb = tuple[int, int, int]

COUNT_RAMP: tuple[Rgb, ...] = (
    (68, 1, 84),
    (59, 82, 139),
    (33, 145, 140),
    (94, 201, 98),
    (253, 231, 37),
)
"""viridis at five stops: counts, in the PNG and the HTML page alike."""
WIDTH_RAMP: tuple[Rgb, ...] = (
    (255, 245, 235),
    (253, 190, 133),
    (253, 141, 60),
    (217, 71, 1),
    (127, 39, 4),
)
"""light to dark orange at five stops: interval widths, from 0."""
RAMPS: dict[Kind, tuple[Rgb, ...]] = {"counts": COUNT_RAMP, "width": WIDTH_RAMP}
UNITS: dict[Kind, str] = {"counts": "devices", "width": "devices (interval width, from 0)"}
HATCH_NOTE = "hatched: its 95% interval includes 0 (not told apart from no devices)"
LAND_COLOUR, WATER_COLOUR, COAST_COLOUR = "#efece6", "#d9e6f2", "#8c99a6"


@dataclass(frozen=True)
class ColourScale:
    """Where a value sits on a ramp: linear from `low` to `high`, or symmetric log (linear
    within +-linthresh) when `linthresh` is set."""

    kind: Kind
    low: float
    high: float
    linthresh: float | None = None

    def forward(self, v: float) -> float:
        if self.linthresh is None:
            return v
        return math.copysign(math.log10(1 + abs(v) / self.linthresh), v)

    def inverse(self, y: float) -> float:
        if self.linthresh is None:
            return y
        return math.copysign(self.linthresh * (10 ** abs(y) - 1), y)

    def shade(self, value: float) -> float:
        """0 at `low`, 1 at `high`."""
        span = self.forward(self.high) - self.forward(self.low)
        return 0.5 if span <= 0 else (self.forward(value) - self.forward(self.low)) / span

    def ticks(self, count: int = 5) -> list[float]:
        """About `count` labelled values from low to high, evenly placed on the scale."""
        f_low, f_high = self.forward(self.low), self.forward(self.high)
        if f_high <= f_low:
            return [self.low]
        return [self.inverse(f_low + k * (f_high - f_low) / (count - 1)) for k in range(count)]

    @property
    def label(self) -> str:
        return UNITS[self.kind] + (" (log scale)" if self.linthresh is not None else "")


def panels(view: ReleaseView) -> list[Panel]:
    """What the map shows: estimate, interval width, and what else the view knows."""
    rows = view.rows
    shown: list[Panel] = [
        ("estimate", [r.estimate for r in rows], "counts"),
        ("95% interval width", [r.interval_width for r in rows], "width"),
    ]
    if view.has_truth:
        shown.append(("truth", [float(r.truth or 0) for r in rows], "counts"))
    if view.postprocess is not None:
        label = f"estimate, {view.postprocess} (post-processed)"
        shown.insert(1, (label, [r.adjusted or 0.0 for r in rows], "counts"))
    return shown


def scales(shown: list[Panel]) -> dict[Kind, ColourScale]:
    """One scale for all count panels (they compare by eye), one for interval widths."""
    counts = [values for _, values, kind in shown if kind == "counts"]
    low = min(min(values) for values in counts)
    high = max(max(values) for values in counts)
    widths = [v for _, values, kind in shown if kind == "width" for v in values]
    return {
        "counts": ColourScale("counts", low, high, log_threshold(counts[0], high)),
        "width": ColourScale("width", 0.0, max(max(widths, default=0.0), 1e-9)),
    }


def includes_zero(row: CellRow) -> bool:
    """The release cannot tell this cell from one without devices."""
    return row.ci_low <= 0 <= row.ci_high


def log_threshold(estimates: list[float], high: float) -> float | None:
    """When a few busy cells stand among many quiet ones (airports across a country), a linear
    scale paints the quiet ones one colour: then counts are shown on a symmetric log scale,
    linear within +-threshold. None: linear is fine."""
    typical = sorted(abs(v) for v in estimates)[len(estimates) * 3 // 4]
    if high <= 50 * max(typical, 1.0):
        return None
    return max(typical, 10.0)


def colour(kind: Kind, t: float) -> Rgb:
    """The ramp's colour at t in [0, 1] (linear between its stops)."""
    ramp = RAMPS[kind]
    position = min(1.0, max(0.0, t)) * (len(ramp) - 1)
    i = min(len(ramp) - 2, math.floor(position))
    f = position - i
    r, g, b = (round(a + f * (c - a)) for a, c in zip(ramp[i], ramp[i + 1], strict=True))
    return r, g, b


def tick_text(value: float) -> str:
    """A legend label: whole devices, or one decimal below 10."""
    return f"{value:,.0f}" if abs(value) >= 10 or value == 0 else f"{value:.1f}"


def write_png(view: ReleaseView, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import FuncNorm, LinearSegmentedColormap

    matplotlib.rcParams["hatch.linewidth"] = 0.5  # a light mark, the colour still shows
    shapes = [[(lon, lat) for lat, lon in view.scheme.boundary(r.cell)] for r in view.rows]
    shown = panels(view)
    scale_of = scales(shown)
    aspect = _aspect(view.rows, view)
    lons = [lon for shape in shapes for lon, _ in shape]
    lats = [lat for shape in shapes for _, lat in shape]
    extent = _padded(min(lons), max(lons), min(lats), max(lats))
    shape_ratio = (max(lats) - min(lats)) * aspect / max(max(lons) - min(lons), 1e-12)
    panel_height = min(max(4.2 * shape_ratio, 2.2), 6.0) + 0.9
    columns = 2 if len(shown) == 4 else len(shown)
    lines = -(-len(shown) // columns)
    figure, axes = plt.subplots(
        lines,
        columns,
        figsize=(5.4 * columns, 1.2 + panel_height * lines),
        squeeze=False,
        layout="constrained",
    )
    hatched = [shape for shape, r in zip(shapes, view.rows, strict=True) if includes_zero(r)]
    land = _land_grid(extent)
    for ax, (title, values, kind) in zip(axes.ravel(), shown, strict=True):
        scale = scale_of[kind]
        cmap = LinearSegmentedColormap.from_list(
            kind, [tuple(c / 255 for c in rgb) for rgb in RAMPS[kind]]
        )
        norm = FuncNorm(
            (np.vectorize(scale.forward), np.vectorize(scale.inverse)),
            vmin=scale.low,
            vmax=scale.high,
        )
        _draw_land(ax, land, extent)
        collection = PolyCollection(shapes, array=values, cmap=cmap, norm=norm, edgecolors="0.35")
        collection.set_linewidth(0.3)
        ax.add_collection(collection)
        if hatched and title != "truth":  # the hatch is about the estimate's interval
            # white over the dark low counts it marks on the count ramp, dark over orange
            ink = (1, 1, 1, 0.7) if kind == "counts" else (0.15, 0.15, 0.15, 0.7)
            marks = PolyCollection(hatched, facecolors="none", edgecolors=ink, hatch="///")
            marks.set_linewidth(0)
            ax.add_collection(marks)
        ax.set_xlim(extent[0], extent[1])
        ax.set_ylim(extent[2], extent[3])
        ax.set_aspect(aspect)
        ax.set_title(title)
        ax.set_xlabel("longitude (degrees)")
        ax.set_ylabel("latitude (degrees)")
        ax.ticklabel_format(useOffset=False)
        ax.tick_params(axis="x", labelrotation=30)
        bar = figure.colorbar(collection, ax=ax, shrink=0.8, label=scale.label)
        ticks = scale.ticks()
        bar.set_ticks(ticks, labels=[tick_text(t) for t in ticks])
    for ax in axes.ravel()[len(shown) :]:
        ax.set_visible(False)
    errors = view.errors()
    subtitle = f"{view.privacy}; {len(view.rows)} cells ({view.scheme.describe()}), "
    subtitle += f"{view.participants:,} participants"
    if errors is not None:
        subtitle += f"; RMSE vs truth {errors['rmse']:.1f}"
        if view.postprocess is not None:
            subtitle += f" ({view.postprocess}: {errors[f'rmse_{view.postprocess}']:.1f})"
    figure.suptitle(f"release of {view.query_id}: {view.mechanism}\n{subtitle}", fontsize=11)
    notes = []
    if hatched:
        notes.append(f"{len(hatched)} of {len(view.rows)} cells {HATCH_NOTE}")
    if land is not None:
        notes.append("land and water: GLOBE 1 km mask (global-land-mask), 0.1 degree")
    if notes:
        figure.supxlabel("; ".join(notes), fontsize=8, color="0.3")
    buffer = io.BytesIO()
    figure.savefig(buffer, dpi=110, format="png")
    plt.close(figure)
    write_atomic(path, buffer.getvalue())


def _padded(west: float, east: float, south: float, north: float) -> tuple[float, ...]:
    pad_x, pad_y = (east - west) * 0.04 or 0.01, (north - south) * 0.04 or 0.01
    return west - pad_x, east + pad_x, south - pad_y, north + pad_y


def _land_grid(
    extent: tuple[float, ...],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]] | None:
    """(lons, lats, land) of the land mask's cells over `extent`, or None without the data."""
    from ldpcollect_cli.land import land_window

    west, east, south, north = extent
    return land_window(west, east, south, north)


def _draw_land(ax: Any, land: Any, extent: tuple[float, ...]) -> None:
    """A light fill of land and water and the line between them, under the cells."""
    if land is None:
        return
    lons, lats, mask = land
    if mask.all() or not mask.any():
        ax.set_facecolor(LAND_COLOUR if mask.all() else WATER_COLOUR)
        return
    ax.set_facecolor(WATER_COLOUR)
    if lons.size > 1 and lats.size > 1:
        values = mask.astype(float)
        ax.contourf(lons, lats, values, levels=[0.5, 1.5], colors=[LAND_COLOUR], zorder=0)
        ax.contour(lons, lats, values, levels=[0.5], colors=[COAST_COLOUR], linewidths=0.5)


def _aspect(rows: tuple[CellRow, ...], view: ReleaseView) -> float:
    """Degrees of latitude per degree of longitude on screen: 1 / cos(mean latitude)."""
    lats = [view.scheme.center(r.cell)[0] for r in rows]
    return 1 / max(math.cos(math.radians(sum(lats) / len(lats))), 0.05)
