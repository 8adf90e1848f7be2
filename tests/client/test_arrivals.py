"""The open-loop schedule and latency from the intended send time, on made-up clock readings."""

from __future__ import annotations

import pytest

from client.arrivals import LATE_AFTER_SECONDS, OpenLoopSchedule, Timing
from ldpcollect.errors import ParameterError


def test_request_i_is_due_at_t0_plus_i_over_rate() -> None:
    schedule = OpenLoopSchedule(rate=200.0, duration=2.0)
    assert schedule.count == 400
    assert [schedule.intended(10.0, i) for i in (0, 1, 399)] == [10.0, 10.005, 10.0 + 399 / 200]
    # whatever the earlier requests did: the schedule depends on i alone
    assert schedule.intended(10.0, 200) == pytest.approx(11.0)


@pytest.mark.parametrize(
    ("rate", "duration", "count"), [(3.0, 1.0, 3), (2.5, 1.0, 3), (0.5, 1.0, 1), (1e4, 0.1, 1000)]
)
def test_count_is_the_requests_due_before_the_end(rate: float, duration: float, count: int) -> None:
    assert OpenLoopSchedule(rate, duration).count == count


def test_a_stall_shows_on_every_request_due_during_it() -> None:
    """A server stalled from t=0 to t=1 s; one request in flight at most; rate 10/s. A
    closed-loop tool would see one slow request; from the intended time, all of them are."""
    schedule = OpenLoopSchedule(rate=10.0, duration=1.0)
    t0 = 100.0
    timings = [Timing(schedule.intended(t0, 0), t0, t0 + 1.0)]
    sent = t0 + 1.0
    for i in range(1, schedule.count):  # each waited for the slot, then took 1 ms
        timings.append(Timing(schedule.intended(t0, i), sent, sent + 0.001, True))
        sent += 0.001
    assert timings[0].latency == pytest.approx(1.0)
    assert timings[1].service_time == pytest.approx(0.001)
    assert timings[1].latency == pytest.approx(1.001 - 0.1)
    assert timings[9].latency == pytest.approx(1.009 - 0.9)
    assert all(t.late for t in timings[1:]) and not timings[0].late
    assert sorted(t.latency for t in timings)[5] > 0.5  # the median, not 1 ms


def test_late_means_sent_more_than_the_tolerance_after_the_intended_time() -> None:
    assert not Timing(1.0, 1.0 + LATE_AFTER_SECONDS / 2, 1.5).late
    assert Timing(1.0, 1.0 + 2 * LATE_AFTER_SECONDS, 1.5).late
    assert Timing(1.0, 0.9, 1.5).send_delay == 0.0
    # a request that waited for an in-flight slot is late however short the wait
    assert Timing(1.0, 1.001, 1.5, waited_for_slot=True).late


@pytest.mark.parametrize(("rate", "duration"), [(0.0, 1.0), (-1.0, 1.0), (5.0, 0.0)])
def test_bad_schedules_are_refused(rate: float, duration: float) -> None:
    with pytest.raises(ParameterError):
        OpenLoopSchedule(rate, duration)
