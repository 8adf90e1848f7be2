"""Each gadget's polynomial form agrees with the gadget applied pointwise: at every node of
the output, the gadget polynomial equals the gadget of the wire polynomials' values there."""

from __future__ import annotations

import random

import pytest

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, Field64, Field128
from ldpcollect.vdaf.gadgets import Gadget, Mul, ParallelSum, PolyEval, gadget_poly_len
from ldpcollect.vdaf.polynomial import lagrange_eval

GADGETS: dict[str, Gadget] = {
    "Mul": Mul(),
    "PolyEval(x^2 - x)": PolyEval([0, -1, 1], 7),
    "PolyEval(x^3 - 3x^2 + 2x)": PolyEval([0, 2, -3, 1, 0], 7),
    "ParallelSum(Mul, 3)": ParallelSum(Mul(), 3),
}


@pytest.mark.parametrize("f", [Field64, Field128], ids=lambda f: f.name)
@pytest.mark.parametrize("name", list(GADGETS))
def test_gadget_polynomial_matches_the_gadget_at_random_points(f: Field, name: str) -> None:
    gadget = GADGETS[name]
    rng = random.Random(name)
    n = 8  # wire polynomials of 8 values: 7 calls plus the seed
    wires = [[rng.randrange(f.modulus) for _ in range(n)] for _ in range(gadget.arity)]
    poly = gadget.eval_poly(f, wires)
    assert len(poly) >= gadget_poly_len(gadget.degree, n)
    for _ in range(5):
        x = rng.randrange(f.modulus)
        at_x = [lagrange_eval(f, wire, x) for wire in wires]
        assert lagrange_eval(f, poly, x) == gadget.eval(f, at_x)


def test_poly_eval_strips_leading_zeros_and_refuses_the_zero_polynomial() -> None:
    assert PolyEval([0, 2, -3, 1, 0, 0], 1).degree == 3
    with pytest.raises(VdafError, match="nonzero polynomial"):
        PolyEval([0, 0], 1)


def test_parallel_sum_adds_its_copies() -> None:
    gadget = ParallelSum(Mul(), 3)
    assert (gadget.arity, gadget.degree) == (6, 2)
    assert gadget.eval(Field64, [2, 3, 4, 5, 6, 7]) == 2 * 3 + 4 * 5 + 6 * 7
    with pytest.raises(VdafError, match="count >= 1"):
        ParallelSum(Mul(), 0)


@pytest.mark.parametrize("f", [Field64, Field128], ids=lambda f: f.name)
def test_parallel_mul_polynomial_is_the_sum_of_its_copies_polynomials(f: Field) -> None:
    """ParallelSum(Mul)'s batched gadget polynomial equals the sum of each Mul's own."""
    rng = random.Random(7)
    gadget = ParallelSum(Mul(), 5)
    wires = [[rng.randrange(f.modulus) for _ in range(16)] for _ in range(gadget.arity)]
    expected = [0] * 32
    for i in range(gadget.count):
        part = Mul().eval_poly(f, wires[2 * i : 2 * i + 2])
        expected = [(a + b) % f.modulus for a, b in zip(expected, part, strict=True)]
    assert gadget.eval_poly(f, wires) == expected
