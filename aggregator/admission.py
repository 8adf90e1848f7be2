"""Admission: route each report of a submission to its query's rules, in arrival order.

A backend runs `admit` inside its transaction over the queries' states; the reports it accepts
collect in `PendingChanges` until the backend writes them with the transaction.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from aggregator.lifecycle import unknown_query
from aggregator.model import Outcome, SubmitResult
from aggregator.rounds import Accepted, Progress, QueryState, ReportColumns


@dataclass
class PendingChanges:
    """The changes of one transaction: reports accepted and not yet written, the queries it
    touched, and what it takes to withdraw it all from memory if the transaction fails."""

    accepted: dict[str, Accepted] = field(default_factory=dict)  # by query id, not yet written
    touched: dict[str, QueryState] = field(default_factory=dict)
    report_count: int = 0
    # For `withdraw`: every Accepted of the transaction in order, each touched query's progress
    # before it, queries it created, and queries whose held reports it dropped (a release).
    every_accepted: list[tuple[QueryState, Accepted]] = field(default_factory=list)
    before: dict[str, Progress] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)
    # Queries the transaction deletes (also in `forgotten`: a failure reads them again).
    deleted: set[str] = field(default_factory=set)

    def touch(self, state: QueryState) -> None:
        """Note that the transaction changes `state` (call before changing it)."""
        query_id = state.spec.query_id
        if query_id not in self.touched:
            self.touched[query_id] = state
            self.before[query_id] = state.progress()

    def accepted_for(self, state: QueryState) -> Accepted:
        """The reports this transaction accepts for `state`'s query (created on first use)."""
        query_id = state.spec.query_id
        accepted = self.accepted.get(query_id)
        if accepted is None:
            self.touch(state)
            accepted = self.accepted[query_id] = state.new_accepted()
            self.every_accepted.append((state, accepted))
        return accepted

    def withdraw(self, states: dict[str, QueryState]) -> set[str]:
        """Undo the transaction's changes to `states` in memory (it failed, nothing was
        written). Returns the queries that must be read again from storage: those whose
        held reports were dropped, which memory alone cannot bring back."""
        for state, accepted in reversed(self.every_accepted):
            state.withdraw(accepted)
        for query_id, before in self.before.items():
            self.touched[query_id].rewind(before)
        for query_id in self.created:
            states.pop(query_id, None)
            self.touched.pop(query_id, None)
        return self.forgotten - self.created


def admit(
    changes: PendingChanges, states: Mapping[str, QueryState], reports: ReportColumns
) -> SubmitResult:
    """Apply the report rules to each report as if it were submitted alone, in order."""
    return admit_many(changes, states, [reports])[0]


def admit_many(
    changes: PendingChanges, states: Mapping[str, QueryState], submissions: list[ReportColumns]
) -> list[SubmitResult]:
    """`admit` for several submissions in a row, one result each, decided together.

    Queries do not interact, so the reports of each query can be taken on their own, in
    order. The common case, runs of new valid reports, is decided in one step per query for
    all the submissions (`QueryState.admit_all`); a query whose reports do not all pass falls
    back to one step per submission, and a submission that still does not to one report at a
    time: the same outcomes as `admit` on each report in turn.
    """
    whole = submissions[0] if len(submissions) == 1 else ReportColumns.concat(submissions)
    starts = list(itertools.accumulate((len(s) for s in submissions), initial=0))
    outcomes: list[Outcome | None] = [None] * len(whole)  # None: accepted in a run
    for query_id, indices in _by_query(whole.query_ids).items():
        state = states.get(query_id)
        if state is None:
            for i in indices:
                outcomes[i] = Outcome(unknown_query(query_id))
            continue
        run = whole if len(indices) == len(whole) else whole.take(indices)
        if len(indices) > 1 and state.admit_all(run, changes.accepted_for(state)):
            continue
        for part in _within(indices, starts) if len(submissions) > 1 else [indices]:
            subset = whole if len(part) == len(whole) else whole.take(part)
            if len(part) > 1 and state.admit_all(subset, changes.accepted_for(state)):
                continue
            for i in part:
                outcomes[i] = state.admit(whole.report(i), changes.accepted_for(state))
    if outcomes.count(None) == len(outcomes):  # all accepted in runs (the common case)
        return [SubmitResult(accepted=stop - start) for start, stop in itertools.pairwise(starts)]
    results = []
    for start, stop in itertools.pairwise(starts):
        result = SubmitResult()
        for index, outcome in enumerate(outcomes[start:stop]):
            if outcome is None:
                result.accepted += 1
            elif not outcome.ok:
                result.rejected.append((index, outcome))
            elif outcome.duplicate:
                result.duplicates += 1
            else:
                result.accepted += 1
        results.append(result)
    return results


def _by_query(query_ids: list[str]) -> dict[str, list[int]]:
    """Positions of each query's reports, in order (one query: no per-report step)."""
    first = query_ids[0] if query_ids else ""
    if query_ids.count(first) == len(query_ids):
        return {first: list(range(len(query_ids)))} if query_ids else {}
    distinct = dict.fromkeys(query_ids)
    if len(distinct) <= _FEW_QUERIES:
        # A batch mixing a few queries: one comparison in C per query and report.
        column = np.array(query_ids, dtype=object)
        return {q: np.flatnonzero(column == q).tolist() for q in distinct}
    groups: dict[str, list[int]] = {}
    for i, query_id in enumerate(query_ids):
        groups.setdefault(query_id, []).append(i)
    return groups


# Up to this many queries in one submission, `_by_query` compares the whole column with each.
_FEW_QUERIES = 8


def _within(indices: list[int], starts: list[int]) -> list[list[int]]:
    """`indices` (ascending) in parts, one per submission they fall in (`starts`: the first
    index of each submission)."""
    parts: dict[int, list[int]] = {}
    for i in indices:
        parts.setdefault(bisect.bisect_right(starts, i) - 1, []).append(i)
    return list(parts.values())
