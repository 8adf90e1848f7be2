"""Exact rational probabilities: parsing, and Bernoulli draws that never compare floats.

Device side: `csprng_bernoulli(Fraction(17, 20))` is `secrets.randbelow(20) < 17`, by the byte
rule of `ldpcollect.randomness` (docs/device-protocol.md, "Drawing").
Fleet side: `bernoulli_array` compares uniform 16-bit words from a numpy Generator against the
first 16 bits of the binary expansion of the probability; a word equal to those bits (chance
2**-16) is decided by the next 64 bits, and so on. The result is Bernoulli(x) exactly, for any
rational x, at the speed of raw random words.
"""

from __future__ import annotations

import decimal
import math
import numbers
import re
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from ldpcollect.errors import ParameterError
from ldpcollect.randomness import OS_RANDOM, RandomSource, bernoulli

RationalLike = Fraction | str | int | float  # a float is read by its shortest repr

_WORD16 = 1 << 16
_WORD64 = 1 << 64
_UINT64_MAX = (1 << 64) - 1


MAX_NUMBER_TEXT = 64
"""Longest decimal or fraction text accepted for a parameter."""
MAX_EXPONENT = 30
"""Largest |exponent| accepted in decimal text: "1e4000000" would make Fraction build a
4-million-digit integer (seconds of CPU on the event loop); no parameter needs more."""
_NUMBER_TEXT = re.compile(
    r"[+-]?(?:(?P<int>\d+)/(?P<den>\d+)|(?:\d+\.?\d*|\.\d+)(?:[eE](?P<exp>[+-]?\d+))?)"
)


def parse_rational_text(parameter: str, text: str, allowed: str) -> Fraction:
    """Decimal or fraction text ("0.85", "17/20", "1e-3") to an exact Fraction, at bounded cost.

    Longer than MAX_NUMBER_TEXT characters, an exponent beyond +-MAX_EXPONENT, or anything
    that is not such a number raises ParameterError before any big-integer work is done.
    """
    cleaned = text.strip()
    if not cleaned:
        raise ParameterError(parameter, text, allowed, "missing (decimal or fraction text)")
    if len(cleaned) > MAX_NUMBER_TEXT:
        raise ParameterError(parameter, text, allowed, f"longer than {MAX_NUMBER_TEXT} characters")
    match = _NUMBER_TEXT.fullmatch(cleaned)
    if match is None:
        raise ParameterError(
            parameter, text, allowed, 'not a rational number such as "17/20" or "0.85"'
        )
    exponent = match.group("exp")
    if exponent is not None and abs(int(exponent)) > MAX_EXPONENT:
        raise ParameterError(parameter, text, allowed, f"exponent beyond +-{MAX_EXPONENT}")
    if match.group("den") is not None and int(match.group("den")) == 0:
        raise ParameterError(parameter, text, allowed, "division by zero")
    return Fraction(cleaned)


def to_fraction(parameter: str, value: object, allowed: str) -> Fraction:
    """Parse `value` exactly: Fraction, int, "17/20", "0.85" (a float is read by its repr)."""
    if isinstance(value, bool):
        raise ParameterError(parameter, value, allowed, "expected a number, not a bool")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    if isinstance(value, float | np.floating):
        if not math.isfinite(float(value)):
            raise ParameterError(parameter, value, allowed, "not a finite number")
        return Fraction(repr(float(value)))
    if isinstance(value, str):
        return parse_rational_text(parameter, value, allowed)
    raise ParameterError(parameter, value, allowed, f"unsupported type {type(value).__name__}")


def probability(
    parameter: str, value: object, *, zero_allowed: bool, one_allowed: bool = True
) -> Fraction:
    """A probability parsed exactly and checked against its interval (named in the error)."""
    allowed = ("[0, " if zero_allowed else "(0, ") + ("1]" if one_allowed else "1)")
    x = to_fraction(parameter, value, allowed)
    low_ok = x >= 0 if zero_allowed else x > 0
    high_ok = x <= 1 if one_allowed else x < 1
    if not (low_ok and high_ok):
        raise ParameterError(parameter, str(x), allowed)
    return x


def csprng_bernoulli(x: Fraction, source: RandomSource = OS_RANDOM) -> bool:
    """True with probability exactly x, from the operating system's CSPRNG (or `source`)."""
    return bernoulli(x, source)


def _uint64_words(rng: np.random.Generator, n: int) -> NDArray[np.uint64]:
    return rng.integers(0, _UINT64_MAX, size=n, dtype=np.uint64, endpoint=True)


def _bernoulli_tail(x: Fraction, n: int, rng: np.random.Generator) -> NDArray[np.bool_]:
    """Bernoulli(x) for a few elements, 64 bits of the expansion at a time (ties recurse)."""
    scaled = x * _WORD64
    head = math.floor(scaled)
    rest = scaled - head
    words = _uint64_words(rng, n)
    out: NDArray[np.bool_] = words < np.uint64(head)
    if rest > 0:
        ties = np.flatnonzero(words == np.uint64(head))
        if ties.size:
            out[ties] = _bernoulli_tail(rest, int(ties.size), rng)
    return out


def bernoulli_array(
    x: Fraction, shape: int | tuple[int, ...], rng: np.random.Generator
) -> NDArray[np.bool_]:
    """An array of independent Bernoulli(x) draws, exact for any rational x in [0, 1]."""
    size = math.prod(shape) if isinstance(shape, tuple) else shape
    if x <= 0:
        return np.zeros(shape, dtype=np.bool_)
    if x >= 1:
        return np.ones(shape, dtype=np.bool_)
    scaled = x * _WORD16
    head = math.floor(scaled)
    rest = scaled - head
    words = _uint64_words(rng, -(-size // 4)).view(np.uint16)[:size]
    out: NDArray[np.bool_] = words < np.uint16(head)
    if rest > 0:
        ties = np.flatnonzero(words == np.uint16(head))
        if ties.size:
            out[ties] = _bernoulli_tail(rest, int(ties.size), rng)
    return out.reshape(shape)


def log_upper(x: Fraction) -> float:
    """The smallest float >= ln(x) (x > 0), so a privacy loss is never under-reported.

    ln is evaluated on the exact rational at 50 significant digits with Decimal.
    """
    if x <= 0:
        raise ParameterError("x", str(x), "(0, inf)")
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        value = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).ln()
        result = float(value)
        if decimal.Decimal(result) < value + decimal.Decimal("1e-45"):
            result = math.nextafter(result, math.inf)
    return result


def log_lower(x: Fraction) -> float:
    """The largest float <= ln(x) (x > 0): -log_lower(1 - s) is an upper bound on -ln(1 - s)."""
    if x <= 0:
        raise ParameterError("x", str(x), "(0, inf)")
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        value = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).ln()
        result = float(value)
        if decimal.Decimal(result) > value - decimal.Decimal("1e-45"):
            result = math.nextafter(result, -math.inf)
    return result
