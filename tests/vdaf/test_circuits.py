"""The circuits' encodings: range-checked integers, one-hot and multi-hot vectors, and the
precise refusal of measurements a circuit cannot encode."""

from __future__ import annotations

import random

import pytest

from ldpcollect.vdaf.circuits import (
    Count,
    Histogram,
    MultihotCountVec,
    Sum,
    SumVec,
    decode_range_checked_int,
    encode_range_checked_int,
)
from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field64, Field128


@pytest.mark.parametrize("max_measurement", [1, 2, 3, 4, 7, 8, 255, 256, 1337])
def test_range_checked_ints_round_trip_over_their_whole_range(max_measurement: int) -> None:
    for value in range(max_measurement + 1):
        bits = encode_range_checked_int(value, max_measurement)
        assert len(bits) == max_measurement.bit_length()
        assert set(bits) <= {0, 1}
        assert decode_range_checked_int(Field64, bits, max_measurement) == value


@pytest.mark.parametrize("max_measurement", [1, 5, 8, 1337])
def test_every_bit_vector_decodes_inside_the_range(max_measurement: int) -> None:
    """Why the encoding is a range proof: no 0/1 vector decodes past the maximum."""
    k = max_measurement.bit_length()
    decoded = {
        decode_range_checked_int(Field64, [(v >> i) & 1 for i in range(k)], max_measurement)
        for v in range(2**k)
    }
    assert decoded == set(range(max_measurement + 1))


def test_decoding_is_linear_so_it_decodes_shares() -> None:
    rng = random.Random(7)
    p = Field128.modulus
    bits = encode_range_checked_int(900, 1337)
    first = [rng.randrange(p) for _ in bits]
    second = [(b - f) % p for b, f in zip(bits, first, strict=True)]
    total = decode_range_checked_int(Field128, first, 1337) + decode_range_checked_int(
        Field128, second, 1337
    )
    assert total % p == 900


def test_out_of_range_measurements_are_refused_with_the_range() -> None:
    with pytest.raises(VdafError, match=r"a Count measurement is 0 or 1, got 2"):
        Count(Field64).encode(2)
    with pytest.raises(VdafError, match=r"integer in \[0, 255\], got 256"):
        Sum(Field64, 255).encode(256)
    with pytest.raises(VdafError, match=r"integer in \[0, 255\], got -1"):
        Sum(Field64, 255).encode(-1)
    with pytest.raises(VdafError, match=r"has 3 entries, got 2"):
        SumVec(Field128, 3, 7, 2).encode([1, 2])
    with pytest.raises(VdafError, match=r"bucket is in \[0, 10\), got 10"):
        Histogram(Field128, 10, 3).encode(10)
    with pytest.raises(VdafError, match=r"integer in \[0, 2\], got 3"):
        MultihotCountVec(Field128, 4, 2, 2).encode([True, True, True, False])
    with pytest.raises(VdafError, match=r"has 4 entries, got 3"):
        MultihotCountVec(Field128, 4, 2, 2).encode([True, False, False])


def test_bad_circuit_parameters_are_refused() -> None:
    with pytest.raises(VdafError, match="chunk_length must be at least 1, got 0"):
        Histogram(Field128, 10, 0)
    with pytest.raises(VdafError, match="max_weight must be at most length 4, got 5"):
        MultihotCountVec(Field128, 4, 5, 2)
    with pytest.raises(VdafError, match="max_measurement must be in"):
        Sum(Field64, 0)


def test_encodings_and_truncation() -> None:
    assert Histogram(Field128, 5, 2).encode(3) == [0, 0, 0, 1, 0]
    multihot = MultihotCountVec(Field128, 4, 2, 2)
    encoded = multihot.encode([True, False, True, False])
    assert encoded == [1, 0, 1, 0, 1, 1]  # entries, then weight 2 = 1*1 + 1*1 (weights 1, 1)
    assert multihot.truncate(encoded) == [1, 0, 1, 0]
    sum_vec = SumVec(Field128, 2, 5, 3)
    assert sum_vec.truncate(sum_vec.encode([5, 2])) == [5, 2]
