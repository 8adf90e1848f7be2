"""A release as one self-contained interactive HTML page: inline SVG and a little JavaScript.

Nothing is fetched (no tiles, scripts, fonts or styles from the network): the page renders
offline. Each cell is an SVG polygon in an equirectangular projection scaled by cos(mean
latitude); a menu switches the colouring (estimate, interval width, truth, post-processed),
hovering a cell shows its numbers, and the axes are labelled in degrees.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from pathlib import Path

from client.atomic import write_atomic
from ldpcollect_cli.release_map import log_threshold, panels, shade
from ldpcollect_cli.release_view import ReleaseView

WIDTH = 760  # drawing area in px; the height follows the region's shape
MARGIN = 56

_SCRIPT = """
const data = JSON.parse(document.getElementById("release-data").textContent);
const stops = [[68,1,84],[59,82,139],[33,145,140],[94,201,98],[253,231,37]];
function colour(t) {
  t = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(t)), f = t - i;
  const c = stops[i].map((v, k) => Math.round(v + f * (stops[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
const cells = document.querySelectorAll("#cells polygon");
const tip = document.getElementById("tip");
function paint(layer) {
  const shown = data.layers[layer];
  cells.forEach((p, i) => p.setAttribute("fill", colour(shown.shade[i])));
  document.getElementById("low").textContent = shown.low.toFixed(1);
  document.getElementById("high").textContent =
    shown.high.toFixed(1) + (shown.scale === "log" ? " (log scale)" : "");
}
document.getElementById("layer").addEventListener("change", e => paint(e.target.value));
cells.forEach((p, i) => {
  p.addEventListener("mousemove", e => {
    const r = data.rows[i];
    tip.textContent = Object.entries(r).map(([k, v]) => `${k}: ${v}`).join("\\n");
    tip.style.left = (e.pageX + 14) + "px";
    tip.style.top = (e.pageY + 14) + "px";
    tip.style.display = "block";
  });
  p.addEventListener("mouseleave", () => { tip.style.display = "none"; });
});
paint(document.getElementById("layer").value);
"""

_STYLE = """
body { font-family: sans-serif; margin: 1em; color: #222; }
h1 { font-size: 1.1em; margin: 0; } p { margin: 0.3em 0; }
#cells polygon { stroke: #555; stroke-width: 0.4; }
#cells polygon:hover { stroke: #e00; stroke-width: 2; }
#tip { position: absolute; display: none; white-space: pre; background: #fff;
  border: 1px solid #888; padding: 4px 6px; font: 12px monospace; pointer-events: none; }
.axis { font-size: 11px; fill: #333; } .grid { stroke: #ccc; stroke-width: 0.5; }
.legend { font-size: 12px; }
"""


def render(view: ReleaseView) -> str:
    shapes = [view.scheme.boundary(r.cell) for r in view.rows]
    lats = [lat for shape in shapes for lat, _ in shape]
    lons = [lon for shape in shapes for _, lon in shape]
    south, north, west, east = min(lats), max(lats), min(lons), max(lons)
    squeeze = max(math.cos(math.radians((south + north) / 2)), 0.05)
    scale = WIDTH / max((east - west) * squeeze, 1e-12)
    height = max(120.0, (north - south) * scale)
    if (north - south) * scale > 3 * WIDTH:  # a tall, narrow region: fit the height instead
        scale = 3 * WIDTH / (north - south)
        height = 3 * WIDTH

    def x(lon: float) -> float:
        return MARGIN + (lon - west) * squeeze * scale

    def y(lat: float) -> float:
        return MARGIN + (north - lat) * scale

    shown = panels(view)
    counts = [values for _, values, cmap in shown if cmap == "viridis"]
    count_low = min(min(values) for values in counts)
    count_high = max(max(values) for values in counts)
    linthresh = log_threshold(counts[0], count_high)
    layers: dict[str, dict[str, object]] = {}
    for title, values, cmap in shown:
        shared = cmap == "viridis"  # estimate, truth and post-processed share one scale
        low, high = (count_low, count_high) if shared else (min(values), max(values))
        log = linthresh if shared else None
        layers[title] = {
            "shade": [round(shade(v, low, high, log), 4) for v in values],
            "low": low,
            "high": high,
            "scale": "log" if log is not None else "linear",
        }
    first = next(iter(layers.values()))["shade"]
    assert isinstance(first, list)
    polygons = "\n".join(
        '<polygon points="'
        + " ".join(f"{x(lon):.2f},{y(lat):.2f}" for lat, lon in shape)
        + f'" fill="{_colour(t)}"/>'  # painted already: the page shows the map without JS
        for shape, t in zip(shapes, first, strict=True)
    )
    options = "".join(f'<option value="{html.escape(t)}">{html.escape(t)}</option>' for t in layers)
    payload = {"layers": layers, "rows": [_tooltip(view, i) for i in range(len(view.rows))]}
    data_json = json.dumps(payload, allow_nan=False).replace("</", "<\\/")
    svg_width, svg_height = WIDTH + 2 * MARGIN, height + 2 * MARGIN
    axes = _axes(west, east, south, north, x, y, svg_width, svg_height)
    title = html.escape(f"release of {view.query_id}: {view.mechanism}")
    errors = view.errors()
    accuracy = "" if errors is None else f"; RMSE vs truth {errors['rmse']:.1f}"
    about = html.escape(
        f"{view.privacy}; {len(view.rows)} cells ({view.scheme.describe()}), "
        f"{view.participants:,} participants{accuracy}"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{_STYLE}</style></head>
<body>
<h1>{title}</h1>
<p>{about}</p>
<p class="legend">colour by <select id="layer">{options}</select>
 <span id="low"></span> <svg width="160" height="12" aria-hidden="true">
 <defs><linearGradient id="ramp"><stop offset="0" stop-color="rgb(68,1,84)"/>
 <stop offset="0.25" stop-color="rgb(59,82,139)"/><stop offset="0.5" stop-color="rgb(33,145,140)"/>
 <stop offset="0.75" stop-color="rgb(94,201,98)"/><stop offset="1" stop-color="rgb(253,231,37)"/>
 </linearGradient></defs><rect width="160" height="12" fill="url(#ramp)"/></svg>
 <span id="high"></span> devices; hover a cell for its numbers</p>
<svg width="{svg_width:.0f}" height="{svg_height:.0f}" role="img" aria-label="{title}">
{axes}
<g id="cells">
{polygons}
</g>
</svg>
<div id="tip"></div>
<script type="application/json" id="release-data">{data_json}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


RAMP = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
"""viridis at five stops; the page's script interpolates the same stops."""


def _colour(t: float) -> str:
    position = min(1.0, max(0.0, t)) * (len(RAMP) - 1)
    i = min(len(RAMP) - 2, math.floor(position))
    f = position - i
    r, g, b = (round(a + f * (c - a)) for a, c in zip(RAMP[i], RAMP[i + 1], strict=True))
    return f"rgb({r},{g},{b})"


def write_html(view: ReleaseView, path: Path) -> None:
    write_atomic(path, render(view).encode())


def _tooltip(view: ReleaseView, index: int) -> dict[str, object]:
    row = view.rows[index]
    lat, lon = view.scheme.center(row.cell)
    shown: dict[str, object] = {
        "cell": view.cell_text(row.cell),
        "centre": f"{lat:.5f}, {lon:.5f}",
        "estimate": round(row.estimate, 1),
        "std error": round(row.std_error, 1),
        "95% interval": f"[{row.ci_low:.1f}, {row.ci_high:.1f}]",
        "participants": row.participants,
    }
    if row.truth is not None:
        shown["truth"] = row.truth
    if view.postprocess is not None and row.adjusted is not None:
        shown[view.postprocess] = round(row.adjusted, 1)
    return shown


def _axes(
    west: float,
    east: float,
    south: float,
    north: float,
    x: Callable[[float], float],
    y: Callable[[float], float],
    width: float,
    height: float,
) -> str:
    """Grid lines with degree labels at round steps along the bottom and left edges."""
    parts: list[str] = []
    for value in _ticks(west, east):
        px = x(value)
        parts.append(f'<line class="grid" x1="{px:.1f}" y1="{MARGIN}" x2="{px:.1f}" ')
        parts[-1] += f'y2="{height - MARGIN:.1f}"/>'
        parts.append(
            f'<text class="axis" x="{px:.1f}" y="{height - MARGIN + 16:.1f}" '
            f'text-anchor="middle">{value:g}°</text>'
        )
    for value in _ticks(south, north):
        py = y(value)
        parts.append(f'<line class="grid" x1="{MARGIN}" y1="{py:.1f}" x2="{width - MARGIN:.1f}" ')
        parts[-1] += f'y2="{py:.1f}"/>'
        parts.append(
            f'<text class="axis" x="{MARGIN - 4}" y="{py + 4:.1f}" text-anchor="end">'
            f"{value:g}°</text>"
        )
    parts.append(
        f'<text class="axis" x="{width / 2:.0f}" y="{height - 8:.0f}" text-anchor="middle">'
        "longitude (degrees)</text>"
    )
    parts.append(
        f'<text class="axis" transform="translate(12 {height / 2:.0f}) rotate(-90)" '
        'text-anchor="middle">latitude (degrees)</text>'
    )
    return "\n".join(parts)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round values between low and high."""
    span = high - low
    if span <= 0:
        return [low]
    raw = span / count
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * step:
            step *= factor
            break
    first = math.ceil(low / step) * step
    digits = max(0, -math.floor(math.log10(step)))
    return [round(first + k * step, digits) for k in range(int((high - first) / step) + 1)]
