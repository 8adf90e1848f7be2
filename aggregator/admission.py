"""Admission: route each report of a submission to its query's rules, in arrival order.

A backend runs `admit` inside its transaction over the queries' states; the reports it accepts
collect in `PendingChanges` until the backend writes them with the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
    n = len(reports)
    if n == 0:
        return SubmitResult()
    query_ids = reports.query_ids
    first = query_ids[0]
    state = states.get(first)
    # The common case, a run of new valid reports for one query, in one step (a single
    # report is cheaper to check on its own).
    if (
        n > 1
        and state is not None
        and query_ids.count(first) == n
        and state.admit_all(reports, changes.accepted_for(state))
    ):
        return SubmitResult(accepted=n)
    result = SubmitResult()
    for index in range(n):
        report = reports.report(index)
        state = states.get(report.query_id)
        if state is None:
            outcome = Outcome(unknown_query(report.query_id))
        else:
            outcome = state.admit(report, changes.accepted_for(state))
        if not outcome.ok:
            result.rejected.append((index, outcome))
        elif outcome.duplicate:
            result.duplicates += 1
        else:
            result.accepted += 1
    return result
