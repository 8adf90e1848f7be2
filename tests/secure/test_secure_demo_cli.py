"""`ldpcollect demo --secure --json` through the real CLI: a leader and a helper process,
sealed uploads, both noised shares opened by the collector; the JSON has the trusted demo's
shape plus the views."""

from __future__ import annotations

import json

from tests.serving import run_cli


def test_secure_demo_json_has_the_demo_shape_and_three_views() -> None:
    done = run_cli("unused", "demo", "--secure", "-n", "150", "--json", "--top", "3")
    data = json.loads(done.stdout)
    assert data["devices"] == 150
    assert set(data["releases"]) == {"rr", "sp"}
    for name in ("rr", "sp"):
        estimates = data["releases"][name]["estimates"]
        assert len(estimates) == 100
        assert 0.0 <= data["coverage_95"][name] <= 1.0
        assert data["rmse"][name] >= 0.0
        assert set(data["views"][name]) == {"aggregator", "collector+aggregator", "public"}
        views = data["views"][name]  # after a public release: through the other's noise
        assert views["aggregator"]["epsilon"] == views["collector+aggregator"]["epsilon"]
    assert len(data["busiest"]) == 3


def test_secure_demo_with_tokens_counts_every_enrolled_device() -> None:
    done = run_cli("unused", "demo", "--secure", "--tokens", "-n", "100", "--json")
    data = json.loads(done.stdout)
    for name in ("rr", "sp"):
        assert data["releases"][name]["participants"] == 100
