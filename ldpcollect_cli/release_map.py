"""A release as a picture: each target cell drawn as its true shape, coloured by a value.

Panels side by side: the estimate, the width of its 95% interval, and the truth when the run
knows it (estimate and truth share one colour scale, so they compare by eye). Axes are
longitude and latitude in degrees, shown with the local aspect ratio (a degree of longitude is
cos(latitude) as long as a degree of latitude), so H3 hexagons look like hexagons.
matplotlib is imported here, only when a map is asked for.
"""

from __future__ import annotations

import math
from pathlib import Path

from ldpcollect_cli.release_view import CellRow, ReleaseView

Panel = tuple[str, list[float], str]  # title, one value per cell, colour map


def panels(view: ReleaseView) -> list[Panel]:
    """What the map shows: estimate, interval width, and what else the view knows."""
    rows = view.rows
    shown: list[Panel] = [
        ("estimate", [r.estimate for r in rows], "viridis"),
        ("95% interval width", [r.interval_width for r in rows], "magma_r"),
    ]
    if view.has_truth:
        shown.append(("truth", [float(r.truth or 0) for r in rows], "viridis"))
    if view.postprocess is not None:
        label = f"estimate, {view.postprocess} (post-processed)"
        shown.insert(1, (label, [r.adjusted or 0.0 for r in rows], "viridis"))
    return shown


def log_threshold(estimates: list[float], high: float) -> float | None:
    """When a few busy cells stand among many quiet ones (airports across a country), a linear
    scale paints the quiet ones one colour: then counts are shown on a symmetric log scale,
    linear within +-threshold. None: linear is fine."""
    typical = sorted(abs(v) for v in estimates)[len(estimates) * 3 // 4]
    if high <= 50 * max(typical, 1.0):
        return None
    return max(typical, 10.0)


def shade(value: float, low: float, high: float, linthresh: float | None) -> float:
    """Where `value` sits between low (0) and high (1) on the map's colour scale."""

    def scale(v: float) -> float:
        if linthresh is None:
            return v
        return math.copysign(math.log10(1 + abs(v) / linthresh), v)

    span = scale(high) - scale(low)
    return 0.5 if span <= 0 else (scale(value) - scale(low)) / span


def write_png(view: ReleaseView, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import Normalize, SymLogNorm

    shapes = [[(lon, lat) for lat, lon in view.scheme.boundary(r.cell)] for r in view.rows]
    shown = panels(view)
    counts = [values for _, values, cmap in shown if cmap == "viridis"]
    low = min(min(values) for values in counts)
    high = max(max(values) for values in counts)
    linthresh = log_threshold(counts[0], high)
    skewed = linthresh is not None
    aspect = _aspect(view.rows, view)
    lons = [lon for shape in shapes for lon, _ in shape]
    lats = [lat for shape in shapes for _, lat in shape]
    shape_ratio = (max(lats) - min(lats)) * aspect / max(max(lons) - min(lons), 1e-12)
    panel_height = min(max(4.2 * shape_ratio, 2.2), 6.0) + 0.9
    columns = 2 if len(shown) == 4 else len(shown)
    lines = -(-len(shown) // columns)
    figure, axes = plt.subplots(
        lines,
        columns,
        figsize=(5.4 * columns, 0.9 + panel_height * lines),
        squeeze=False,
        layout="constrained",
    )
    for ax, (title, values, cmap) in zip(axes.ravel(), shown, strict=True):
        collection = PolyCollection(shapes, array=values, cmap=cmap, edgecolors="0.35")
        collection.set_linewidth(0.3)
        if cmap == "viridis":
            linear = Normalize(low, high)
            log = SymLogNorm(linthresh=linthresh or 1.0, vmin=low, vmax=high)
            collection.set_norm(log if skewed else linear)
        ax.add_collection(collection)
        ax.autoscale_view()
        ax.set_aspect(aspect)
        ax.set_title(title)
        ax.set_xlabel("longitude (degrees)")
        ax.set_ylabel("latitude (degrees)")
        ax.ticklabel_format(useOffset=False)
        ax.tick_params(axis="x", labelrotation=30)
        label = "devices (log scale)" if skewed and cmap == "viridis" else "devices"
        figure.colorbar(collection, ax=ax, shrink=0.8, label=label)
    errors = view.errors()
    subtitle = f"{view.privacy}; {len(view.rows)} cells ({view.scheme.describe()}), "
    subtitle += f"{view.participants:,} participants"
    if errors is not None:
        subtitle += f"; RMSE vs truth {errors['rmse']:.1f}"
        if view.postprocess is not None:
            subtitle += f" ({view.postprocess}: {errors[f'rmse_{view.postprocess}']:.1f})"
    figure.suptitle(f"release of {view.query_id}: {view.mechanism}\n{subtitle}", fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _aspect(rows: tuple[CellRow, ...], view: ReleaseView) -> float:
    """Degrees of latitude per degree of longitude on screen: 1 / cos(mean latitude)."""
    lats = [view.scheme.center(r.cell)[0] for r in rows]
    return 1 / max(math.cos(math.radians(sum(lats) / len(lats))), 0.05)
