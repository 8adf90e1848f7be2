"""Polynomials over a `Field` in the two bases the FLP uses (draft section 6.1.3).

Monomial: coefficients, constant term first. Lagrange: the values at the first n powers of
the principal n-th root of unity w (n a power of two). The FLP keeps wire and gadget
polynomials in the Lagrange basis, so the prover never interpolates and the verifier
evaluates at its random point in linear time (the barycentric formula for roots of unity).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from operator import mul

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, log2_exact


def poly_eval(field: Field, coeffs: Sequence[int], x: int) -> int:
    """Monomial-basis evaluation by Horner's rule."""
    p, acc = field.modulus, 0
    for c in reversed(coeffs):
        acc = (acc * x + c) % p
    return acc


def lagrange_weights(field: Field, n: int, x: int) -> list[int]:
    """c with q(x) = sum_i c[i] * q(w**i) for every q of degree < n.

    From x**n - 1 = prod_j (x - w**j): q(x) = (1/n) sum_i q(w**i) w**i prod_{j != i} (x - w**j),
    computed with prefix and suffix products, one inversion (of n) in all.
    """
    p = field.modulus
    nodes, n_inv = _nodes_and_n_inv(field, n)
    diffs = [(x - w) % p for w in nodes]
    prefix = [1] * n
    for i in range(1, n):
        prefix[i] = prefix[i - 1] * diffs[i - 1] % p
    suffix = [n_inv] * n
    for i in range(n - 1, 0, -1):
        suffix[i - 1] = suffix[i] * diffs[i] % p
    return [w * a % p * b % p for w, a, b in zip(nodes, prefix, suffix, strict=True)]


@cache
def _nodes_and_n_inv(field: Field, n: int) -> tuple[tuple[int, ...], int]:
    log2_exact(n)
    return tuple(field.nth_root_powers(n)), field.inv(n)


def lagrange_eval_batched(field: Field, polys: Sequence[Sequence[int]], x: int) -> list[int]:
    """Each Lagrange-basis polynomial (all of one power-of-two length) evaluated at x."""
    lengths = {len(q) for q in polys}
    if len(lengths) != 1:
        raise VdafError(f"polynomials of different lengths {sorted(lengths)} in one batch")
    p = field.modulus
    weights = lagrange_weights(field, lengths.pop(), x)
    return [sum(map(mul, weights, q)) % p for q in polys]


def lagrange_eval(field: Field, values: Sequence[int], x: int) -> int:
    return lagrange_eval_batched(field, [values], x)[0]


def double_evaluations(field: Field, values: Sequence[int]) -> list[int]:
    """From the values at the n-th roots, the values at the 2n-th roots (in order): the even
    ones are given, the odd ones are the values at s * w**i with s the principal 2n-th root."""
    return double_evaluations_many(field, [values])[0]


MATRIX_DOUBLING_MAX = 64
"""Up to this n, doubling applies a cached n x n matrix (`_odd_rows`) to many polynomials
at once; above it, one NTT pair per polynomial (the matrix would grow as n**2)."""


def double_evaluations_many(field: Field, polys: Sequence[Sequence[int]]) -> list[list[int]]:
    """`double_evaluations` of each polynomial (all of one power-of-two length n).

    The odd values are a fixed linear map of the given ones (inverse NTT, then NTT on the
    coset s * w**i), so for small n they come from a cached matrix whose columns are packed
    into one Python integer each (Kronecker substitution): a polynomial's odd values are
    then one big-integer dot product of its n values with the n packed columns, unpacked.
    """
    lengths = {len(q) for q in polys}
    if len(lengths) != 1:
        raise VdafError(f"polynomials of different lengths {sorted(lengths)} in one batch")
    n = lengths.pop()
    log2_exact(n)
    if n > MATRIX_DOUBLING_MAX:
        odds = [field.ntt(field.inv_ntt(q, n), n, set_s=True) for q in polys]
    else:
        odds = _odd_values_packed(field, polys, n)
    doubled = []
    for values, odd in zip(polys, odds, strict=True):
        both = [0] * (2 * n)
        both[0::2] = values
        both[1::2] = odd
        doubled.append(both)
    return doubled


def _odd_values_packed(field: Field, polys: Sequence[Sequence[int]], n: int) -> list[list[int]]:
    p = field.modulus
    slot, columns = _packed_columns(field, n)
    width = slot * n
    odds = []
    for q in polys:
        # Zero values (most of the prover's wires are 0 where an answer bit is 0) cost
        # next to nothing here.
        data = sum(map(mul, q, columns)).to_bytes(width, "little")
        odds.append(
            [int.from_bytes(data[i : i + slot], "little") % p for i in range(0, width, slot)]
        )
    return odds


@cache
def _packed_columns(field: Field, n: int) -> tuple[int, tuple[int, ...]]:
    """The doubling matrix's columns, each packed into one integer (row r in slot r), and
    the slot size in bytes: a slot holds a sum of n products of two elements below p, so
    no sum carries into the next slot."""
    slot = 2 * field.encoded_size + (n.bit_length() + 7) // 8
    rows = _odd_rows(field, n)
    columns = tuple(
        int.from_bytes(b"".join(row[j].to_bytes(slot, "little") for row in rows), "little")
        for j in range(n)
    )
    return slot, columns


@cache
def _odd_rows(field: Field, n: int) -> tuple[tuple[int, ...], ...]:
    """M with (values at the odd 2n-th roots) = M @ (values at the n-th roots): column j is
    the coset NTT of the j-th unit vector's interpolation."""
    columns = []
    for j in range(n):
        unit = [0] * n
        unit[j] = 1
        columns.append(field.ntt(field.inv_ntt(unit, n), n, set_s=True))
    return tuple(tuple(column[r] for column in columns) for r in range(n))


def lagrange_mul(field: Field, left: Sequence[int], right: Sequence[int]) -> list[int]:
    """The product of two polynomials given by n values each, as 2n values (the product's
    degree can reach 2n - 2, so n points no longer determine it)."""
    if len(left) != len(right):
        raise VdafError(f"cannot multiply polynomials of {len(left)} and {len(right)} values")
    p = field.modulus
    a, b = double_evaluations_many(field, [left, right])
    return [x * y % p for x, y in zip(a, b, strict=True)]


def extend_values(field: Field, values: Sequence[int], n: int) -> list[int]:
    """Values at the first m = len(values) n-th roots of a polynomial of degree < m, completed
    to all n of them. Each missing value is a fixed linear combination of the known ones
    (barycentric interpolation over the m known nodes), computed once per (field, m, n)."""
    log2_exact(n)
    m = len(values)
    if m > n:
        raise VdafError(f"{m} values do not fit {n} evaluation points")
    p = field.modulus
    extended = list(values)
    for row in _extension_rows(field, m, n):
        extended.append(sum(map(mul, row, values)) % p)
    return extended


@cache
def _extension_rows(field: Field, m: int, n: int) -> tuple[tuple[int, ...], ...]:
    """For each node x_k (m <= k < n): c with q(x_k) = sum_i c[i] q(x_i) over i < m, namely
    c[i] = L(x_k) b_i / (x_k - x_i) where L(x) = prod_i (x - x_i) and
    b_i = 1 / prod_{j != i} (x_i - x_j)."""
    p = field.modulus
    nodes = field.nth_root_powers(n)
    known = nodes[:m]
    denominators = []
    for i, xi in enumerate(known):
        d = 1
        for j, xj in enumerate(known):
            if i != j:
                d = d * (xi - xj) % p
        denominators.append(d)
    bary = _batch_inverse(field, denominators)
    rows = []
    for x in nodes[m:]:
        diffs = [(x - xi) % p for xi in known]
        whole = 1
        for d in diffs:
            whole = whole * d % p
        inverses = _batch_inverse(field, diffs)
        rows.append(tuple(whole * b % p * inv % p for b, inv in zip(bary, inverses, strict=True)))
    return tuple(rows)


def _batch_inverse(field: Field, xs: Sequence[int]) -> list[int]:
    """Montgomery's trick: every inverse for one field inversion."""
    p = field.modulus
    prefix = [1] * (len(xs) + 1)
    for i, x in enumerate(xs):
        prefix[i + 1] = prefix[i] * x % p
    acc = field.inv(prefix[-1])
    out = [0] * len(xs)
    for i in range(len(xs) - 1, -1, -1):
        out[i] = acc * prefix[i] % p
        acc = acc * xs[i] % p
    return out
