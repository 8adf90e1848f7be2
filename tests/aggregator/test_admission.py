"""Submissions mixing queries: `admit_many`, which takes each query's reports of several
submissions in one step, decides exactly what `admit` on one report at a time would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aggregator.admission import PendingChanges, admit_many
from aggregator.lifecycle import unknown_query
from aggregator.model import Outcome, QuerySpec, ReportIn, SubmitResult
from aggregator.rounds import QueryState, ReportColumns
from ldpcollect.mechanisms import RandomizedResponse

RR = RandomizedResponse("0.85", "0.3")
TARGETS = tuple(range(10))  # answers of 2 bytes, the last 6 bits padding
# Up to 11 queries: few enough for `_by_query`'s comparisons, or more; "nope" is unknown.
QUERIES = [f"q{i:02d}" for i in range(11)]


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


# Small pools of ids and devices, so that repeats (duplicates, reuse) are common.
report_strategy = st.builds(
    ReportIn,
    query_id=st.sampled_from([*QUERIES, "nope"]),
    round=st.sampled_from([1, 1, 1, 2]),
    pseudonym=st.integers(0, 24).map(key),
    report_id=st.integers(0, 40).map(key),
    answers=st.sampled_from([b"\x12\x40", b"\xff\xc0", b"\x00\x00", b"\x00\x01", b"\x01"]),
)


def fresh_states(n_queries: int) -> dict[str, QueryState]:
    return {
        q: QueryState.new(QuerySpec(q, "", RR, "grid", TARGETS, 1, None), 0.0)
        for q in QUERIES[:n_queries]
    }


def one_at_a_time(states: dict[str, QueryState], reports: list[ReportIn]) -> SubmitResult:
    result = SubmitResult()
    for index, report in enumerate(reports):
        state = states.get(report.query_id)
        outcome = (
            Outcome(unknown_query(report.query_id))
            if state is None
            else state.admit(report, state.new_accepted())
        )
        if not outcome.ok:
            result.rejected.append((index, outcome))
        elif outcome.duplicate:
            result.duplicates += 1
        else:
            result.accepted += 1
    return result


def summary(result: SubmitResult) -> tuple[int, int, list[tuple[int, str]]]:
    return (
        result.accepted,
        result.duplicates,
        [(i, outcome.message) for i, outcome in result.rejected],
    )


@settings(max_examples=300, deadline=None)
@given(
    n_queries=st.integers(1, len(QUERIES)),
    submissions=st.lists(st.lists(report_strategy, min_size=1, max_size=12), max_size=5),
    interleaved=st.lists(st.integers(0, 24), max_size=40),
)
def test_mixed_submissions_follow_the_one_report_rules(
    n_queries: int, submissions: list[list[ReportIn]], interleaved: list[int]
) -> None:
    # Runs of new valid reports spread over the queries in turn (the fast path), then the
    # drawn submissions, with their duplicates and defects.
    valid = [
        ReportIn(QUERIES[i % n_queries], 1, key(1000 + i), key(1000 + i), b"\x12\x40")
        for i in interleaved
    ]
    unique = list({r.report_id: r for r in valid}.values())
    batches = [unique, *submissions] if unique else submissions
    fast, slow = fresh_states(n_queries), fresh_states(n_queries)
    decided = admit_many(PendingChanges(), fast, [ReportColumns.of(b) for b in batches])
    expected = [one_at_a_time(slow, b) for b in batches]
    assert [summary(r) for r in decided] == [summary(r) for r in expected]
    for query_id, state in fast.items():
        other = slow[query_id]
        assert state.reports_per_round == other.reports_per_round
        assert len(state.report_ids) == len(other.report_ids)


def test_take_picks_none_one_or_several_reports_in_the_order_given() -> None:
    reports = [ReportIn(q, 1, key(i), key(100 + i), b"\x12\x40") for i, q in enumerate("abc")]
    columns = ReportColumns.of(reports)
    assert len(columns.take([])) == 0
    assert columns.take([1]) == ReportColumns.of([reports[1]])
    assert columns.take([2, 0]) == ReportColumns.of([reports[2], reports[0]])
