"""Where a device's randomness comes from, and the one rule that turns bytes into decisions.

Devices draw from the operating system's CSPRNG (`OS_RANDOM`). A `ScriptedRandom` replays
given bytes instead, so the conformance vectors (docs/device-protocol.md) can state, for each
case, exactly which bytes a device drew and what it decided from them. Both go through the
same byte rule, so the default behaviour is the rule a vector checks:

- `bernoulli(a/b)` (a/b in lowest terms, 0 < a/b < 1): k = bit length of b; read ceil(k/8)
  bytes as a big-endian integer, keep its top k bits (shift right by 8 * ceil(k/8) - k);
  a value >= b is discarded and the read repeated; the result is value < a. Probability 0 or
  1 reads nothing. This is exactly what `secrets.randbelow(b) < a` does with os.urandom.
"""

from __future__ import annotations

import secrets
from fractions import Fraction
from typing import Protocol

from ldpcollect.errors import ParameterError


class RandomSource(Protocol):
    def token_bytes(self, n: int) -> bytes:
        """`n` uniformly random bytes."""
        ...


class _OsRandom:
    def token_bytes(self, n: int) -> bytes:
        return secrets.token_bytes(n)


OS_RANDOM: RandomSource = _OsRandom()


class ScriptedRandom:
    """Replays `data` in order; asking for more than is left is an error (a vector that does
    not hold every byte a device draws is wrong)."""

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self.used = 0

    def token_bytes(self, n: int) -> bytes:
        if n < 0 or self.used + n > len(self._data):
            raise ParameterError(
                "scripted random bytes",
                f"{n} more after {self.used} of {len(self._data)}",
                "no more than were given",
            )
        out = self._data[self.used : self.used + n]
        self.used += n
        return out

    @property
    def left(self) -> int:
        return len(self._data) - self.used


def uniform_below(bound: int, source: RandomSource) -> int:
    """A uniform integer in [0, bound) by the byte rule of the module docstring."""
    if bound < 1:
        raise ParameterError("bound", bound, "[1, inf)")
    k = bound.bit_length()
    n_bytes = (k + 7) // 8
    while True:
        value = int.from_bytes(source.token_bytes(n_bytes), "big") >> (8 * n_bytes - k)
        if value < bound:
            return value


def bernoulli(x: Fraction, source: RandomSource = OS_RANDOM) -> bool:
    """True with probability exactly x (reduced to lowest terms by Fraction)."""
    if x <= 0:
        return False
    if x >= 1:
        return True
    return uniform_below(x.denominator, source) < x.numerator
