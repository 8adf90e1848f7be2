"""A release as one self-contained interactive HTML page: inline SVG and a little JavaScript.

The map is in Web Mercator, the projection of the usual map tiles, so a basemap lines up under
the cells: light tiles from CARTO (OpenStreetMap data), attributed on the page. They are the
only thing the page fetches (`TILE_URL`; no scripts, fonts or styles), added by its script and
shown only once loaded; offline (a tile that fails is dropped), without JavaScript, or with
the basemap switched off, it still shows the cells over a plain outline of land and water
drawn from the land mask (`ldpcollect_cli.land`). A menu switches the colouring (estimate, interval
width, truth, post-processed) with the PNG's colours and scales (`release_map`), the legend
labels its ramp, cells whose 95% interval includes 0 are hatched, and hovering a cell shows
its numbers.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from pathlib import Path

from client.atomic import write_atomic
from ldpcollect_cli.release_map import (
    HATCH_NOTE,
    RAMPS,
    ColourScale,
    Kind,
    colour,
    includes_zero,
    panels,
    scales,
    tick_text,
)
from ldpcollect_cli.release_view import ReleaseView

WIDTH = 760  # drawing area in px; the height follows the region's shape
MARGIN = 56
TILE = 256
TILE_URL = "https://{s}.basemaps.cartocdn.com/light_all/{z}/{x}/{y}.png"
TILE_HOSTS = "abcd"
ATTRIBUTION = (
    'basemap &copy; <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> '
    'contributors &copy; <a href="https://carto.com/attributions">CARTO</a>'
)
MAX_TILES = 100

_SCRIPT = """
const data = JSON.parse(document.getElementById("release-data").textContent);
const tiles = document.getElementById("tiles");
data.tiles.forEach(t => {  // shown once loaded; a tile that cannot load (offline) is dropped
  const image = document.createElementNS(document.querySelector("svg").namespaceURI, "image");
  image.setAttribute("href", t.href);
  for (const k of ["x", "y"]) image.setAttribute(k, t[k]);
  image.setAttribute("width", t.size);
  image.setAttribute("height", t.size);
  image.style.visibility = "hidden";
  image.addEventListener("load", () => { image.style.visibility = "visible"; });
  image.addEventListener("error", () => image.remove());
  tiles.appendChild(image);
});
const cells = document.querySelectorAll("#cells polygon");
const tip = document.getElementById("tip");
function paint(layer) {
  const shown = data.layers[layer];
  cells.forEach((p, i) => p.setAttribute("fill", shown.fill[i]));
  document.getElementById("legend").innerHTML = shown.legend;
}
document.getElementById("layer").addEventListener("change", e => paint(e.target.value));
document.getElementById("basemap").addEventListener("change", e => {
  document.getElementById("tiles").style.display = e.target.checked ? "" : "none";
});
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
#cells polygon { stroke: #444; stroke-width: 0.5; fill-opacity: 0.85; }
#cells polygon:hover { stroke: #e00; stroke-width: 2; }
#hatches polygon { fill: url(#hatch); stroke: none; pointer-events: none; }
#coast path { fill: none; stroke: #8c99a6; stroke-width: 0.8; }
#tip { position: absolute; display: none; white-space: pre; background: #fff;
  border: 1px solid #888; padding: 4px 6px; font: 12px monospace; pointer-events: none; }
.axis { font-size: 11px; fill: #333; } .grid { stroke: #ccc; stroke-width: 0.5; }
.legend { font-size: 12px; } .attribution { font-size: 11px; color: #555; }
.ramp { display: inline-block; vertical-align: middle; }
.hatch-key { display: inline-block; width: 14px; height: 10px; border: 1px solid #444;
  background: repeating-linear-gradient(45deg, #222 0 1px, transparent 1px 4px);
  vertical-align: middle; }
"""


class _Projection:
    """Web Mercator scaled to the drawing: x(lon), y(lat) in px, and the tile zoom that fits."""

    def __init__(self, west: float, east: float, south: float, north: float) -> None:
        self.west, self.north = west, north
        dx = self._x0(east) - self._x0(west)
        dy = self._y0(south) - self._y0(north)
        self.scale = min(WIDTH / max(dx, 1e-12), 3 * WIDTH / max(dy, 1e-12))
        self.width = dx * self.scale
        self.height = max(120.0, dy * self.scale)
        # the next zoom up: tiles shown at 128-256 px, sharp rather than blown up
        self.zoom = max(0, min(19, math.ceil(math.log2(self.scale))))

    @staticmethod
    def _x0(lon: float) -> float:
        return (lon + 180) / 360 * TILE

    @staticmethod
    def _y0(lat: float) -> float:
        clipped = math.radians(max(-85.05, min(85.05, lat)))
        return (1 - math.log(math.tan(math.pi / 4 + clipped / 2)) / math.pi) / 2 * TILE

    def x(self, lon: float) -> float:
        return MARGIN + (self._x0(lon) - self._x0(self.west)) * self.scale

    def y(self, lat: float) -> float:
        return MARGIN + (self._y0(lat) - self._y0(self.north)) * self.scale

    def tiles(self) -> list[dict[str, object]]:
        """The tiles covering the drawing, placed in px (none past MAX_TILES)."""
        n = 2**self.zoom
        size = TILE / n * self.scale
        x_start = self._x0(self.west)
        y_start = self._y0(self.north)
        first_x = math.floor(x_start * n / TILE)
        last_x = math.floor((x_start + self.width / self.scale) * n / TILE)
        first_y = max(math.floor(y_start * n / TILE), 0)
        last_y = min(math.floor((y_start + self.height / self.scale) * n / TILE), n - 1)
        if (last_x - first_x + 1) * (last_y - first_y + 1) > MAX_TILES:
            return []
        placed: list[dict[str, object]] = []
        for tx in range(first_x, last_x + 1):
            for ty in range(first_y, last_y + 1):
                host = TILE_HOSTS[(tx + ty) % len(TILE_HOSTS)]
                placed.append(
                    {
                        "href": TILE_URL.format(s=host, z=self.zoom, x=tx % n, y=ty),
                        "x": round(MARGIN + (tx * TILE / n - x_start) * self.scale, 2),
                        "y": round(MARGIN + (ty * TILE / n - y_start) * self.scale, 2),
                        "size": round(size + 0.5, 2),
                    }
                )
        return placed


def render(view: ReleaseView) -> str:
    shapes = [view.scheme.boundary(r.cell) for r in view.rows]
    lats = [lat for shape in shapes for lat, _ in shape]
    lons = [lon for shape in shapes for _, lon in shape]
    pad_x = (max(lons) - min(lons)) * 0.04 or 0.01
    pad_y = (max(lats) - min(lats)) * 0.04 or 0.01
    west, east = min(lons) - pad_x, max(lons) + pad_x
    south, north = min(lats) - pad_y, max(lats) + pad_y
    projection = _Projection(west, east, south, north)
    x, y = projection.x, projection.y

    shown = panels(view)
    scale_of = scales(shown)
    layers: dict[str, dict[str, object]] = {}
    for title, values, kind in shown:
        scale = scale_of[kind]
        layers[title] = {
            "fill": [_rgb(kind, scale.shade(v)) for v in values],
            "legend": _legend(scale),
        }
    first_title = shown[0][0]
    first_fill = layers[first_title]["fill"]
    assert isinstance(first_fill, list)

    def points(shape: list[tuple[float, float]]) -> str:
        return " ".join(f"{x(lon):.2f},{y(lat):.2f}" for lat, lon in shape)

    polygons = "\n".join(
        f'<polygon points="{points(shape)}" fill="{fill}"/>'  # painted: shows without JS
        for shape, fill in zip(shapes, first_fill, strict=True)
    )
    hatched = [s for s, r in zip(shapes, view.rows, strict=True) if includes_zero(r)]
    hatches = "\n".join(f'<polygon points="{points(shape)}"/>' for shape in hatched)
    options = "".join(f'<option value="{html.escape(t)}">{html.escape(t)}</option>' for t in layers)
    payload = {
        "layers": layers,
        "rows": [_tooltip(view, i) for i in range(len(view.rows))],
        "tiles": projection.tiles(),
    }
    data_json = json.dumps(payload, allow_nan=False).replace("</", "<\\/")
    svg_width = projection.width + 2 * MARGIN
    svg_height = projection.height + 2 * MARGIN
    axes = _axes(west, east, south, north, x, y, svg_width, svg_height)
    title = html.escape(f"release of {view.query_id}: {view.mechanism}")
    errors = view.errors()
    accuracy = "" if errors is None else f"; RMSE vs truth {errors['rmse']:.1f}"
    about = html.escape(
        f"{view.privacy}; {len(view.rows)} cells ({view.scheme.describe()}), "
        f"{view.participants:,} participants{accuracy}"
    )
    hatch_note = (
        f'<p class="legend"><span class="hatch-key"></span> {len(hatched)} of '
        f"{len(view.rows)} cells {html.escape(HATCH_NOTE)}</p>"
        if hatched
        else ""
    )
    clip = (
        f'<clipPath id="frame"><rect x="{MARGIN}" y="{MARGIN}" '
        f'width="{projection.width:.2f}" height="{projection.height:.2f}"/></clipPath>'
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{_STYLE}</style></head>
<body>
<h1>{title}</h1>
<p>{about}</p>
<p class="legend">colour by <select id="layer">{options}</select>
 <span id="legend">{layers[first_title]["legend"]}</span>;
 <label><input type="checkbox" id="basemap" checked> basemap</label>; hover a cell for its
 numbers</p>
{hatch_note}
<svg width="{svg_width:.0f}" height="{svg_height:.0f}" role="img" aria-label="{title}">
<defs>{clip}
<pattern id="hatch" patternUnits="userSpaceOnUse" width="9" height="9"
 patternTransform="rotate(45)"><line x1="1" y1="0" x2="1" y2="9" stroke="#fff"
 stroke-width="1.2"/><line x1="2.2" y1="0" x2="2.2" y2="9" stroke="#111"
 stroke-width="1"/></pattern></defs>
<rect x="{MARGIN}" y="{MARGIN}" width="{projection.width:.2f}"
 height="{projection.height:.2f}" fill="#f4f4f2"/>
<g id="coast" clip-path="url(#frame)">{_coast(west, east, south, north, x, y)}</g>
<g id="tiles" clip-path="url(#frame)"></g>
{axes}
<g id="cells">
{polygons}
</g>
<g id="hatches">
{hatches}
</g>
</svg>
<p class="attribution">{ATTRIBUTION} (fetched when online; offline, the grey line is
 the coast from the GLOBE land mask)</p>
<div id="tip"></div>
<script type="application/json" id="release-data">{data_json}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def _rgb(kind: Kind, t: float) -> str:
    r, g, b = colour(kind, t)
    return f"rgb({r},{g},{b})"


def _legend(scale: ColourScale) -> str:
    """The ramp with its labelled ticks and unit, as the PNG's colour bar labels them."""
    width, height, pad = 220, 12, 16
    ramp = RAMPS[scale.kind]
    stops = "".join(
        f'<stop offset="{k / (len(ramp) - 1):.2f}" stop-color="rgb{rgb}"/>'
        for k, rgb in enumerate(ramp)
    )
    marks = []
    for t in scale.ticks():
        at = pad + scale.shade(t) * width
        marks.append(
            f'<line x1="{at:.1f}" y1="{height}" x2="{at:.1f}" y2="{height + 4}" stroke="#333"/>'
            f'<text x="{at:.1f}" y="28" text-anchor="middle" font-size="10">'
            f"{tick_text(t)}</text>"
        )
    return (
        f'<svg class="ramp" width="{width + 2 * pad}" height="32" aria-hidden="true">'
        f'<defs><linearGradient id="ramp-{scale.kind}">{stops}</linearGradient></defs>'
        f'<rect x="{pad}" width="{width}" height="{height}" fill="url(#ramp-{scale.kind})"/>'
        f"{''.join(marks)}</svg> {html.escape(scale.label)}"
    )


def _coast(
    west: float,
    east: float,
    south: float,
    north: float,
    x: Callable[[float], float],
    y: Callable[[float], float],
) -> str:
    """SVG paths of the land/water line over the box (none without the land data)."""
    from ldpcollect_cli.land import land_window

    window = land_window(west, east, south, north)
    if window is None:
        return ""
    lons, lats, part = window
    if part.all() or not part.any() or min(part.shape) < 2:
        return ""
    import contourpy
    import numpy as np

    generator = contourpy.contour_generator(x=lons, y=lats, z=part.astype(float))
    paths = []
    for line in generator.lines(0.5):
        coords = " L".join(f"{x(lon):.1f},{y(lat):.1f}" for lon, lat in np.asarray(line))
        paths.append(f'<path d="M{coords}"/>')
    return "\n".join(paths)


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
        "95% interval": f"[{row.ci_low:.1f}, {row.ci_high:.1f}]"
        + (" includes 0" if includes_zero(row) else ""),
        "query participants": row.participants,
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
