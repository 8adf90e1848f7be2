"""Packed answer bits: one bit per target, most significant bit first (np.packbits order)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ldpcollect.errors import ParameterError


def packed_length(n: int) -> int:
    """Bytes needed for n bits (= ceil(n/8))."""
    if n < 0:
        raise ParameterError("n", n, "[0, inf)")
    return -(-n // 8)


def pack(bits: Sequence[bool] | NDArray[np.bool_] | NDArray[np.integer]) -> bytes:
    """Pack bits (truthy = 1) MSB first; padding bits of the last byte are 0."""
    arr = np.asarray(bits)
    if arr.ndim != 1:
        raise ParameterError("bits", f"shape {arr.shape}", "a one-dimensional sequence of bits")
    return np.packbits(arr.astype(np.bool_)).tobytes()


def padding_mask(n: int) -> int:
    """Mask of the used bits in the last byte of n packed bits (0xFF when n is a multiple of 8)."""
    rem = n % 8
    return 0xFF if rem == 0 else (0xFF << (8 - rem)) & 0xFF


def unpack(data: bytes, n: int) -> NDArray[np.bool_]:
    """Unpack n bits; the length must be exactly ceil(n/8) bytes and the padding bits zero."""
    expected = packed_length(n)
    if len(data) != expected:
        raise ParameterError(
            "answers", f"{len(data)} bytes", f"exactly {expected} bytes for {n} targets"
        )
    if n % 8 and data[-1] & ~padding_mask(n) & 0xFF:
        raise ParameterError(
            "answers", data[-1:].hex(), "padding bits after the last target equal to 0"
        )
    raw = np.frombuffer(data, dtype=np.uint8)
    return np.unpackbits(raw, count=n).astype(np.bool_)
