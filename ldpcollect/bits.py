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


def column_sums(packed: bytes, n_rows: int, n_bits: int) -> NDArray[np.int64]:
    """Per bit position, how many of `n_rows` packed rows (each `packed_length(n_bits)` bytes)
    have it set. Never materializes one byte per bit of all the rows at once."""
    row_bytes = packed_length(n_bits)
    rows = np.frombuffer(packed, dtype=np.uint8).reshape(n_rows, row_bytes)
    if row_bytes < _WIDE_ROW_BYTES:
        return _unpacked_sums(rows, n_bits)
    return _lane_sums(rows, n_bits)


# Below this row width, unpacking a few thousand rows at a time is quicker than the per-chunk
# numpy calls of the lane sums (crossover measured at about 768 bits).
_WIDE_ROW_BYTES = 96
_UNPACK_BITS = 1 << 22
# One bit per byte lane of a 64-bit word; 255 rows of such words never carry between lanes.
_LANE_ONES = np.uint64(0x0101_0101_0101_0101)
_LANE_ROWS = 255


def _unpacked_sums(rows: NDArray[np.uint8], n_bits: int) -> NDArray[np.int64]:
    """Unpack a bounded number of rows at a time (about 4 MiB of bits) and sum them."""
    step = max(1, _UNPACK_BITS // max(n_bits, 1))
    total = np.zeros(n_bits, dtype=np.int64)
    for start in range(0, len(rows), step):
        bits = np.unpackbits(rows[start : start + step], axis=1, count=n_bits)
        total += bits.sum(axis=0, dtype=np.int64)
    return total


def _lane_sums(rows: NDArray[np.uint8], n_bits: int) -> NDArray[np.int64]:
    """Bit-plane sums over 64-bit words, 255 rows at a time (about 8 numpy passes over the
    packed bytes instead of unpacking 8 bytes per byte).

    Each row is read as little-endian uint64 words, byte j of the row in lane j % 8 of word
    j // 8. For bit b, `(word >> b) & 0x0101..01` leaves in each lane bit b of that lane's
    byte; adding up to 255 such words keeps every lane's count within its byte, so one
    uint64 sum per word column counts bit b of 8 byte columns at once. Bit b of byte j is
    target 8 * j + 7 - b (MSB-first packing).
    """
    n_rows, row_bytes = rows.shape
    padded = -(-row_bytes // 8) * 8
    per_plane = np.zeros((8, padded), dtype=np.int64)  # [7 - b, j]: bit b of byte column j
    block = np.zeros((min(n_rows, _LANE_ROWS), padded), dtype=np.uint8)
    plane = np.empty((len(block), padded // 8), dtype=np.uint64)
    for start in range(0, n_rows, _LANE_ROWS):
        part = rows[start : start + _LANE_ROWS]
        k = len(part)
        block[:k, :row_bytes] = part  # aligned and padded with zero bytes
        words = block[:k].view("<u8")
        out = plane[:k]
        for b in range(8):
            np.right_shift(words, np.uint64(b), out=out)
            np.bitwise_and(out, _LANE_ONES, out=out)
            per_plane[7 - b] += np.add.reduce(out, axis=0).astype("<u8", copy=False).view(np.uint8)
    return np.ascontiguousarray(per_plane.T).ravel()[:n_bits]
