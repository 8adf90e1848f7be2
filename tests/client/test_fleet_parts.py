"""Pure parts of the fleet runner: ground truth, fleet state file, CSV locations, leakage."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from client.fleet import FleetConfig, ground_truth, new_fleet
from client.fleet_state import FleetQuery, FleetState
from client.leakage import query_cost
from client.locations_csv import read_locations_csv
from client.retry import RetryPolicy
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy


def _record(locations: list[int], answering: list[bool], acked: list[list[bool]]) -> FleetQuery:
    n, rounds = len(locations), len(acked)
    return FleetQuery(
        fingerprint="f",
        charge_epsilon=1.0,
        charge_delta=0.0,
        location_ids=np.asarray(locations, dtype=np.uint64),
        answering=np.asarray(answering),
        pseudonyms=np.zeros((n, 16), dtype=np.uint8),
        report_ids=np.zeros((rounds, n, 16), dtype=np.uint8),
        answers=np.zeros((rounds, n, 1), dtype=np.uint8),
        acked=np.asarray(acked),
    )


def test_ground_truth_counts_only_completed_devices_in_target_order() -> None:
    record = _record(
        locations=[7, 3, 7, 9, 3, 7],
        answering=[True, True, True, True, False, True],
        acked=[[True, True, True, True, True, False], [True, False, True, True, True, True]],
    )
    counts, completed, outside = ground_truth(record, (7, 3, 5), upto_round=2)
    # device 1 missed round 2, device 4 declined, device 5 missed round 1, device 3 is at 9
    assert counts.tolist() == [2, 0, 0]
    assert completed == 3
    assert outside == 1
    counts_r1, completed_r1, _ = ground_truth(record, (7, 3, 5), upto_round=1)
    assert counts_r1.tolist() == [2, 1, 0]
    assert completed_r1 == 4


def test_fleet_state_file_round_trip(tmp_path: Path) -> None:
    fleet = new_fleet([48.85, 48.86], [2.29, 2.30], budget_epsilon=4.0)
    record = _record([1, 2], [True, False], [[True, False], [False, False]])
    record.report_ids[:] = np.arange(2 * 2 * 16, dtype=np.uint8).reshape(2, 2, 16)
    record.charge_delta = 0.5
    fleet.add_query("q1", record)
    path = tmp_path / "fleet.npz"
    fleet.save(path)
    loaded = FleetState.load(path)
    assert loaded.budget_epsilon == 4.0
    assert loaded.order == ["q1"]
    got = loaded.queries["q1"]
    assert (got.charge_epsilon, got.charge_delta) == (1.0, 0.5)
    assert np.array_equal(got.report_ids, record.report_ids)
    assert np.array_equal(got.acked, record.acked)
    assert np.array_equal(loaded.lats, fleet.lats)
    eps, delta = loaded.spent()
    assert eps.tolist() == [1.0, 0.0] and delta.tolist() == [0.5, 0.0]


def test_fleet_state_rejects_a_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "x.npz"
    path.write_bytes(b"not a zip")
    with pytest.raises(ParameterError, match="fleet state"):
        FleetState.load(path)


def test_csv_with_and_without_header(tmp_path: Path) -> None:
    with_header = tmp_path / "a.csv"
    with_header.write_text("lon,lat\n2.29,48.85\n2.30,48.86\n")
    rows = read_locations_csv(with_header)
    assert rows.lats.tolist() == [48.85, 48.86] and rows.lons.tolist() == [2.29, 2.30]
    bare = tmp_path / "b.csv"
    bare.write_text("48.85,2.29\n\n48.86,2.30\n")
    rows = read_locations_csv(bare)
    assert rows.lats.tolist() == [48.85, 48.86] and rows.lons.tolist() == [2.29, 2.30]
    named = tmp_path / "c.csv"
    named.write_text("name,longitude,latitude\nJFK,-73.78,40.64\n")
    rows = read_locations_csv(named)
    assert (rows.lats.tolist(), rows.lons.tolist()) == ([40.64], [-73.78])


def test_the_same_content_has_the_same_hash(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("48.85,2.29\n")
    (tmp_path / "b.csv").write_text("48.85,2.29\n")
    (tmp_path / "c.csv").write_text("48.85,2.30\n")
    a, b, c = (read_locations_csv(tmp_path / f"{name}.csv").sha256 for name in "abc")
    assert a == b != c


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "--csv must be a file with at least one lat,lon row, got '{path}': the file is empty"),
        ("lat,lon\n\n", "it has a header but no rows"),
        ("lat,lon\n48.85,2.29\n\n91,2.0\n", "{path} line 4: lat must be in [-90, 90] degrees"),
        ("lat,lon\n2.29,190\n", "{path} line 2: lon must be in [-180, 180] degrees, got 190.0"),
        ("48.85,2.29\n\n\n48.86\n", "{path} line 4 must be two numbers: lat,lon in degrees"),
        ("lat,lon\n120.5,40.1\n", "got 120.5: lat,lon look swapped"),
        ("name,city\nx,y\n", "line 2"),
        ("name,lat\n", "a header naming both lat and lon"),
    ],
)
def test_csv_errors_name_the_file_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ParameterError) as raised:
        read_locations_csv(path)
    assert words.format(path=path) in str(raised.value)


def test_local_cost_rr_one_target_is_eps0_two_targets_two_bits() -> None:
    rr = RandomizedResponse("0.85", "0.3")
    assert query_cost(rr, 1).epsilon == pytest.approx(2.9901612285045354, abs=1e-9)
    # a move between two targets flips two bits: ln(0.895/0.045) + ln(0.955/0.105)
    both = math.log(0.895 / 0.045) + math.log(0.955 / 0.105)
    assert query_cost(rr, 100).epsilon == pytest.approx(both, abs=1e-9)
    assert query_cost(rr, 100).delta == 0.0


def test_local_cost_of_linked_sp_rounds_is_zero_epsilon_delta_s() -> None:
    cost = query_cost(SamplingPrivacy(Fraction(1, 2)), 100)
    assert (cost.epsilon, cost.delta) == (0.0, 0.5)


def test_config_and_retry_reject_bad_values() -> None:
    with pytest.raises(ParameterError, match="mode"):
        FleetConfig(mode="carrier-pigeon")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="concurrency"):
        FleetConfig(concurrency=0)
    with pytest.raises(ParameterError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


def test_backoff_grows_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=6, initial_backoff=0.1, max_backoff=0.4, jitter=0.0)
    assert list(policy.delays()) == [0.1, 0.2, 0.4, 0.4, 0.4]


def test_back_off_waits_each_delay_then_gives_the_reports_up_once_retries_are_spent() -> None:
    """Both uploaders (trusted and secure) send refused-for-now reports again through it."""
    import asyncio

    from client.fleet import RoundResult, back_off

    result = RoundResult("q", 1, "batch")
    failed: list[tuple[int, str, str]] = []
    delays = iter([0.0, 0.0])

    async def attempts() -> list[bool]:
        fail = lambda n, code, message: failed.append((n, code, message))  # noqa: E731
        return [await back_off(delays, result, fail, 7) for _ in range(3)]

    assert asyncio.run(attempts()) == [True, True, False]
    assert result.retries == 2
    assert failed == [(7, "RESOURCE_EXHAUSTED", "retries exhausted")]
