"""The key index the writer uses: a compiled hash table (`aggregator/_native_writer.c`).

`aggregator.keyindex.KeyIndex` is the pure-Python reference with the same answers, kept as
the oracle of the property tests (tests/aggregator/test_native_writer.py). The compiled one
maps each key to its position in insertion order, which is what both of a query's kinds of
index hold (a report id's ordinal among the held reports, a pseudonym's among its round's):
`add` and `bulk_add` take that position as their value and refuse any other, and
`discard_many` takes back only the newest keys (a failed transaction's). Its loops release
the interpreter lock, so the event loop runs while the writer checks and adds a group.

There is no fallback to Python: if the extension did not build, importing this fails.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from aggregator import _native_writer

Values = npt.NDArray[np.int64]


class KeyTable(_native_writer.KeyTable):
    def lookup_values(self, packed: bytes) -> Values:
        """The value of each key packed in `packed` (16 bytes each), -1 where absent."""
        return np.frombuffer(self.lookup(packed), dtype=np.int64)


class Keys(Protocol):
    """What a query's state needs of a key index (`KeyTable`, or the reference `KeyIndex`)."""

    def __len__(self) -> int: ...
    def __contains__(self, key: bytes) -> bool: ...
    @property
    def nbytes(self) -> int: ...
    def get(self, key: bytes) -> int | None: ...
    def add(self, key: bytes, value: int) -> None: ...
    def add_all_new(self, packed: bytes, first_value: int) -> bool: ...
    def bulk_add(self, packed: bytes, first_value: int) -> None: ...
    def lookup_values(self, packed: bytes) -> Values: ...
    def discard_many(self, packed: bytes) -> None: ...
    def clear(self) -> None: ...


def join_fixed(items: list[bytes], width: int) -> bytes | None:
    """`b"".join(items)` when every item is `width` bytes long, else None."""
    return _native_writer.join_fixed(items, width)


def split_fixed(column: bytes, width: int) -> list[bytes]:
    """`column` cut into values of `width` bytes (the inverse of `join_fixed`)."""
    return _native_writer.split_fixed(column, width)


def column_sums(packed: bytes, n_rows: int, n_bits: int) -> Values:
    """`ldpcollect.bits.column_sums` in compiled code: per bit position, how many of the
    `n_rows` packed rows have it set."""
    row_bytes = (n_bits + 7) // 8
    counts = np.frombuffer(_native_writer.column_sums(packed, n_rows, row_bytes), np.int64)
    return counts[:n_bits]
