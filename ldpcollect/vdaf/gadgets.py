"""The FLP's gadgets (draft appendix A): the non-affine sub-circuits a validity circuit calls.

A gadget evaluates on field elements (`eval`) and, because it is an arithmetic circuit, on
polynomials given in the Lagrange basis (`eval_poly`, the prover's gadget polynomial).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from operator import mul

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, next_power_of_two
from ldpcollect.vdaf.polynomial import double_evaluations_many, lagrange_mul, poly_eval


def wire_poly_len(gadget_calls: int) -> int:
    """Values per wire polynomial: the wire seed plus one per call, rounded up to a power of 2."""
    return next_power_of_two(1 + gadget_calls)


def gadget_poly_len(degree: int, wire_len: int) -> int:
    """Values that determine the gadget polynomial: its degree plus one."""
    return degree * (wire_len - 1) + 1


class Gadget(ABC):
    arity: int
    degree: int

    @abstractmethod
    def eval(self, field: Field, inp: Sequence[int]) -> int: ...

    @abstractmethod
    def eval_poly(self, field: Field, inp_polys: Sequence[Sequence[int]]) -> list[int]:
        """The gadget applied to Lagrange-basis polynomials of one power-of-two length n; the
        result is in the Lagrange basis over next_power_of_two(degree * (n - 1) + 1) points."""


class Mul(Gadget):
    """x * y."""

    arity = 2
    degree = 2

    def eval(self, field: Field, inp: Sequence[int]) -> int:
        return inp[0] * inp[1] % field.modulus

    def eval_poly(self, field: Field, inp_polys: Sequence[Sequence[int]]) -> list[int]:
        return lagrange_mul(field, inp_polys[0], inp_polys[1])


class PolyEval(Gadget):
    """p(x) for a fixed polynomial p (integer coefficients, constant term first)."""

    arity = 1

    def __init__(self, coeffs: Sequence[int], num_calls: int) -> None:
        stripped = list(coeffs)
        while stripped and stripped[-1] == 0:
            stripped.pop()
        if not stripped:
            raise VdafError("PolyEval needs a nonzero polynomial")
        self.coeffs = stripped
        self.degree = len(stripped) - 1
        self._n = next_power_of_two(gadget_poly_len(self.degree, wire_poly_len(num_calls)))

    def eval(self, field: Field, inp: Sequence[int]) -> int:
        return poly_eval(field, [c % field.modulus for c in self.coeffs], inp[0])

    def eval_poly(self, field: Field, inp_polys: Sequence[Sequence[int]]) -> list[int]:
        values = inp_polys[0]
        monomial = field.inv_ntt(values, len(values))
        points = field.ntt(monomial, self._n)
        coeffs = [c % field.modulus for c in self.coeffs]
        return [poly_eval(field, coeffs, x) for x in points]


class ParallelSum(Gadget):
    """sum_i sub(inputs of copy i) over `count` copies of a sub-circuit: one gadget call
    checks a whole chunk, which shortens the proof."""

    def __init__(self, subcircuit: Gadget, count: int) -> None:
        if count < 1:
            raise VdafError(f"ParallelSum needs count >= 1, got {count}")
        self.subcircuit = subcircuit
        self.count = count
        self.arity = subcircuit.arity * count
        self.degree = subcircuit.degree

    def eval(self, field: Field, inp: Sequence[int]) -> int:
        a = self.subcircuit.arity
        total = 0
        for i in range(self.count):
            total += self.subcircuit.eval(field, inp[i * a : (i + 1) * a])
        return total % field.modulus

    def eval_poly(self, field: Field, inp_polys: Sequence[Sequence[int]]) -> list[int]:
        a, p = self.subcircuit.arity, field.modulus
        if isinstance(self.subcircuit, Mul):
            return _parallel_mul_poly(field, inp_polys)
        size = next_power_of_two(gadget_poly_len(self.degree, len(inp_polys[0])))
        total = [0] * size
        for i in range(self.count):
            part = self.subcircuit.eval_poly(field, inp_polys[i * a : (i + 1) * a])
            total = [(t + v) % p for t, v in zip(total, part, strict=True)]
        return total


def _parallel_mul_poly(field: Field, inp_polys: Sequence[Sequence[int]]) -> list[int]:
    """ParallelSum(Mul)'s gadget polynomial, sum_i x_i * y_i over 2n points: every wire
    doubled in one batch, then one reduction per point (the prover's hot loop)."""
    p = field.modulus
    doubled = double_evaluations_many(field, inp_polys)
    lefts, rights = zip(*doubled[0::2], strict=True), zip(*doubled[1::2], strict=True)
    return [sum(map(mul, x, y)) % p for x, y in zip(lefts, rights, strict=True)]
