"""`multirow.insert_rows`: every row, in order, in as few statements as SQLite's parameter
limit allows (`executemany` steps once a row and gives up the interpreter lock each time)."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from aggregator.secure.multirow import INSERT_PARAMETERS, insert_rows


@given(
    rows=st.lists(st.tuples(st.binary(max_size=8), st.integers(-(2**63), 2**63 - 1)), max_size=1200)
)
def test_every_row_lands_in_order_in_few_statements(rows: list[tuple[bytes, int]]) -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, a BLOB, b INTEGER)")
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    insert_rows(db, "INSERT INTO t (a, b) VALUES", rows)
    db.set_trace_callback(None)
    assert db.execute("SELECT a, b FROM t ORDER BY seq").fetchall() == rows
    per_statement = INSERT_PARAMETERS // 2
    assert len(statements) == -(-len(rows) // per_statement)  # ceil: none when no rows


def test_or_ignore_keeps_the_first_of_a_key_within_and_across_statements() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    rows = [(i % 700, f"v{i}") for i in range(1_400)]  # each key twice, 499 rows a statement
    insert_rows(db, "INSERT OR IGNORE INTO t (k, v) VALUES", rows)
    assert db.execute("SELECT k, v FROM t ORDER BY k").fetchall() == rows[:700]
