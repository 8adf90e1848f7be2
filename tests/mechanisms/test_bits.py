"""Packed answer bits: MSB first, exact length, zero padding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect import bits
from ldpcollect.errors import ParameterError


@given(st.lists(st.booleans(), min_size=0, max_size=300))
def test_pack_unpack_round_trip(values: list[bool]) -> None:
    data = bits.pack(values)
    assert len(data) == bits.packed_length(len(values)) == -(-len(values) // 8)
    assert bits.unpack(data, len(values)).tolist() == values
    assert bits.pack(np.array(values, dtype=np.bool_)) == data


def test_msb_first() -> None:
    assert bits.pack([True, False, False, False, False, False, False, False, True]) == b"\x80\x80"
    assert bits.unpack(b"\x40", 3).tolist() == [False, True, False]


@given(st.integers(1, 200), st.data())
def test_wrong_length_is_rejected(n: int, data: st.DataObject) -> None:
    length = data.draw(st.integers(0, 40).filter(lambda k: k != bits.packed_length(n)))
    with pytest.raises(ParameterError) as err:
        bits.unpack(bytes(length), n)
    assert err.value.parameter == "answers"
    assert f"exactly {bits.packed_length(n)} bytes" in str(err.value)


@given(st.integers(1, 200).filter(lambda n: n % 8 != 0), st.data())
def test_nonzero_padding_is_rejected(n: int, data: st.DataObject) -> None:
    pad_bit = data.draw(st.integers(0, 7 - n % 8))  # one of the unused low bits
    packed = bytearray(bits.packed_length(n))
    packed[-1] |= 1 << pad_bit
    with pytest.raises(ParameterError, match="padding"):
        bits.unpack(bytes(packed), n)


def test_packed_length_rejects_negative() -> None:
    with pytest.raises(ParameterError):
        bits.packed_length(-1)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 700), st.sampled_from([1, 7, 8, 95 * 8, 1001, 1024, 10_000]), st.data())
def test_column_sums_count_each_bit_of_every_row(
    n_rows: int, n_bits: int, data: st.DataObject
) -> None:
    # Widths on both sides of the wide-row threshold, rows on both sides of 255 (lane carry).
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    matrix = rng.integers(0, 2, size=(n_rows, n_bits), dtype=np.uint8)
    if n_rows:
        matrix[: min(n_rows, 300)] = 1  # all-ones rows: the largest count a lane can hold
    packed = np.packbits(matrix, axis=1).tobytes()
    assert bits.column_sums(packed, n_rows, n_bits).tolist() == matrix.sum(axis=0).tolist()
