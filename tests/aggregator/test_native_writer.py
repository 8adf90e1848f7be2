"""The compiled writer kernels (aggregator/_native_writer.c) against their Python references:
the key table against `KeyIndex` (and a dict), the bit sums against `ldpcollect.bits`, the
fixed-width join against `b"".join`. Hypothesis runs derandomized under CI=true."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aggregator import _native_writer, keytable
from aggregator.keyindex import KeyIndex
from aggregator.keytable import KeyTable, column_sums, join_fixed, split_fixed
from aggregator.rounds import QueryState
from ldpcollect import bits
from tests.aggregator.store_contract import SP, spec

# Keys whose halves collide a lot: equal first 8 bytes, equal last 8 bytes.
HALVES = [0, 1, 2**63, 2**64 - 1]
POOL = [a.to_bytes(8, "little") + b.to_bytes(8, "little") for a in HALVES for b in HALVES]


def test_the_writer_runs_the_compiled_module() -> None:
    """CI must not pass on a Python fallback: the extension is built and the state uses it."""
    assert Path(_native_writer.__file__ or "").suffix == ".so"
    state = QueryState.new(spec("q", SP), 0.0)
    assert isinstance(state.report_ids, KeyTable)
    assert all(isinstance(d, KeyTable) for d in state.devices_by_round)
    assert keytable.column_sums.__module__ == "aggregator.keytable"


key_strategy = st.one_of(st.sampled_from(POOL), st.binary(min_size=16, max_size=16))
op_strategy = st.one_of(
    st.tuples(st.just("add"), key_strategy),
    st.tuples(st.just("group"), st.lists(key_strategy, min_size=1, max_size=12)),
    st.tuples(st.just("bulk"), st.lists(key_strategy, min_size=1, max_size=12)),
    st.tuples(st.just("withdraw"), st.integers(0, 12)),
)


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(op_strategy, max_size=40))
def test_the_key_table_answers_like_the_reference_index(ops: list[tuple[str, object]]) -> None:
    table, reference = KeyTable(), KeyIndex(tail_limit=3, run_keys=2)
    order: list[bytes] = []  # keys in the order added: a key's value is its position
    for op, arg in ops:
        if op == "add":
            assert isinstance(arg, bytes)
            if arg not in order:
                table.add(arg, len(order))
                reference.add(arg, len(order))
                order.append(arg)
        elif op == "group":
            assert isinstance(arg, list)
            packed = b"".join(arg)
            added = table.add_all_new(packed, len(order))
            assert added == reference.add_all_new(packed, len(order))
            assert added == (len(set(arg)) == len(arg) and not set(arg) & set(order))
            if added:
                order += arg
        elif op == "bulk":
            assert isinstance(arg, list)
            new = [k for k in dict.fromkeys(arg) if k not in order]
            if new:
                table.bulk_add(b"".join(new), len(order))
                reference.bulk_add(b"".join(new), len(order))
                order += new
        else:
            assert isinstance(arg, int)
            newest = order[len(order) - arg :] if arg else []
            random.Random(arg).shuffle(newest)  # any order; also a key not held
            packed = b"".join(newest) + b"\xee" * 16
            table.discard_many(packed)
            reference.discard_many(packed)
            del order[len(order) - len(newest) :]
        assert len(table) == len(reference) == len(order)
    for key in [*POOL, *order]:
        expected = order.index(key) if key in order else None
        assert table.get(key) == reference.get(key) == expected
        assert (key in table) == (expected is not None)
    probe = b"".join([*POOL, *order])
    assert table.lookup_values(probe).tolist() == reference.lookup(probe).tolist()


def test_the_key_table_refuses_what_would_break_positions() -> None:
    table = KeyTable()
    table.bulk_add(b"".join(POOL[:4]), 0)
    with pytest.raises(ValueError, match="positions"):
        table.add(POOL[5], 7)
    with pytest.raises(ValueError, match="newest"):
        table.discard_many(POOL[0])
    with pytest.raises(ValueError, match="multiple of 16"):
        table.lookup(b"x" * 17)
    assert table.get(b"short") is None
    assert len(table) == 4


def test_many_keys_sharing_one_half_grow_the_table_and_stay_apart() -> None:
    """Thousands of keys equal in their first (or last) 8 bytes: every one is found, none is
    confused with another, through several growths of the table and a withdrawal."""
    rng = random.Random(7)
    same_first = [bytes(8) + rng.randbytes(8) for _ in range(20_000)]
    same_last = [rng.randbytes(8) + bytes(8) for _ in range(20_000)]
    keys = list(dict.fromkeys(same_first + same_last))
    table = KeyTable()
    half = len(keys) // 2
    assert table.add_all_new(b"".join(keys[:half]), 0)
    assert not table.add_all_new(b"".join([*keys[half:], keys[0]]), half)  # one held: none
    assert len(table) == half
    assert table.add_all_new(b"".join(keys[half:]), half)
    assert table.lookup_values(b"".join(keys)).tolist() == list(range(len(keys)))
    table.discard_many(b"".join(keys[half:]))
    assert table.lookup_values(b"".join(keys)).tolist() == [
        *range(half),
        *[-1] * (len(keys) - half),
    ]
    table.clear()
    assert len(table) == 0 and table.get(keys[0]) is None


@settings(max_examples=200, deadline=None)
@given(
    n_bits=st.integers(1, 1100),
    n_rows=st.integers(0, 600),
    density=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_column_sums_match_the_reference(
    n_bits: int, n_rows: int, density: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    unpacked = rng.random((n_rows, n_bits)) < density
    packed = np.packbits(unpacked, axis=1).tobytes()
    expected = bits.column_sums(packed, n_rows, n_bits)
    assert column_sums(packed, n_rows, n_bits).tolist() == expected.tolist()
    assert expected.tolist() == unpacked.sum(axis=0).tolist()


@given(items=st.lists(st.binary(min_size=0, max_size=5), max_size=20), width=st.integers(0, 5))
def test_join_fixed_joins_only_items_of_one_width(items: list[bytes], width: int) -> None:
    expected = b"".join(items) if all(len(i) == width for i in items) else None
    assert join_fixed(items, width) == expected
    if expected is not None and width:
        assert split_fixed(expected, width) == items  # and back


def test_split_fixed_refuses_a_column_that_is_not_whole_values() -> None:
    with pytest.raises(ValueError, match="not values of 3 bytes"):
        split_fixed(b"abcd", 3)
    with pytest.raises(ValueError):
        split_fixed(b"", 0)
