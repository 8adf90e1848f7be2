"""Privacy accounting: conversions, release costs, the ledger and device budgets."""
