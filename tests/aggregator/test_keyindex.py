"""The compact key index: the same answers as a dict, whatever mix of tail and sorted runs
holds the keys, and two keys sharing their first 8 bytes are never one key."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aggregator.keyindex import KeyIndex, _keyed_key, halves

# Keys from a small pool whose first 8 bytes collide a lot (64-bit collisions on purpose).
HIS = [0, 1, 2**63, 2**64 - 1]
LOS = [0, 7, 2**64 - 1]
KEYS = [hi.to_bytes(8, "little") + lo.to_bytes(8, "little") for hi in HIS for lo in LOS]

op_strategy = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(KEYS)),
    st.tuples(st.just("run"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=5)),
    st.tuples(st.just("bulk"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=5)),
    st.tuples(st.just("discard"), st.lists(st.sampled_from(KEYS), max_size=4)),
)


@settings(max_examples=300)
@given(tail=st.integers(1, 4), run=st.integers(1, 6), ops=st.lists(op_strategy, max_size=30))
def test_the_index_answers_like_a_dict(tail: int, run: int, ops: list[tuple[str, object]]) -> None:
    index = KeyIndex(tail_limit=tail, run_keys=run)
    model: dict[bytes, int] = {}
    counter = 0
    for op, arg in ops:
        if op == "add":
            assert isinstance(arg, bytes)
            if arg not in model:
                index.add(arg, counter)
                model[arg] = counter
                counter += 1
            continue
        assert isinstance(arg, list)
        keys = list(dict.fromkeys(k for k in arg if k not in model))
        if op == "discard":
            index.discard_many(b"".join(arg))
            for k in arg:
                model.pop(k, None)
        elif keys and op == "run":
            new = index.new_keys(keys, b"".join(keys), counter)
            assert new is not None
            index.add_new(new)
        elif keys:
            index.bulk_add(b"".join(keys), counter)
        if op != "discard":
            model.update((k, counter + i) for i, k in enumerate(keys))
            counter += len(keys)
        refused = index.new_keys(arg, b"".join(arg), counter) is None
        assert refused == (any(k in model for k in arg) or len(set(arg)) < len(arg))
    assert len(index) == len(model)
    for k in KEYS:
        assert index.get(k) == model.get(k)
    found = index.lookup(b"".join(KEYS))
    assert found.tolist() == [model.get(k, -1) for k in KEYS]


@pytest.mark.parametrize("tail", [1, 2, 4096])
def test_keys_sharing_their_first_8_bytes_stay_two_keys(tail: int) -> None:
    index = KeyIndex(tail_limit=tail)
    first = b"\xab" * 8 + b"\x01" * 8
    second = b"\xab" * 8 + b"\x02" * 8  # the same 64-bit prefix, a different key
    index.add(first, 5)
    assert index.get(second) is None
    new = index.new_keys([second], second, 9)
    assert new is not None
    index.add_new(new)
    assert (index.get(first), index.get(second)) == (5, 9)
    index.discard_many(first)
    assert (index.get(first), index.get(second)) == (None, 9)


@pytest.mark.parametrize("skewed", [False, True])
def test_a_long_run_with_a_directory_finds_every_key_and_no_other(skewed: bool) -> None:
    """Runs past 65,536 keys are searched through a directory of top-bit ranges; keys packed
    into a few ranges (skewed) and 64-bit collisions must change nothing."""
    rng = np.random.default_rng(7)
    n = 70_000
    keys = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    if skewed:
        keys[: n // 2, 4:8] = 0x5A  # the top 32 bits of `hi` (bytes 4-7) shared by half
    keys[1, :8] = keys[0, :8]  # a 64-bit collision inside the run
    index = KeyIndex()
    index.bulk_add(keys.tobytes(), 0)
    held = [bytes(k) for k in keys]
    absent = rng.integers(0, 256, size=(500, 16), dtype=np.uint8)
    absent[:250, :8] = keys[:250, :8]  # the same first 8 bytes as held keys, not held
    probes = held[::97] + [bytes(k) for k in absent]
    expected = [i for i in range(0, n, 97)] + [-1] * len(absent)
    assert index.lookup(b"".join(probes)).tolist() == expected
    assert [index.get(k) for k in probes[:50]] == [i for i in range(0, 50 * 97, 97)]
    assert index.new_keys(probes[-250:], b"".join(probes[-250:]), n) is not None
    assert index.new_keys(probes[:3], b"".join(probes[:3]), n) is None


def test_keys_chosen_to_share_a_bucket_are_spread_by_the_keyed_mix() -> None:
    """A client choosing report ids that share their first 8 bytes and count up in the last 8
    (the worst case for an index ordered by the first bytes) finds them spread over buckets:
    the top 20 bits of `hi` of 4,096 such keys almost all differ (about 8 collisions expected
    for random keys), and `hi` stays a bijection of the first 8 bytes for a fixed last 8."""
    n = 4096
    same_first = b"".join(b"\x00" * 8 + i.to_bytes(8, "little") for i in range(n))
    hi, lo = halves(same_first)
    assert len(np.unique(lo)) == n
    assert len(np.unique(hi >> np.uint64(44))) >= n - 100
    same_last = b"".join(i.to_bytes(8, "little") + b"\x07" * 8 for i in range(n))
    hi, _ = halves(same_last)
    assert len(np.unique(hi)) == n
    assert len(np.unique(hi >> np.uint64(44))) >= n - 100
    index = KeyIndex(tail_limit=64)
    index.bulk_add(same_first, 0)
    assert [index.get(same_first[16 * i : 16 * i + 16]) for i in range(0, n, 97)] == list(
        range(0, n, 97)
    )


@settings(max_examples=200)
@given(st.lists(st.binary(min_size=16, max_size=16), min_size=1, max_size=50))
def test_one_key_is_mixed_as_a_batch_mixes_it(keys: list[bytes]) -> None:
    """`get` mixes one key with Python ints, lookups mix many with numpy: the same `hi`."""
    hi, lo = halves(b"".join(keys))
    assert [_keyed_key(key) for key in keys] == list(zip(hi.tolist(), lo.tolist(), strict=True))
