"""The key filter in front of the key index's runs: it may let a new key through to the runs,
but never rules out a key that is held, before or after it grows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aggregator.keyfilter import MIN_BITS_PER_KEY, KeyFilter
from aggregator.keyindex import KeyIndex, halves


def _lo(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


@settings(max_examples=100)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=50), max_size=8))
def test_every_added_key_may_be_held(groups: list[list[int]]) -> None:
    keys_filter = KeyFilter()
    added: list[int] = []
    for group in groups:
        keys_filter.add(_lo(group))
        added += group
        assert len(keys_filter.maybe_held(_lo(added))) == len(added)


def test_growing_keeps_every_key_and_rules_out_most_new_ones() -> None:
    rng = np.random.default_rng(7)
    keys_filter = KeyFilter()
    held: list[np.ndarray] = []
    for _ in range(40):  # 40 x 5,000 keys: several rebuilds past the first 65,536 bits
        lo = rng.integers(0, 2**64, size=5_000, dtype=np.uint64)
        if keys_filter.fits(len(lo)):
            keys_filter.add(lo)
        else:
            keys_filter = KeyFilter.of([*held, lo], sum(map(len, held)) + len(lo))
        held.append(lo)
    every = np.concatenate(held)
    assert len(keys_filter.maybe_held(every)) == len(every)
    assert keys_filter.nbytes * 8 >= MIN_BITS_PER_KEY * len(every)
    fresh = rng.integers(0, 2**64, size=20_000, dtype=np.uint64)
    # At least 8 bits per key: a fresh key passes with probability at most about 1/8.
    assert len(keys_filter.maybe_held(fresh)) < 20_000 // 6


def test_the_index_refuses_a_held_key_among_many_new_ones() -> None:
    rng = np.random.default_rng(11)
    index = KeyIndex()
    groups = [rng.bytes(16 * 20_000) for _ in range(5)]  # 100,000 keys: the filter grows
    for packed in groups:
        keys = [packed[i : i + 16] for i in range(0, len(packed), 16)]
        new = index.new_keys(keys, packed, len(index))
        assert new is not None
        index.add_new(new)
    fresh = rng.bytes(16 * 5_000)
    for old in (groups[0][:16], groups[2][16 * 7 : 16 * 8], groups[4][-16:]):
        packed = fresh + old
        keys = [packed[i : i + 16] for i in range(0, len(packed), 16)]
        assert index.new_keys(keys, packed, len(index)) is None
    keys = [fresh[i : i + 16] for i in range(0, len(fresh), 16)]
    assert index.new_keys(keys, fresh, len(index)) is not None
    hi, _ = halves(groups[3])
    assert (index.lookup(groups[3]) >= 0).all() and len(hi) == 20_000
