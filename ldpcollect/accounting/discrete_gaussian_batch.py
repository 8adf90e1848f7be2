"""The same exact discrete Gaussian sampler, run on many draws at once with numpy.

`discrete_gaussian.sample_discrete_gaussian` follows Canonne, Kamath and Steinke (2020),
Algorithms 1-3, one draw at a time; a release of 65,536 noised counts then takes seconds of
Python. Here every step of those algorithms runs on all pending draws together: each coin is
the same exact Bernoulli (a comparison of uniform integers with exact integer bounds), each
rejection the same test, and draws that are rejected are retried in the next pass. The coins of
different draws are independent, so doing them side by side instead of one draw after another
changes nothing in the distribution of the output; only the order in which random words are
read differs.

Uniform integers in [0, m) come from 62-bit words by rejection (a word at or above the largest
multiple of m up to 2**62 is drawn again), so they are exactly uniform. Every integer stays
below 2**62: `fits` says which parameters this path takes, and a draw whose rejection test
would need larger numbers counts its exp(-1) coins with Python integers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
# A source of uniformly random 64-bit words: `words(n)` returns n of them.
WordSource = Callable[[int], npt.NDArray[np.uint64]]

# Denominators up to this keep every product den * K below 2**62 (K stays below 2**16).
_MAX_DEN = 1 << 44
_MAX_K = 1 << 16


def os_words(n: int) -> npt.NDArray[np.uint64]:
    """`n` words from the OS CSPRNG (the source behind `secrets`)."""
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)


def fits(sigma_sq: Fraction) -> bool:
    """Whether the integers of this sampler stay in int64 for N_Z(0, sigma_sq)."""
    n, d = sigma_sq.numerator, sigma_sq.denominator
    t = math.isqrt(n // d) + 1
    return 2 * t * t * n * d < _MAX_DEN


class _Coins:
    """Exact uniform integers and Bernoulli(exp(-gamma)) coins, many at a time."""

    def __init__(self, words: WordSource) -> None:
        self._words = words

    def below(self, m: Ints) -> Ints:
        """One uniform integer in [0, m[i]) for each i (m >= 1)."""
        out = np.empty(len(m), dtype=np.int64)
        todo = np.arange(len(m))
        while len(todo):
            bound = m[todo]
            word = (self._words(len(todo)) >> np.uint64(2)).astype(np.int64)  # 62 bits
            limit = (np.int64(1 << 62) // bound) * bound  # the largest multiple <= 2**62
            ok = word < limit
            out[todo[ok]] = word[ok] % bound[ok]
            todo = todo[~ok]
        return out

    def exp_at_most_one(self, num: Ints, den: Ints) -> npt.NDArray[np.bool_]:
        """Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Algorithm 1, first case): K = 1,
        then K += 1 while a Bernoulli(gamma / K) coin comes up; the result is K odd."""
        k = np.ones(len(num), dtype=np.int64)
        active = np.arange(len(num))
        while len(active):
            if int(k[active].max()) >= _MAX_K:
                raise OverflowError("Bernoulli(exp(-gamma)) ran far beyond any probable K")
            heads = self.below(den[active] * k[active]) < num[active]
            k[active[heads]] += 1
            active = active[heads]
        odd: npt.NDArray[np.bool_] = (k % 2) == 1
        return odd

    def exp(self, num: Ints, den: Ints) -> npt.NDArray[np.bool_]:
        """Bernoulli(exp(-num/den)) for num >= 0 (CKS Algorithm 1): while num > den, a
        Bernoulli(exp(-1)) coin must come up and num -= den; then the case num <= den."""
        whole = np.maximum((num + den - 1) // den - 1, 0)  # times num > den, num -= den
        rest = num - whole * den
        alive = np.ones(len(num), dtype=bool)
        pending = np.flatnonzero(whole > 0)
        left = whole.copy()
        while len(pending):
            ones = np.ones(len(pending), dtype=np.int64)
            alive[pending] &= self.exp_at_most_one(ones, ones)
            left[pending] -= 1
            pending = pending[(left[pending] > 0) & alive[pending]]
        last = np.flatnonzero(alive)
        alive[last] = self.exp_at_most_one(rest[last], den[last])
        return alive


def discrete_laplace(t: int, size: int, coins: _Coins) -> Ints:
    """`size` draws with P(x) proportional to exp(-|x|/t), integer t >= 1 (CKS Algorithm 2)."""
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    scale = np.full(size, t, dtype=np.int64)
    while len(todo):
        n = len(todo)
        u = coins.below(scale[:n])
        keep = coins.exp(u, scale[:n])
        u, idx = u[keep], todo[keep]
        v = np.zeros(len(u), dtype=np.int64)
        running = np.arange(len(u))
        while len(running):
            ones = np.ones(len(running), dtype=np.int64)
            heads = coins.exp(ones, ones)
            v[running[heads]] += 1
            running = running[heads]
        magnitude = u + t * v
        negative = coins.below(np.full(len(u), 2, dtype=np.int64)) == 1
        ok = ~(negative & (magnitude == 0))
        out[idx[ok]] = np.where(negative[ok], -magnitude[ok], magnitude[ok])
        done = np.zeros(size, dtype=bool)
        done[idx[ok]] = True
        todo = todo[~done[todo]]
    return out


def sample_batch(sigma_sq: Fraction, size: int, words: WordSource = os_words) -> list[int]:
    """`size` independent draws of N_Z(0, sigma_sq) (CKS Algorithm 3), all at once.

    Requires `fits(sigma_sq)`. A candidate y from the discrete Laplace with scale
    t = floor(sigma) + 1 is kept with probability exp(-(|y| t d - n)^2 / (2 t^2 n d)),
    sigma^2 = n/d, exactly as the one-at-a-time sampler does.
    """
    if not fits(sigma_sq):
        raise ValueError(f"sigma^2 {sigma_sq} is too large for the batch sampler")
    n, d = sigma_sq.numerator, sigma_sq.denominator
    t = math.isqrt(n // d) + 1
    gamma_den = 2 * t * t * n * d
    coins = _Coins(words)
    out: list[int] = []
    while len(out) < size:
        want = size - len(out)
        y = discrete_laplace(t, want, coins)
        offset = np.abs(y) * (t * d) - n  # |y| t d - n, exact while it stays small
        small = np.abs(offset) < (1 << 31)
        keep = np.zeros(want, dtype=bool)
        if small.any():
            num = offset[small] * offset[small]
            keep[small] = coins.exp(num, np.full(len(num), gamma_den, dtype=np.int64))
        for i in np.flatnonzero(~small).tolist():  # far tails: exact Python integers
            keep[i] = _big_exp((abs(int(y[i])) * t * d - n) ** 2, gamma_den, coins)
        out.extend(y[keep].tolist())
    return out[:size]


def _big_exp(num: int, den: int, coins: _Coins) -> bool:
    """Bernoulli(exp(-num/den)) for a numerator beyond int64 (den fits): the same steps as
    `_Coins.exp`, the count of exp(-1) coins worked out with Python integers."""
    whole = max(-(-num // den) - 1, 0)
    rest = num - whole * den
    one = np.ones(1, dtype=np.int64)
    while whole > 0:  # every exp(-1) coin must come up; almost always one fails at once
        ones = np.ones(min(whole, 64), dtype=np.int64)
        if not coins.exp_at_most_one(ones, ones).all():
            return False
        whole -= len(ones)
    return bool(coins.exp_at_most_one(one * rest, one * den)[0])
