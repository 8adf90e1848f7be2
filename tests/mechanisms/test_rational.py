"""Exact rational probabilities: parsing, CSPRNG Bernoulli, and the fleet's exact Bernoulli."""

from __future__ import annotations

import decimal
import math
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.errors import ParameterError
from ldpcollect.rational import (
    bernoulli_array,
    csprng_bernoulli,
    log_lower,
    log_upper,
    parse_rational_text,
    probability,
    to_fraction,
)

Z = 4.5  # z-tolerance of every frequency check here (two-sided p ~ 7e-6 each)


@pytest.mark.parametrize(
    ("text", "value"),
    [("17/20", Fraction(17, 20)), ("0.85", Fraction(17, 20)), (" 1 ", Fraction(1)), (3, 3)],
)
def test_to_fraction_is_exact(text: str | int, value: Fraction) -> None:
    assert to_fraction("p", text, "(0, 1]") == value


@pytest.mark.parametrize("bad", ["nan", "inf", "1/0", "abc", "", True, None, float("nan")])
def test_to_fraction_rejects(bad: object) -> None:
    with pytest.raises(ParameterError) as err:
        to_fraction("flip1", bad, "(0, 1]")
    assert "flip1" in str(err.value)
    assert "(0, 1]" in str(err.value)


def test_probability_interval_ends() -> None:
    assert probability("q", "0", zero_allowed=True) == 0
    assert probability("q", "1", zero_allowed=True) == 1
    with pytest.raises(ParameterError, match=r"p must be in \(0, 1\]"):
        probability("p", "0", zero_allowed=False)
    with pytest.raises(ParameterError, match=r"p must be in \(0, 1\)"):
        probability("p", "1", zero_allowed=False, one_allowed=False)


def test_csprng_bernoulli_frequency() -> None:
    x, n = Fraction(17, 20), 100_000
    hits = sum(csprng_bernoulli(x) for _ in range(n))
    se = math.sqrt(float(x * (1 - x)) * n)
    assert abs(hits - n * float(x)) < Z * se
    assert not any(csprng_bernoulli(Fraction(0)) for _ in range(100))
    assert all(csprng_bernoulli(Fraction(1)) for _ in range(100))


@pytest.mark.parametrize(
    "x",
    [
        Fraction(1, 3),  # non-dyadic: ties at the 16-bit word are resolved by the 64-bit tail
        Fraction(9, 200),
        Fraction(1, 2),  # dyadic: no tail at all
        Fraction(1, 10**30),  # below one 16-bit step: only tail draws can say Yes
        Fraction(10**30 - 1, 10**30),
    ],
)
def test_bernoulli_array_frequency(x: Fraction) -> None:
    n = 4_000_000
    hits = int(np.count_nonzero(bernoulli_array(x, n, np.random.default_rng(7))))
    se = math.sqrt(max(float(x * (1 - x)) * n, 1e-300))
    assert abs(hits - n * float(x)) < Z * se + 1e-9


def test_bernoulli_array_tail_is_exact_below_one_word() -> None:
    # x = 1/65536 + 1/3 * 2**-16: the word below 1 always says Yes, the tie word says Yes w.p. 1/3.
    x = Fraction(1, 2**16) + Fraction(1, 3 * 2**16)
    n = 40_000_000
    hits = int(np.count_nonzero(bernoulli_array(x, n, np.random.default_rng(11))))
    expected = n * float(x)
    assert abs(hits - expected) < Z * math.sqrt(expected)


@given(
    st.fractions(min_value=0, max_value=1, max_denominator=10**12),
    st.tuples(st.integers(0, 7), st.integers(0, 9)),
)
def test_bernoulli_array_shape_and_extremes(x: Fraction, shape: tuple[int, int]) -> None:
    out = bernoulli_array(x, shape, np.random.default_rng(0))
    assert out.shape == shape
    assert out.dtype == np.bool_
    if x == 0:
        assert not out.any()
    if x == 1:
        assert out.all()


def _ulp_at(exact: decimal.Decimal) -> decimal.Decimal:
    return decimal.Decimal(math.ulp(float(exact)))


@given(st.fractions(min_value=Fraction(1, 10**9), max_value=10**6, max_denominator=10**9))
def test_log_bounds_bracket_the_exact_logarithm(x: Fraction) -> None:
    """log_upper/log_lower bracket ln(x) and are at most 2 ulp from it.

    The method's own error: ln is evaluated on the exact rational at 50 digits (error far below
    one ulp here, since |ln x| >= ~1e-9 for these x), rounded to the nearest float (0.5 ulp) and
    then stepped one float outward when that was on the wrong side (1 ulp more): 1.5 ulp of the
    exact value at most, so 2 ulp allows for the ulp changing at a power of two. Compared with
    the exact value, not with math.log, which first rounds x to a float (near x = 1 that alone
    moves ln(x) by many ulps).
    """
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        exact = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).ln()
        upper, lower = decimal.Decimal(log_upper(x)), decimal.Decimal(log_lower(x))
        assert lower <= exact <= upper
        assert upper - exact <= 2 * _ulp_at(exact)
        assert exact - lower <= 2 * _ulp_at(exact)


@pytest.mark.parametrize(
    "x",
    [Fraction(1), Fraction(10**9 + 1, 10**9), Fraction(10**9 - 1, 10**9), Fraction(1, 10**9)],
)
def test_log_bounds_are_tight_at_the_edges(x: Fraction) -> None:
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        exact = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).ln()
        tol = 2 * _ulp_at(exact)  # at x = 1: two of the smallest subnormals
        assert decimal.Decimal(log_lower(x)) <= exact <= decimal.Decimal(log_upper(x))
        assert decimal.Decimal(log_upper(x)) - exact <= tol
        assert exact - decimal.Decimal(log_lower(x)) <= tol


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("17/20", Fraction(17, 20)),
        ("0.85", Fraction(17, 20)),
        ("-.5", Fraction(-1, 2)),
        ("1e-3", Fraction(1, 1000)),
        ("2.5E+30", Fraction(25 * 10**29)),
        (" 3 ", Fraction(3)),
    ],
)
def test_parse_rational_text_reads_decimals_fractions_and_small_exponents(
    text: str, value: Fraction
) -> None:
    assert parse_rational_text("x", text, "(0, 1]") == value


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1e4000000", "exponent beyond +-30"),
        ("1e-31", "exponent beyond +-30"),
        ("9" * 65, "longer than 64 characters"),
        ("1/0", "division by zero"),
        ("nan", "not a rational number"),
        ("inf", "not a rational number"),
        ("0x10", "not a rational number"),
        ("1_000", "not a rational number"),
        ("", "missing"),
    ],
)
def test_parse_rational_text_refuses_at_bounded_cost(text: str, why: str) -> None:
    with pytest.raises(ParameterError, match=re.escape(why)) as err:
        parse_rational_text("flip1", text, "(0, 1]")
    assert len(str(err.value)) < 200  # never the whole input back
