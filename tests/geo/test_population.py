"""The simulated city: device locations around a centre, hotspots plus background."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpcollect.errors import ParameterError
from ldpcollect.geo import DEFAULT_CENTER, GridScheme, counts_per_target, sample_locations
from ldpcollect.geo.population import KM_PER_DEGREE, Hotspot


def to_km(lats: np.ndarray, lons: np.ndarray, center: tuple[float, float]) -> np.ndarray:
    east = (
        ((lons - center[1] + 180) % 360 - 180) * KM_PER_DEGREE * math.cos(math.radians(center[0]))
    )
    north = (lats - center[0]) * KM_PER_DEGREE
    return np.stack([east, north])


def test_default_population_is_inside_the_10km_box_and_reproducible() -> None:
    lats, lons = sample_locations(50_000, rng=np.random.default_rng(42))
    assert lats.shape == lons.shape == (50_000,)
    km = to_km(lats, lons, DEFAULT_CENTER)
    assert np.abs(km).max() <= 5.0 + 1e-9
    again = sample_locations(50_000, rng=np.random.default_rng(42))
    assert np.array_equal(again[0], lats) and np.array_equal(again[1], lons)


def test_default_population_is_concentrated_at_the_centre_hotspot() -> None:
    n = 100_000
    lats, lons = sample_locations(n, rng=np.random.default_rng(1))
    km = to_km(lats, lons, DEFAULT_CENTER)
    near = float(np.mean(np.hypot(*km) < 0.5))
    # uniform density would put pi * 0.25 / 100 = 0.8% within 500 m; the 30% hotspot of
    # sigma 0.6 km alone puts 0.30 * (1 - exp(-0.5 * (0.5/0.6)**2)) = 8.8% there.
    assert near > 0.3 * (1 - math.exp(-0.5 * (0.5 / 0.6) ** 2))
    assert near > 5 * math.pi * 0.25 / 100


def test_single_hotspot_mean_and_spread() -> None:
    n = 40_000
    spot = Hotspot(east_km=3.0, north_km=-2.0, sigma_km=1.5, weight=1.0)
    center = (-33.8568, 151.2153)
    lats, lons = sample_locations(n, center, np.random.default_rng(9), box_km=60.0, hotspots=[spot])
    east, north = to_km(lats, lons, center)
    se = 1.5 / math.sqrt(n)
    assert abs(east.mean() - 3.0) < 4 * se and abs(north.mean() + 2.0) < 4 * se
    se_sd = 1.5 / math.sqrt(2 * n)
    assert abs(east.std() - 1.5) < 4 * se_sd and abs(north.std() - 1.5) < 4 * se_sd


def test_background_only_is_uniform() -> None:
    n = 40_000
    lats, lons = sample_locations(n, rng=np.random.default_rng(2), hotspots=())
    east, north = to_km(lats, lons, DEFAULT_CENTER)
    sd = 10.0 / math.sqrt(12)
    assert abs(east.mean()) < 4 * sd / math.sqrt(n) and abs(north.mean()) < 4 * sd / math.sqrt(n)
    assert abs(east.var() - sd**2) < 4 * math.sqrt(80.0 / 9.0 / n) * 10


def test_center_on_the_antimeridian_wraps_longitudes() -> None:
    _, lons = sample_locations(2000, (0.0, 179.99), np.random.default_rng(4))
    assert lons.min() >= -180.0 and lons.max() < 180.0
    assert (lons < 0).any() and (lons > 0).any()


def test_zero_devices() -> None:
    lats, lons = sample_locations(0, rng=np.random.default_rng(0))
    assert lats.size == lons.size == 0


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"n": -1}, "n"),
        ({"n": 2.5}, "n"),
        ({"n": 10, "center": (86.0, 0.0)}, "center"),
        ({"n": 10, "center": (0.0, 200.0)}, "lon"),
        ({"n": 10, "box_km": 0.0}, "box_km"),
        ({"n": 10, "hotspots": [Hotspot(9.0, 0.0, 1.0, 0.5)]}, "hotspots"),
        ({"n": 10, "hotspots": [Hotspot(0.0, 0.0, 0.0, 0.5)]}, "hotspots"),
        ({"n": 10, "hotspots": [Hotspot(0.0, 0.0, 1.0, 0.7)] * 2}, "hotspots"),
    ],
)
def test_invalid_parameters(kwargs: dict[str, object], parameter: str) -> None:
    with pytest.raises(ParameterError) as info:
        sample_locations(**kwargs)  # type: ignore[arg-type]
    assert info.value.parameter == parameter


def test_counts_per_target_matches_a_plain_count() -> None:
    lats, lons = sample_locations(20_000, rng=np.random.default_rng(8))
    scheme = GridScheme()
    ids = scheme.locate_many(lats, lons)
    targets = [*scheme.targets_in_bbox(48.85, 2.28, 48.87, 2.31)[::-1], 0]
    counts = counts_per_target(ids, targets)
    id_list = ids.tolist()
    assert counts.tolist() == [id_list.count(t) for t in targets]
    assert counts.sum() > 0 and counts[-1] == 0
    with pytest.raises(ParameterError, match="targets"):
        counts_per_target(ids, [1, 1])
