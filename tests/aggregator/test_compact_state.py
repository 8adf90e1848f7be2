"""The one-report rules on a query state whose indexes spill into sorted runs at once.

A store's indexes keep a few thousand recent keys in a dict before sorting them into runs, so
the store suite (few reports) mostly sees the dict. Here every index holds one to three keys
in its dict, so runs, merges, SP's waiting round-1 answers and the rebuild from log entries
are all exercised against the plain model of the rules, with report ids and pseudonyms that
share their first 8 bytes (`key(i)` is zero there): 64-bit collisions on every lookup.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aggregator import rounds
from aggregator.admission import PendingChanges, admit
from aggregator.keyindex import KeyIndex
from aggregator.model import ReportIn
from aggregator.rounds import LogEntry, QueryState, ReportColumns
from ldpcollect.mechanisms import Mechanism
from tests.aggregator.store_contract import (
    RR,
    SP,
    Model,
    report_strategy,
    spec,
    steps_strategy,
    summary,
)


def compact_state(mech: Mechanism, tail: int) -> QueryState:
    state = QueryState.new(spec("q", mech), 0.0)
    state.report_ids = KeyIndex(tail_limit=tail)
    state.devices_by_round = [KeyIndex(tail_limit=tail) for _ in range(mech.rounds)]
    return state


def submit(state: QueryState, run: list[ReportIn], log: list[LogEntry]) -> tuple[object, ...]:
    changes = PendingChanges()
    result = admit(changes, {"q": state}, ReportColumns.of(run))
    for accepted in changes.accepted.values():
        state.add_completed(accepted)
        if accepted.count:
            log.append(
                LogEntry(
                    accepted.round,
                    accepted.count,
                    b"".join(accepted.report_ids),
                    b"".join(accepted.pseudonyms),
                    b"".join(accepted.answers),
                )
            )
    return summary(result)


def assert_matches(state: QueryState, model: Model) -> None:
    assert state.reports_per_round == model.per_round[: model.rounds]
    assert state.completed_devices == model.completed
    assert state.counts.tolist() == model.counts[: model.rounds]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    use_sp=st.booleans(),
    tail=st.integers(1, 3),
    steps=steps_strategy,
    replay=st.lists(report_strategy, max_size=6),
)
def test_compact_indexes_follow_the_one_report_rules_and_rebuild_from_the_log(
    use_sp: bool, tail: int, steps: list[list[ReportIn] | None], replay: list[ReportIn]
) -> None:
    mech = SP if use_sp else RR
    model = Model(rounds=mech.rounds)
    state = compact_state(mech, tail)
    log: list[LogEntry] = []
    sent: list[ReportIn] = []
    for step in steps:
        if step is None:
            if model.rounds == 2 and model.current_round == 1:
                state.current_round = model.current_round = 2
            continue
        run = model.in_round(step)
        assert submit(state, run, log) == model.submit(run)
        sent += run
    assert_matches(state, model)
    # A state rebuilt from the log entries (as at a restart) decides the same way.
    rebuilt = compact_state(mech, tail)
    rebuilt.current_round = state.current_round
    rebuilt.reports_per_round = list(state.reports_per_round)
    rebuilt.completed_devices = state.completed_devices
    rebuilt.counts = state.counts.copy()
    rebuilt.restore(log)
    for run in (sent, model.in_round(replay)):
        if run:
            assert submit(rebuilt, run, log) == model.submit(run)
    assert_matches(rebuilt, model)


def test_report_ids_differing_only_after_their_first_8_bytes_are_two_reports() -> None:
    state = compact_state(RR, 1)
    prefix = b"\x11" * 8
    first = ReportIn("q", 1, b"\x01" * 16, prefix + b"\x00" * 8, b"\xa5\x40")
    second = ReportIn("q", 1, b"\x02" * 16, prefix + b"\x01" * 8, b"\x00\x00")
    log: list[LogEntry] = []
    assert submit(state, [first], log) == (1, 0, [])
    assert submit(state, [second], log) == (1, 0, [])  # not a duplicate, not a conflict
    assert submit(state, [first, second], log) == (0, 2, [])
    assert state.reports_per_round == [2]


def test_a_restart_builds_its_indexes_on_two_threads_to_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Above `_PARALLEL_BUILD_FROM` keys a restore builds the report-id index and each round's
    device index at once on two threads; each must hold exactly the keys of a one-by-one build."""
    rng = random.Random(7)
    entries = [
        LogEntry(round_, n, rng.randbytes(16 * n), rng.randbytes(16 * n), bytes(n * 13))
        for round_, n in ((1, 300), (1, 200), (2, 250))
    ]
    states = []
    for threshold in (10**9, 0):
        monkeypatch.setattr(rounds, "_PARALLEL_BUILD_FROM", threshold)
        state = compact_state(SP, 4)
        state.restore(entries, hold=False)
        states.append(state)
    one_by_one, parallel = states
    ids = b"".join(e.report_ids for e in entries)
    for index in range(0, len(ids), 16):
        key = ids[index : index + 16]
        assert parallel.report_ids.get(key) == one_by_one.report_ids.get(key) == index // 16
    for round_ in (1, 2):
        keys = b"".join(e.pseudonyms for e in entries if e.round == round_)
        for index in range(0, len(keys), 16):
            key = keys[index : index + 16]
            expected = one_by_one.devices_by_round[round_ - 1].get(key)
            assert expected == index // 16
            assert parallel.devices_by_round[round_ - 1].get(key) == expected
    assert len(parallel.report_ids) == len(ids) // 16
