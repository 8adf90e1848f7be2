"""Server messages as the command line shows them: the command to type, not the RPC."""

from __future__ import annotations

import pytest

from ldpcollect_cli.command_words import in_command_words


@pytest.mark.parametrize(
    ("server_says", "person_reads"),
    [
        (
            "no query 'nope'; ListQueries (admin) or ListOpenQueries shows the ids",
            "no query 'nope'; `ldpcollect query list` shows the ids",
        ),
        (
            "query 'sp' is in round 1 of 2; AdvanceRound to round 2 first (only devices that "
            "answer every round are counted)",
            "query 'sp' is in round 1 of 2; advance it first: `ldpcollect query advance --query "
            "sp` (only devices that answer every round are counted)",
        ),
        (
            "query 'sp' is still open (round 2 of 2); CloseQuery before Release",
            "query 'sp' is still open (round 2 of 2); close it first: `ldpcollect query close "
            "--query sp`",
        ),
        (
            "query 'rr' was already released (once per query); GetRelease returns that release",
            "query 'rr' was already released (once per query); `ldpcollect release --query rr` "
            "shows it",
        ),
        (
            "release of 'rr' refused, nothing was computed or changed: over budget. SetBudget "
            "can raise the budget (sound only if ...)",
            "release of 'rr' refused, nothing was computed or changed: over budget. `ldpcollect "
            "ledger set-budget` can raise the budget (sound only if ...)",
        ),
        ("a message without RPC names", "a message without RPC names"),
    ],
)
def test_rpc_names_become_commands(server_says: str, person_reads: str) -> None:
    assert in_command_words(server_says) == person_reads
