"""A one-hash Bloom filter over a key index's runs: "surely not held" for most new keys.

Checking a group of new report ids against the sorted runs of a `KeyIndex` costs a search per
run for every key, although nearly every key is new. The filter keeps one bit per position
`lo mod m` (`lo`: the key's last 8 bytes, independent of the first 8 that order the runs) for
every key put in a run, with m at least `MIN_BITS_PER_KEY` bits per key: a key whose bit is
clear is surely not in any run, and only the rest (1 in 32 to 1 in 8 new keys) is
searched.

A key whose bit is set may or may not be held: the runs decide, so the filter changes how much
is searched, never an answer (keys made to share their bits only cost searches). Removing keys
leaves their bits set; the next filter made (when the keys outgrow the bits) drops them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]

# Fewer bits per key than this and a larger filter is made, of 16 to 32 bits a key: between 8
# and 32 bits (1 to 4 bytes) per key, so a new key's bit is set with probability at most 1/8.
MIN_BITS_PER_KEY = 8
_SMALLEST_BITS = 1 << 16


class KeyFilter:
    """Bits of the keys' last 8 bytes (`lo`), as added to a key index's runs."""

    def __init__(self) -> None:
        self._bits = np.zeros(_SMALLEST_BITS // 8, dtype=np.uint8)
        self._mask = np.uint64(_SMALLEST_BITS - 1)
        self._keys = 0  # keys added since the last rebuild (removed ones too)

    @property
    def nbytes(self) -> int:
        return self._bits.nbytes

    def fits(self, more: int) -> bool:
        """Whether `more` keys can be added keeping `MIN_BITS_PER_KEY` bits per key."""
        return (self._keys + more) * MIN_BITS_PER_KEY <= len(self._bits) * 8

    def add(self, lo: U64) -> None:
        """Set the bits of these keys (if they do not `fit`, make a larger filter with `of`)."""
        byte, bit = self._positions(lo)
        np.bitwise_or.at(self._bits, byte, np.left_shift(np.uint8(1), bit))
        self._keys += len(lo)

    @classmethod
    def of(cls, los: Iterable[U64], n_keys: int) -> KeyFilter:
        """A filter of the `n_keys` keys whose `lo` halves are `los`, with room to grow."""
        size = max(_SMALLEST_BITS, 1 << (2 * MIN_BITS_PER_KEY * max(1, n_keys) - 1).bit_length())
        made = cls()
        made._bits = np.zeros(size // 8, dtype=np.uint8)
        made._mask = np.uint64(size - 1)
        for lo in los:
            made.add(lo)
        return made

    def maybe_held(self, lo: U64) -> npt.NDArray[np.intp]:
        """Positions of the keys that may be held (their bit is set); the others surely are not."""
        byte, bit = self._positions(lo)
        return np.flatnonzero(np.right_shift(self._bits[byte], bit) & np.uint8(1))

    def _positions(self, lo: U64) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.uint8]]:
        position = lo & self._mask
        byte = (position >> np.uint64(3)).astype(np.intp)
        bit = (position & np.uint64(7)).astype(np.uint8)
        return byte, bit
