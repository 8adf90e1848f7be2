"""XofTurboShake128 (draft section 6.2.1): seeds in, a pseudorandom byte stream out.

The message absorbed is len(dst) (2 bytes, little endian) || dst || len(seed) (1 byte) || seed
|| binder, hashed with TurboSHAKE128 (RFC 9861) under domain byte 1. pycryptodome's
TurboSHAKE128 squeezes incrementally, so successive `next` calls continue one stream.
"""

from __future__ import annotations

from Crypto.Hash import TurboSHAKE128

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, decode_little_endian, next_power_of_two

VERSION = 18
"""The draft's VERSION constant (unchanged by the editorial drafts 19 and 20)."""

SEED_SIZE = 32


def format_dst(algo_class: int, algo: int, usage: int) -> bytes:
    """The domain separation tag: version, algorithm class, algorithm id, usage."""
    return (
        VERSION.to_bytes(1, "big")
        + algo_class.to_bytes(1, "big")
        + algo.to_bytes(4, "big")
        + usage.to_bytes(2, "big")
    )


class XofTurboShake128:
    """One XOF stream, bound to a seed, a domain separation tag and a binder string."""

    SEED_SIZE = SEED_SIZE

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        if len(seed) > 255:
            raise VdafError(f"an XOF seed is at most 255 bytes, got {len(seed)}")
        if len(dst) > 65535:
            raise VdafError(f"a domain separation tag is at most 65535 bytes, got {len(dst)}")
        self._hash = TurboSHAKE128.new(domain=1)
        self._hash.update(
            len(dst).to_bytes(2, "little") + dst + len(seed).to_bytes(1, "little") + seed + binder
        )

    def next(self, length: int) -> bytes:
        return self._hash.read(length)

    def next_vec(self, field: Field, length: int) -> list[int]:
        """`length` uniform field elements by rejection sampling: take `encoded_size` bytes,
        mask to the modulus's bit length, keep the value only if it is below the modulus."""
        size, modulus = field.encoded_size, field.modulus
        mask = next_power_of_two(modulus) - 1
        vec: list[int] = []
        while len(vec) < length:
            # Draw the whole remaining count at once; rejections (rare) are topped up, in
            # stream order.
            drawn = decode_little_endian(self.next(size * (length - len(vec))), size)
            if mask != (1 << 8 * size) - 1:  # both draft fields fill their bytes exactly
                drawn = [x & mask for x in drawn]
            if max(drawn) < modulus:
                vec += drawn
            else:
                vec += [x for x in drawn if x < modulus]
        return vec

    @classmethod
    def derive_seed(cls, seed: bytes, dst: bytes, binder: bytes) -> bytes:
        return cls(seed, dst, binder).next(SEED_SIZE)

    @classmethod
    def expand_into_vec(
        cls, field: Field, seed: bytes, dst: bytes, binder: bytes, length: int
    ) -> list[int]:
        return cls(seed, dst, binder).next_vec(field, length)
