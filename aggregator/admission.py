"""Admission: route each report of a submission to its query's rules, in arrival order.

A backend runs `admit` inside its transaction over the queries' states; the reports it accepts
collect in `PendingChanges` until the backend writes them with the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aggregator.lifecycle import unknown_query
from aggregator.model import Outcome, SubmitResult
from aggregator.rounds import Accepted, QueryState, ReportColumns


@dataclass
class PendingChanges:
    """Changes of one transaction not yet written: accepted reports and touched queries."""

    accepted: dict[str, Accepted] = field(default_factory=dict)  # by query id
    touched: dict[str, QueryState] = field(default_factory=dict)
    report_count: int = 0

    def accepted_for(self, state: QueryState) -> Accepted:
        """The reports this transaction accepts for `state`'s query (created on first use)."""
        query_id = state.spec.query_id
        accepted = self.accepted.get(query_id)
        if accepted is None:
            accepted = self.accepted[query_id] = state.new_accepted()
            self.touched[query_id] = state
        return accepted


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
