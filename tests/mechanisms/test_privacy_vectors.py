"""Local leakage against the reference vectors (and as upper bounds of the exact value)."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import pytest

from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy


def exact_ln(x: Fraction) -> decimal.Decimal:
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).ln()


def test_rr_eps0_reference_vector() -> None:
    eps0 = RandomizedResponse("0.85", "0.3").local_epsilon()
    # reference: 2.9901612285045354; exact ln(179/9) = 2.99016122850453561...; the float we
    # return is the smallest float above the exact value, one ulp from the reference.
    assert eps0 == pytest.approx(2.9901612285045354, rel=1e-15, abs=0)
    assert decimal.Decimal(eps0) >= exact_ln(Fraction(179, 9))


def test_rr_eps0_other_side_and_degenerate() -> None:
    # min(q, 1-q): q = 0.7 leaks as much as q = 0.3
    assert RandomizedResponse("0.85", "0.7").local_epsilon() == pytest.approx(2.99016122850453)
    assert RandomizedResponse(1, "0.3").local_epsilon() == math.inf
    assert RandomizedResponse("0.5", 0).local_epsilon() == math.inf
    assert RandomizedResponse("0.5", 1).local_epsilon() == math.inf


@pytest.mark.parametrize(
    ("s", "eps"),
    [
        ("0.1", 0.10536051565782628),
        ("0.25", 0.2876820724517809),
        ("0.5", 0.6931471805599453),
        ("0.75", 1.3862943611198906),
    ],
)
def test_sp_round_leakage_reference_vectors(s: str, eps: float) -> None:
    got = SamplingPrivacy(s).local_epsilon()
    assert got == pytest.approx(eps, rel=1e-15, abs=0)
    assert decimal.Decimal(got) >= -exact_ln(1 - Fraction(s))


def test_sp_full_sampling_leaks_everything() -> None:
    assert SamplingPrivacy(1).local_epsilon() == math.inf
