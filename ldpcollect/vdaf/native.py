"""The compiled kernels (`ldpcollect.vdaf._native`, C sources in `native_c/`, built by pip
at install) behind the reference modules' signatures.

The pure-Python modules beside this one stay the reference: every function here returns
what its namesake there returns (tests/vdaf/test_native.py checks that on random inputs and
on the draft-20 vectors). The compiled module is imported unconditionally: a build without
it fails at import, never silently falls back to Python.

`NativeCircuit` names the circuits the compiled Prio3 implements: those whose only gadget
is the range check's ParallelSum(Mul) over Field128 (SumVec, Histogram, MultihotCountVec
and the Sampling Privacy pair), one proof.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ldpcollect.vdaf import _native
from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, Field64, Field128

SUM_VEC, HISTOGRAM, MULTIHOT_COUNT_VEC, SAMPLING_PAIR = 0, 1, 2, 3

REFERENCE_SWITCH = "LDPCOLLECT_VDAF_REFERENCE"
"""Set to 1 in a process's environment, its Prio3 instances run the reference code only."""


@dataclass(frozen=True)
class NativeCircuit:
    """A circuit the compiled Prio3 implements: its kind, its length (entries, or targets
    for the pair), its bound (SumVec's max_measurement, MultihotCountVec's max_weight, else
    0) and its chunk length."""

    kind: int
    length: int
    max_value: int
    chunk_length: int


def field_id(field: Field) -> int:
    if field is Field64:
        return 0
    if field is Field128:
        return 1
    raise VdafError(f"no compiled kernels for {field.name}")


def _checked(call: Callable[[], bytes]) -> bytes:
    try:
        return call()
    except ValueError as error:
        raise VdafError(str(error)) from None


def _binary(
    op: Callable[[int, bytes, bytes], bytes],
    field: Field,
    left: Sequence[int],
    right: Sequence[int],
) -> list[int]:
    fid, enc = field_id(field), field.encode_vec
    return field.decode_vec(_checked(lambda: op(fid, enc(left), enc(right))))


def vec_add(field: Field, left: Sequence[int], right: Sequence[int]) -> list[int]:
    return _binary(_native.vec_add, field, left, right)


def vec_sub(field: Field, left: Sequence[int], right: Sequence[int]) -> list[int]:
    return _binary(_native.vec_sub, field, left, right)


def vec_mul(field: Field, left: Sequence[int], right: Sequence[int]) -> list[int]:
    return _binary(_native.vec_mul, field, left, right)


def inner_product(field: Field, left: Sequence[int], right: Sequence[int]) -> int:
    return _binary(_native.inner_product, field, left, right)[0]


def ntt(field: Field, coeffs: Sequence[int], n: int, set_s: bool = False) -> list[int]:
    fid, data = field_id(field), field.encode_vec(coeffs)
    return field.decode_vec(_checked(lambda: _native.ntt(fid, data, n, set_s)))


def inv_ntt(field: Field, values: Sequence[int], n: int) -> list[int]:
    fid, data = field_id(field), field.encode_vec(values)
    return field.decode_vec(_checked(lambda: _native.inv_ntt(fid, data, n)))


def double_evaluations(field: Field, values: Sequence[int]) -> list[int]:
    fid, data = field_id(field), field.encode_vec(values)
    return field.decode_vec(_checked(lambda: _native.double_evaluations(fid, data)))


def extend_values(field: Field, values: Sequence[int], n: int) -> list[int]:
    fid, data = field_id(field), field.encode_vec(values)
    return field.decode_vec(_checked(lambda: _native.extend_values(fid, data, n)))


def poly_eval(field: Field, coeffs: Sequence[int], x: int) -> int:
    fid, data, point = field_id(field), field.encode_vec(coeffs), field.encode_vec([x])
    return field.decode_vec(_checked(lambda: _native.poly_eval(fid, data, point)))[0]


def lagrange_eval(field: Field, values: Sequence[int], x: int) -> int:
    fid, data, point = field_id(field), field.encode_vec(values), field.encode_vec([x])
    return field.decode_vec(_checked(lambda: _native.lagrange_eval(fid, data, point)))[0]


def in_range(field: Field, data: bytes) -> bool:
    """Whether `data` is whole encoded elements, each below the modulus (`Field.decode_vec`'s
    checks without building the elements)."""
    return _native.in_range(field_id(field), data)


def xof_expand(field: Field, seed: bytes, dst: bytes, binder: bytes, length: int) -> list[int]:
    fid = field_id(field)
    return field.decode_vec(_checked(lambda: _native.xof_expand(fid, seed, dst, binder, length)))


def xof_bytes(seed: bytes, dst: bytes, binder: bytes, length: int) -> bytes:
    return _checked(lambda: _native.xof_bytes(seed, dst, binder, length))


def prio3_kernel(
    vdaf_id: int, circuit: NativeCircuit | None, field: Field, shares: int, proofs: int
) -> _native.Prio3 | None:
    """The compiled Prio3 for this instance, or None when it implements no such circuit (or
    when REFERENCE_SWITCH is set to 1: `bench.secure` measures the reference path that way,
    in the same run; tests/vdaf/test_native.py fails under it)."""
    if circuit is None or proofs != 1 or field is not Field128:
        return None
    if os.environ.get(REFERENCE_SWITCH) == "1":
        return None
    return _native.Prio3(
        circuit.kind, vdaf_id, shares, circuit.length, circuit.max_value, circuit.chunk_length
    )
