"""The query lifecycle: OPEN (rounds 1..n in turn) -> CLOSED -> RELEASED; before its release
a query may be deleted instead (undo: its reports go with it, nothing is charged).

Which change each state allows, and the refusal a person reads otherwise. Every store backend
applies these to its own `QueryState` inside its transaction, so the rules and their messages
exist once (docs/design.md, "Protocol").
"""

from __future__ import annotations

from aggregator.errors import AlreadyExists, FailedPrecondition, NotFound, shown
from aggregator.model import QueryStatus
from aggregator.rounds import QueryState


def unknown_query(query_id: str) -> NotFound:
    return NotFound(
        f"no query {shown(query_id)}; ListQueries (admin) or ListOpenQueries shows the ids"
    )


def duplicate_query(query_id: str) -> AlreadyExists:
    return AlreadyExists(f"query {query_id!r} already exists; choose another query_id")


def advance_round(state: QueryState) -> None:
    """Move an open query from round 1 to round 2 (Sampling Privacy)."""
    if state.status != QueryStatus.OPEN or state.current_round >= state.rounds:
        where = (
            f"is {state.status.name.lower()}"
            if state.status != QueryStatus.OPEN
            else f"is in its last round ({state.current_round} of {state.rounds})"
        )
        raise FailedPrecondition(
            f"cannot advance query {state.spec.query_id!r}: it {where}; "
            f"only an open Sampling Privacy query in round 1 advances "
            f"(use CloseQuery to end a query)"
        )
    state.current_round += 1


def close(state: QueryState) -> None:
    """Stop accepting reports; only a query in its last round closes."""
    query_id = state.spec.query_id
    if state.status != QueryStatus.OPEN:
        raise FailedPrecondition(f"query {query_id!r} is already {state.status.name.lower()}")
    if state.current_round < state.rounds:
        raise FailedPrecondition(
            f"query {query_id!r} is in round {state.current_round} of {state.rounds}; "
            f"AdvanceRound to round {state.rounds} first (only devices that answer "
            f"every round are counted)"
        )
    state.status = QueryStatus.CLOSED


def check_releasable(state: QueryState) -> None:
    """A query releases once: closed, with at least `min_reports` devices that completed."""
    query_id = state.spec.query_id
    if state.status == QueryStatus.RELEASED:
        raise FailedPrecondition(
            f"query {query_id!r} was already released (once per query); "
            f"GetRelease returns that release"
        )
    if state.status != QueryStatus.CLOSED:
        raise FailedPrecondition(
            f"query {query_id!r} is still open (round {state.current_round} of "
            f"{state.rounds}); CloseQuery before Release"
        )
    if state.completed_devices < state.spec.min_reports:
        raise FailedPrecondition(
            f"query {query_id!r} has {state.completed_devices} devices that completed "
            f"every round, below its min_reports {state.spec.min_reports}; "
            f"it cannot be released"
        )


def check_deletable(state: QueryState) -> None:
    """Only a query not yet released can be deleted: a release is published and charged to the
    ledger, and deleting it would undo neither."""
    if state.status == QueryStatus.RELEASED:
        raise FailedPrecondition(
            f"query {state.spec.query_id!r} was released: a release cannot be undone (it is "
            f"published and charged to the privacy ledger); only a query not yet released "
            f"can be deleted"
        )


def mark_released(state: QueryState) -> None:
    """After the release is recorded: the individual reports are gone from memory too."""
    state.forget_reports()
    state.status = QueryStatus.RELEASED
