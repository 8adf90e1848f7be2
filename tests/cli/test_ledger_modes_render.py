"""The ledger as a person reads it names every budget mode in words, and says nothing false
about the Renyi filter (no "inf" epsilon left, claims at the budget's delta)."""

from __future__ import annotations

import pytest
from rich.console import Console

from aggregator.protoconv import ledger_to_proto
from aggregator.release import StoredLedger
from ldpcollect.accounting.ledger import PrivacyLedger
from ldpcollect_cli.service_render import ledger_tables


def rendered_ledger(ledger: PrivacyLedger) -> tuple[str, list[str]]:
    message = ledger_to_proto(StoredLedger(ledger).to_body())
    console = Console(width=160, record=True, color_system=None)
    for table in ledger_tables(message, 160):
        console.print(table)
    return console.export_text(), list(message.notes)


@pytest.mark.parametrize(
    ("ledger", "mode"),
    [
        (PrivacyLedger(), "none"),
        (PrivacyLedger(epsilon=2.0, delta=0.0), "pure"),
        (PrivacyLedger(epsilon=2.0, delta=1e-6), "zcdp"),
        (PrivacyLedger(epsilon=2.0, delta=1e-6, filter="renyi"), "renyi"),
    ],
)
def test_every_budget_mode_is_named_in_words(ledger: PrivacyLedger, mode: str) -> None:
    assert ledger.mode == mode
    text, _ = rendered_ledger(ledger)
    assert f"{mode} - " in text
    assert "unknown mode" not in text


def test_a_renyi_budget_states_no_infinite_epsilon_left_and_its_own_delta() -> None:
    text, notes = rendered_ledger(PrivacyLedger(epsilon=2.0, delta=1e-6, filter="renyi"))
    remaining_row = next(line for line in text.splitlines() if "remaining as epsilon" in line)
    assert "inf" not in remaining_row
    assert "fraction of the budget" in remaining_row
    assert any("(the budget's delta)" in note for note in notes)
    assert not any("no (epsilon, delta) budget is set" in note for note in notes)


def test_the_ledger_and_claims_tables_round_every_loss_up() -> None:
    """A loss of 0.81203 printed to 4 digits is 0.8121, never 0.812 (below the bound)."""
    from ldpcollect.v1 import ldpcollect_pb2 as pb
    from ldpcollect_cli.service_render import claims_table

    claim = pb.PrivacyClaim(
        view="public", guarantee="pure", epsilon=0.81203, delta=1e-6,
        epsilon_bun_steinke=20.0501, rho=4.41801, pure_epsilon=5.19792,
    )  # fmt: skip
    ledger = pb.Ledger(budget_mode="none", currency="rho")
    entry = ledger.entries.add(query_id="q", charged=0.25118)
    entry.claims.append(claim)
    console = Console(width=200, record=True, color_system=None)
    for table in [*ledger_tables(ledger, 200), claims_table([claim])]:
        console.print(table)
    text = console.export_text()
    for up in ("0.8121", "20.06", "4.419", "5.198", "0.2512"):
        assert up in text, up
    for below in ("0.812 ", "20.05", "4.418"):
        assert below not in text, below
