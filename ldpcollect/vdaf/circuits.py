"""The validity circuits of Prio3's variants (draft section 7.4): Count, Sum, SumVec,
Histogram and MultihotCountVec.

SumVec, Histogram and MultihotCountVec share one range check: every entry is 0 or 1, tested
with r**i * x_i * (x_i - 1) summed over chunks, one ParallelSum(Mul) call per chunk with its
own joint-randomness element r. A nonzero term survives the random weights with high
probability.
"""

from __future__ import annotations

from collections.abc import Sequence

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field
from ldpcollect.vdaf.flp import GadgetCall, Valid
from ldpcollect.vdaf.gadgets import Mul, ParallelSum, PolyEval
from ldpcollect.vdaf.native import HISTOGRAM, MULTIHOT_COUNT_VEC, SUM_VEC, NativeCircuit


class Count(Valid[int, int]):
    """A 0/1 measurement; x * x - x = 0."""

    def __init__(self, field: Field) -> None:
        self.field = field
        self.gadgets = [Mul()]
        self.gadget_calls = [1]
        self.meas_len = 1
        self.joint_rand_len = 0
        self.eval_output_len = 1
        self.output_len = 1

    def encode(self, measurement: int) -> list[int]:
        if measurement not in (0, 1):
            raise VdafError(f"a Count measurement is 0 or 1, got {measurement!r}")
        return [int(measurement)]

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall],
    ) -> list[int]:
        squared = gadgets[0]([meas[0], meas[0]])
        return [(squared - meas[0]) % self.field.modulus]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return list(meas)

    def decode(self, output: Sequence[int], num_measurements: int) -> int:
        return output[0]


class Sum(Valid[int, int]):
    """An integer in [0, max_measurement], as range-checked bits (`encode_range_checked_int`),
    each checked with the gadget x**2 - x."""

    def __init__(self, field: Field, max_measurement: int) -> None:
        if not 0 < max_measurement < field.modulus:
            raise VdafError(
                f"max_measurement must be in [1, {field.modulus}), got {max_measurement}"
            )
        self.field = field
        self.max_measurement = max_measurement
        self.bits = max_measurement.bit_length()
        self.gadgets = [PolyEval([0, -1, 1], self.bits)]
        self.gadget_calls = [self.bits]
        self.meas_len = self.bits
        self.joint_rand_len = 0
        self.eval_output_len = self.bits
        self.output_len = 1

    def encode(self, measurement: int) -> list[int]:
        return encode_range_checked_int(measurement, self.max_measurement)

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall],
    ) -> list[int]:
        return [gadgets[0]([b]) for b in meas]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return [decode_range_checked_int(self.field, meas, self.max_measurement)]

    def decode(self, output: Sequence[int], num_measurements: int) -> int:
        return output[0]


class SumVec(Valid[Sequence[int], list[int]]):
    """`length` integers, each in [0, max_measurement], each as range-checked bits."""

    def __init__(self, field: Field, length: int, max_measurement: int, chunk_length: int) -> None:
        _check_positive(length=length, max_measurement=max_measurement, chunk_length=chunk_length)
        self.field = field
        self.length = length
        self.max_measurement = max_measurement
        self.bits = max_measurement.bit_length()
        self.chunk_length = chunk_length
        self.meas_len = length * self.bits
        self.gadgets = [ParallelSum(Mul(), chunk_length)]
        self.gadget_calls = [_chunks(self.meas_len, chunk_length)]
        self.joint_rand_len = self.gadget_calls[0]
        self.eval_output_len = 1
        self.output_len = length

    def native_circuit(self) -> NativeCircuit | None:
        if self.max_measurement >= 2**62:
            return None
        return NativeCircuit(SUM_VEC, self.length, self.max_measurement, self.chunk_length)

    def encode(self, measurement: Sequence[int]) -> list[int]:
        if len(measurement) != self.length:
            raise VdafError(
                f"a SumVec measurement has {self.length} entries, got {len(measurement)}"
            )
        if self.max_measurement == 1 and all(type(x) is int for x in measurement):
            # plain ints (not bools), each its own bit: one byte each, checked at once
            data = bytes(measurement) if min(measurement, default=0) >= 0 else b"\x02"
            if max(data, default=0) <= 1:
                return list(data)
        encoded: list[int] = []
        for value in measurement:
            encoded += encode_range_checked_int(value, self.max_measurement)
        return encoded

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall],
    ) -> list[int]:
        return [bits_check(self.field, meas, joint_rand, num_shares, self.chunk_length, gadgets)]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        b = self.bits
        if b == 1:  # max_measurement 1: each entry is its own single bit, weight 1
            return list(meas)
        return [
            decode_range_checked_int(self.field, meas[i * b : (i + 1) * b], self.max_measurement)
            for i in range(self.length)
        ]

    def decode(self, output: Sequence[int], num_measurements: int) -> list[int]:
        return list(output)


class Histogram(Valid[int, list[int]]):
    """A bucket index in [0, length), one-hot encoded: every entry 0 or 1, and they sum to 1."""

    def __init__(self, field: Field, length: int, chunk_length: int) -> None:
        _check_positive(length=length, chunk_length=chunk_length)
        self.field = field
        self.length = length
        self.chunk_length = chunk_length
        self.meas_len = length
        self.gadgets = [ParallelSum(Mul(), chunk_length)]
        self.gadget_calls = [_chunks(length, chunk_length)]
        self.joint_rand_len = self.gadget_calls[0]
        self.eval_output_len = 2
        self.output_len = length

    def native_circuit(self) -> NativeCircuit | None:
        return NativeCircuit(HISTOGRAM, self.length, 0, self.chunk_length)

    def encode(self, measurement: int) -> list[int]:
        if not 0 <= measurement < self.length:
            raise VdafError(f"a Histogram bucket is in [0, {self.length}), got {measurement}")
        encoded = [0] * self.length
        encoded[measurement] = 1
        return encoded

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall],
    ) -> list[int]:
        f = self.field
        range_check = bits_check(f, meas, joint_rand, num_shares, self.chunk_length, gadgets)
        sum_check = (sum(meas) - f.inv(num_shares)) % f.modulus
        return [range_check, sum_check]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return list(meas)

    def decode(self, output: Sequence[int], num_measurements: int) -> list[int]:
        return list(output)


class MultihotCountVec(Valid[Sequence[bool], list[int]]):
    """`length` booleans of which at most `max_weight` are true: the entries, then their
    weight as range-checked bits; every element is 0 or 1 and the entries sum to the weight."""

    def __init__(self, field: Field, length: int, max_weight: int, chunk_length: int) -> None:
        _check_positive(length=length, max_weight=max_weight, chunk_length=chunk_length)
        if max_weight > length:
            raise VdafError(f"max_weight must be at most length {length}, got {max_weight}")
        if length >= field.modulus:
            raise VdafError(f"length {length} does not fit {field.name}")
        self.field = field
        self.length = length
        self.max_weight = max_weight
        self.chunk_length = chunk_length
        self.bits_for_weight = max_weight.bit_length()
        self.meas_len = length + self.bits_for_weight
        self.gadgets = [ParallelSum(Mul(), chunk_length)]
        self.gadget_calls = [_chunks(self.meas_len, chunk_length)]
        self.joint_rand_len = self.gadget_calls[0]
        self.eval_output_len = 2
        self.output_len = length

    def native_circuit(self) -> NativeCircuit | None:
        return NativeCircuit(MULTIHOT_COUNT_VEC, self.length, self.max_weight, self.chunk_length)

    def encode(self, measurement: Sequence[bool]) -> list[int]:
        if len(measurement) != self.length:
            raise VdafError(
                f"a MultihotCountVec measurement has {self.length} entries, got {len(measurement)}"
            )
        if any(x not in (0, 1) for x in measurement):
            raise VdafError("MultihotCountVec entries are booleans")
        entries = [int(x) for x in measurement]
        return entries + encode_range_checked_int(sum(entries), self.max_weight)

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall],
    ) -> list[int]:
        f = self.field
        range_check = bits_check(f, meas, joint_rand, num_shares, self.chunk_length, gadgets)
        weight = sum(meas[: self.length])
        reported = decode_range_checked_int(f, meas[self.length :], self.max_weight)
        return [range_check, (weight - reported) % f.modulus]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return list(meas[: self.length])

    def decode(self, output: Sequence[int], num_measurements: int) -> list[int]:
        return list(output)


def encode_range_checked_int(value: int, max_measurement: int) -> list[int]:
    """`value` in [0, max_measurement] as bits b_0..b_{k-1} (k = bit length of the maximum)
    with weights 1, 2, ..., 2**(k-2) and a last weight making the weights sum to the maximum:
    every 0/1 vector decodes into [0, max_measurement], and every value there is reachable."""
    if isinstance(value, bool) or not 0 <= value <= max_measurement:
        raise VdafError(f"measurement must be an integer in [0, {max_measurement}], got {value!r}")
    bits = max_measurement.bit_length()
    rest_all_ones = 2 ** (bits - 1) - 1
    last_weight = max_measurement - rest_all_ones
    if value <= rest_all_ones:
        rest, last = value, 0
    else:
        rest, last = value - last_weight, 1
    return [(rest >> i) & 1 for i in range(bits - 1)] + [last]


def decode_range_checked_int(field: Field, encoded: Sequence[int], max_measurement: int) -> int:
    """The weighted sum of `encode_range_checked_int`'s bits; linear, so it decodes shares."""
    bits = max_measurement.bit_length()
    last_weight: int = max_measurement - (2 ** (bits - 1) - 1)
    total = sum(bit << i for i, bit in enumerate(encoded[: bits - 1]))
    return (total + last_weight * encoded[bits - 1]) % field.modulus


def bits_check(
    field: Field,
    meas: Sequence[int],
    joint_rand: Sequence[int],
    num_shares: int,
    chunk_length: int,
    gadgets: Sequence[GadgetCall],
) -> int:
    """sum over chunks c of ParallelSum(Mul)(r_c**j * x_j, x_j - 1/num_shares ...).

    The gadget inputs are passed unreduced (integers congruent to the field values, possibly
    negative): the prover's recorder reduces them, and the verifier only combines them
    linearly and reduces the result, so one reduction per input is saved where it is not
    needed."""
    p = field.modulus
    shares_inv = field.inv(num_shares)
    padded = list(meas) + [0] * (len(joint_rand) * chunk_length - len(meas))
    shifted = [x - shares_inv for x in padded]
    inputs = [0] * (2 * chunk_length)
    total = 0
    for c, r in enumerate(joint_rand):
        start = c * chunk_length
        r_power = r
        powers = [0] * chunk_length
        for j in range(chunk_length):
            powers[j] = r_power
            r_power = r_power * r % p
        chunk = padded[start : start + chunk_length]
        inputs[0::2] = [w * x for w, x in zip(powers, chunk, strict=True)]
        inputs[1::2] = shifted[start : start + chunk_length]
        total += gadgets[0](list(inputs))
    return total % p


def _chunks(length: int, chunk_length: int) -> int:
    return (length + chunk_length - 1) // chunk_length


def _check_positive(**params: int) -> None:
    for name, value in params.items():
        if value < 1:
            raise VdafError(f"{name} must be at least 1, got {value}")
