"""The prime fields of the VDAF draft (draft-irtf-cfrg-vdaf-20, section 6.1): Field64 and Field128.

An element is a plain Python `int` in `[0, modulus)`; a `Field` holds the modulus and the
operations that need it (encoding, inverse, roots of unity, the number theoretic transform).
Keeping elements as ints keeps the arithmetic fast and lets a batched (numpy) path work on
the same values later.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from ldpcollect.vdaf.errors import VdafError


@dataclass(frozen=True)
class Field:
    """An NTT-friendly prime field: `generator` spans a subgroup of order `gen_order`, a power
    of two, so the n-th roots of unity exist for every power of two n up to it."""

    name: str
    modulus: int
    encoded_size: int
    gen_order: int
    generator: int
    _roots: dict[int, list[int]] = dataclass_field(default_factory=dict, compare=False, repr=False)

    def inv(self, x: int) -> int:
        if x % self.modulus == 0:
            raise VdafError(f"zero has no inverse in {self.name}")
        return pow(x, -1, self.modulus)

    def encode_vec(self, vec: Sequence[int]) -> bytes:
        """Little-endian, `encoded_size` bytes per element."""
        size = self.encoded_size
        return b"".join([x.to_bytes(size, "little") for x in vec])

    def decode_vec(self, encoded: bytes) -> list[int]:
        """The inverse of `encode_vec`; refuses a ragged length and any value >= modulus."""
        size = self.encoded_size
        if len(encoded) % size:
            raise VdafError(
                f"{len(encoded)} bytes is not a whole number of {size}-byte {self.name} elements"
            )
        vec = decode_little_endian(encoded, size)
        if vec and max(vec) >= self.modulus:
            raise VdafError(f"an encoded element is not below the {self.name} modulus")
        return vec

    def decode_vec_of_length(self, encoded: bytes, length: int, what: str) -> list[int]:
        """`decode_vec`, and the result must have exactly `length` elements."""
        expected = length * self.encoded_size
        if len(encoded) != expected:
            raise VdafError(f"{what} must be {expected} bytes, got {len(encoded)}")
        return self.decode_vec(encoded)

    def nth_root(self, n: int) -> int:
        """The principal n-th root of unity, generator ** (gen_order / n)."""
        _check_power_of_two(n)
        if n > self.gen_order:
            raise VdafError(f"{self.name} has no {n}-th root of unity")
        return pow(self.generator, self.gen_order // n, self.modulus)

    def nth_root_powers(self, n: int) -> list[int]:
        """[w**0, w**1, ..., w**(n-1)] for the principal n-th root w (cached per n)."""
        powers = self._roots.get(n)
        if powers is None:
            w, p = self.nth_root(n), self.modulus
            powers = [1] * n
            for i in range(1, n):
                powers[i] = powers[i - 1] * w % p
            self._roots[n] = powers
        return list(powers)

    def ntt(self, coeffs: Sequence[int], n: int, set_s: bool = False) -> list[int]:
        """Evaluations of the polynomial `coeffs` (monomial basis, at most n coefficients) at
        the n-th roots of unity w**i, or with `set_s` at s * w**i where s is the principal
        2n-th root (the odd 2n-th roots, which `double_evaluations` needs)."""
        if len(coeffs) > n:
            raise VdafError(f"{len(coeffs)} coefficients do not fit an NTT of size {n}")
        p = self.modulus
        values = list(coeffs) + [0] * (n - len(coeffs))
        if set_s:
            s, scale = self.nth_root(2 * n), 1
            for i in range(n):
                values[i] = values[i] * scale % p
                scale = scale * s % p
        return _transform(values, self.nth_root(n), p)

    def inv_ntt(self, values: Sequence[int], n: int) -> list[int]:
        """The monomial coefficients of the polynomial taking `values` at the n-th roots."""
        if len(values) != n:
            raise VdafError(f"inverse NTT of size {n} needs {n} values, got {len(values)}")
        p = self.modulus
        coeffs = _transform(list(values), self.inv(self.nth_root(n)), p)
        n_inv = self.inv(n)
        return [c * n_inv % p for c in coeffs]


def decode_little_endian(encoded: bytes, size: int) -> list[int]:
    """Unsigned little-endian integers of `size` bytes each. 8- and 16-byte elements go
    through one struct unpack of 64-bit words (twice as fast as a slice per element)."""
    if size not in (8, 16):
        return [
            int.from_bytes(encoded[i : i + size], "little") for i in range(0, len(encoded), size)
        ]
    words = struct.unpack(f"<{len(encoded) // 8}Q", encoded)
    if size == 8:
        return list(words)
    return [low | high << 64 for low, high in zip(words[0::2], words[1::2], strict=True)]


def _check_power_of_two(n: int) -> None:
    if n < 1 or n & (n - 1):
        raise VdafError(f"{n} is not a power of two")


def _transform(values: list[int], root: int, p: int) -> list[int]:
    """In-place iterative radix-2 NTT: values[i] <- sum_j values[j] * root**(i*j)."""
    n = len(values)
    _check_power_of_two(n)
    j = 0
    for i in range(1, n):  # bit-reversal permutation
        bit = n >> 1
        while j & bit:
            j ^= bit
            bit >>= 1
        j |= bit
        if i < j:
            values[i], values[j] = values[j], values[i]
    length = 2
    while length <= n:
        half = length // 2
        step = pow(root, n // length, p)
        twiddles = [1] * half
        for k in range(1, half):
            twiddles[k] = twiddles[k - 1] * step % p
        for start in range(0, n, length):
            for k in range(half):
                u = values[start + k]
                v = values[start + k + half] * twiddles[k] % p
                values[start + k] = (u + v) % p
                values[start + k + half] = (u - v) % p
        length *= 2
    return values


def next_power_of_two(x: int) -> int:
    """The smallest power of two >= x (x >= 1)."""
    return 1 << (x - 1).bit_length()


def log2_exact(n: int) -> int:
    """log2(n) for a power of two n; anything else is an error."""
    _check_power_of_two(n)
    return n.bit_length() - 1


def vec_add(field: Field, left: Sequence[int], right: Sequence[int]) -> list[int]:
    if len(left) != len(right):
        raise VdafError(f"vectors of lengths {len(left)} and {len(right)} cannot be added")
    p = field.modulus
    return [(a + b) % p for a, b in zip(left, right, strict=True)]


def vec_sub(field: Field, left: Sequence[int], right: Sequence[int]) -> list[int]:
    if len(left) != len(right):
        raise VdafError(f"vectors of lengths {len(left)} and {len(right)} cannot be subtracted")
    p = field.modulus
    return [(a - b) % p for a, b in zip(left, right, strict=True)]


_P64 = 2**32 * 4294967295 + 1
_P128 = 2**66 * 4611686018427387897 + 1

Field64 = Field("Field64", _P64, 8, 2**32, pow(7, 4294967295, _P64))
Field128 = Field("Field128", _P128, 16, 2**66, pow(7, 4611686018427387897, _P128))
