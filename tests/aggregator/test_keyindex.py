"""The compact key index: the same answers as a dict, whatever mix of tail and sorted runs
holds the keys, and two keys sharing their first 8 bytes are never one key."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aggregator.keyindex import KeyIndex

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
@given(tail=st.integers(1, 4), ops=st.lists(op_strategy, max_size=30))
def test_the_index_answers_like_a_dict(tail: int, ops: list[tuple[str, object]]) -> None:
    index = KeyIndex(tail_limit=tail)
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
            index.add_run(keys, b"".join(keys), counter)
        elif keys:
            index.bulk_add(b"".join(keys), counter)
        if op != "discard":
            model.update((k, counter + i) for i, k in enumerate(keys))
            counter += len(keys)
        assert index.any_of(arg, b"".join(arg)) == any(k in model for k in arg)
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
    assert not index.any_of([second], second)
    index.add_run([second], second, 9)
    assert (index.get(first), index.get(second)) == (5, 9)
    index.discard_many(first)
    assert (index.get(first), index.get(second)) == (None, 9)
