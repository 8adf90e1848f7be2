"""Server messages in the words of the command line.

The aggregator's messages name its RPCs (AdvanceRound, CloseQuery, ...), which is right for an
SDK user; a person at the command line needs the command to type instead. Each rule rewrites
one phrase the aggregator uses; the query id is taken from the message itself.
"""

from __future__ import annotations

import re
from typing import Final

_QUERY_ID: Final = re.compile(r"query '([^']*)'|of '([^']*)'")

RULES: Final = (
    (
        re.compile(r"ListQueries \(admin\) or ListOpenQueries shows the ids"),
        "`ldpcollect query list` shows the ids",
    ),
    (
        re.compile(r"AdvanceRound to round \d+ first"),
        "advance it first: `ldpcollect query advance --query {query}`",
    ),
    (
        re.compile(r"CloseQuery before Release"),
        "close it first: `ldpcollect query close --query {query}`",
    ),
    (
        re.compile(r"\(use CloseQuery to end a query\)"),
        "(`ldpcollect query close --query {query}` ends a query)",
    ),
    (
        re.compile(r"GetRelease returns that release"),
        "`ldpcollect release --query {query}` shows it",
    ),
    (
        re.compile(r"SetBudget can raise the budget"),
        "`ldpcollect ledger set-budget` can raise the budget",
    ),
)


def in_command_words(message: str) -> str:
    """`message` with each RPC instruction replaced by the command a person types."""
    found = _QUERY_ID.search(message)
    query = next((g for g in found.groups() if g), "ID") if found else "ID"
    for pattern, template in RULES:
        words = template.format(query=query).replace("\\", "\\\\")
        message = pattern.sub(words, message)
    return message
