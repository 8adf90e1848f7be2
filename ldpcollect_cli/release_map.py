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


def write_png(view: ReleaseView, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    shapes = [[(lon, lat) for lat, lon in view.scheme.boundary(r.cell)] for r in view.rows]
    shown = panels(view)
    counts = [s for s in shown if s[2] == "viridis"]
    low = min(min(values) for _, values, _ in counts)
    high = max(max(values) for _, values, _ in counts)
    aspect = _aspect(view.rows, view)
    columns = 2 if len(shown) == 4 else len(shown)
    lines = -(-len(shown) // columns)
    figure, axes = plt.subplots(
        lines,
        columns,
        figsize=(5.2 * columns, 1.0 + 4.6 * lines),
        squeeze=False,
        layout="constrained",
    )
    for ax, (title, values, cmap) in zip(axes.ravel(), shown, strict=True):
        collection = PolyCollection(shapes, array=values, cmap=cmap, edgecolors="0.35")
        collection.set_linewidth(0.3)
        if cmap == "viridis":
            collection.set_clim(low, high)
        ax.add_collection(collection)
        ax.autoscale_view()
        ax.set_aspect(aspect)
        ax.set_title(title)
        ax.set_xlabel("longitude (degrees)")
        ax.set_ylabel("latitude (degrees)")
        ax.ticklabel_format(useOffset=False)
        ax.tick_params(axis="x", labelrotation=30)
        figure.colorbar(collection, ax=ax, shrink=0.8, label="devices")
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
