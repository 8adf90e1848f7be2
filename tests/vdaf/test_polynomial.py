"""Lagrange-basis operations agree with the same polynomial handled in the monomial basis."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, Field64, Field128
from ldpcollect.vdaf.polynomial import (
    double_evaluations,
    double_evaluations_many,
    extend_values,
    lagrange_eval,
    lagrange_eval_batched,
    lagrange_mul,
    poly_eval,
)

field = Field128
P = field.modulus
element = st.integers(min_value=0, max_value=P - 1)
sizes = st.sampled_from([1, 2, 4, 8, 16, 32])


def values_of(coeffs: list[int], n: int) -> list[int]:
    return [poly_eval(field, coeffs, w) for w in field.nth_root_powers(n)]


@given(n=sizes, data=st.data())
def test_lagrange_eval_matches_monomial_eval_anywhere(n: int, data: st.DataObject) -> None:
    coeffs = data.draw(st.lists(element, min_size=n, max_size=n))
    x = data.draw(element)
    assert lagrange_eval(field, values_of(coeffs, n), x) == poly_eval(field, coeffs, x)


def test_lagrange_eval_at_a_node_returns_the_value_there() -> None:
    values = [5, 7, 11, 13]
    for i, w in enumerate(field.nth_root_powers(4)):
        assert lagrange_eval(field, values, w) == values[i]


def test_batched_evaluation_refuses_mixed_lengths() -> None:
    with pytest.raises(VdafError, match="different lengths"):
        lagrange_eval_batched(field, [[1, 2], [1, 2, 3, 4]], 9)


@given(n=sizes, data=st.data())
def test_double_evaluations_gives_the_values_at_the_2n_th_roots(
    n: int, data: st.DataObject
) -> None:
    coeffs = data.draw(st.lists(element, min_size=n, max_size=n))
    assert double_evaluations(field, values_of(coeffs, n)) == values_of(coeffs, 2 * n)


@given(n=sizes, data=st.data())
def test_lagrange_mul_is_the_product_polynomial(n: int, data: st.DataObject) -> None:
    a = data.draw(st.lists(element, min_size=n, max_size=n))
    b = data.draw(st.lists(element, min_size=n, max_size=n))
    product = [0] * (2 * n)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            product[i + j] = (product[i + j] + x * y) % P
    assert lagrange_mul(field, values_of(a, n), values_of(b, n)) == values_of(product, 2 * n)


@given(data=st.data())
def test_extend_values_completes_a_low_degree_polynomial(data: st.DataObject) -> None:
    n = data.draw(st.sampled_from([2, 4, 8, 16]))
    m = data.draw(st.integers(min_value=1, max_value=n))
    coeffs = data.draw(st.lists(element, min_size=m, max_size=m))
    full = values_of(coeffs, n)
    assert extend_values(field, full[:m], n) == full


def test_extend_values_works_in_field64_and_refuses_too_many_values() -> None:
    values = [poly_eval(Field64, [3, 1, 4], w) for w in Field64.nth_root_powers(8)]
    assert extend_values(Field64, values[:3], 8) == values
    with pytest.raises(VdafError, match="do not fit"):
        extend_values(Field64, [*values, 0], 8)


def _coset_reference(f: Field, values: list[int]) -> list[int]:
    """The odd 2n-th-root values by one inverse NTT and one coset NTT (no matrix)."""
    n = len(values)
    doubled = [0] * (2 * n)
    doubled[0::2] = values
    doubled[1::2] = f.ntt(f.inv_ntt(values, n), n, set_s=True)
    return doubled


@pytest.mark.parametrize("f", [Field64, Field128], ids=lambda f: f.name)
@pytest.mark.parametrize("n", [1, 2, 16, 32, 128])
def test_doubling_many_polynomials_at_once_matches_one_at_a_time(f: Field, n: int) -> None:
    """The packed matrix path (n <= 64) and the NTT path (above), with the largest values
    (no slot may carry into the next), zeros, and trailing zero nodes (the prover's unused
    gadget calls)."""
    rng = random.Random(n)
    top = f.modulus - 1
    polys = [
        [top] * n,
        [0] * n,
        [rng.randrange(f.modulus) for _ in range(n)],
        [rng.randrange(f.modulus) for _ in range(n // 2 or 1)] + [0] * (n - (n // 2 or 1)),
    ]
    assert double_evaluations_many(f, polys) == [_coset_reference(f, q) for q in polys]
    trailing = [q[: n // 2 or 1] + [0] * (n - (n // 2 or 1)) for q in polys]
    assert double_evaluations_many(f, trailing) == [_coset_reference(f, q) for q in trailing]


def test_doubling_many_refuses_mixed_lengths() -> None:
    with pytest.raises(VdafError, match="different lengths"):
        double_evaluations_many(field, [[1, 2], [1, 2, 3, 4]])
