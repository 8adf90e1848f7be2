"""A compact index of 16-byte keys (report ids, device pseudonyms) to small integers.

Holding millions of reports, a Python dict of bytes costs over 100 bytes a key. Here a key
costs its 16 bytes plus a 4-byte value: recent keys sit in a small dict (the tail, cheap to
add one at a time), and when the tail fills it becomes an immutable sorted run of numpy
columns; runs of similar size merge (like a binary counter), so there are at most about
log2(keys / tail) runs, each searched with `searchsorted`.

A run is ordered by a keyed mix of the whole key (`hi`, a bijection of the key's first 8
bytes for each value of its last 8, `lo`, under a secret drawn at process start), and every
lookup compares the whole key: it scans every entry of the probe's bucket and checks both
halves. Two different keys that fall in one bucket are two entries and are never confused;
the secret keeps a client from choosing report ids or pseudonyms that crowd one bucket (keys
sharing their first bytes would otherwise all land in one and make every lookup scan it).
The mix is MurmurHash3's finalizer, not a cryptographic function: it spreads keys a client
cannot see the order of, which is all a bucket needs. Runs live in memory only and are
rebuilt at every start, so the secret never needs to be stored.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from aggregator.keyfilter import KeyFilter

KEY_BYTES = 16
# Values are stored as uint32: an index holds at most this many keys.
MAX_VALUE = 2**32 - 1
DEFAULT_TAIL = 4096
# A group of at least this many new keys becomes a run at once (`new_keys` sorted it already);
# smaller ones wait in the tail, a dict, until it fills. (A batch mixing queries brings each
# query groups of a few thousand: kept in the tail, every later group would hash its keys.)
RUN_KEYS = 1024
# After a merge that builds a run at least this long, freed heap memory is handed back to the
# system (see `_return_freed_memory`).
_TRIM_AFTER_KEYS = 1 << 16

U64 = npt.NDArray[np.uint64]
Values = npt.NDArray[np.int64]


class _Directory(NamedTuple):
    """Where each range of top bits starts in a long run: narrows `searchsorted` to a few keys.

    A binary search over millions of keys misses the cache at nearly every step; with random
    keys (report ids, pseudonyms) the directory leaves a few keys per range, searched in a few
    vectorized steps. Skewed keys only make `steps` larger: the answer is the same.
    """

    starts: npt.NDArray[np.uint32]  # 2**k + 1 entries: first position of each top-k range
    shift: np.uint64  # 64 - k
    steps: int  # binary search steps for the largest range


# Runs shorter than this are searched with plain `searchsorted`.
_DIRECTORY_FROM = 1 << 16


def _directory(hi: U64, high: np.uint64) -> _Directory | None:
    n = len(hi)
    if n < _DIRECTORY_FROM:
        return None
    k = n.bit_length() - 2  # 2**k ranges: 2 to 4 keys each on average
    shift = np.uint64(64 - k)
    # `hi & high` is sorted and keeps the top k bits (high clears fewer than 64 - k bits).
    counts = np.bincount((hi >> shift).astype(np.intp), minlength=1 << k)
    starts = np.zeros(len(counts) + 1, dtype=np.uint32)
    np.cumsum(counts, out=starts[1:])
    return _Directory(starts, shift, int(counts.max()).bit_length())


@dataclass
class _Run:
    """Keys in buckets of their `hi` with its low bits cleared (`hi & high`), buckets in
    order, with their `lo` halves and values in the same order.

    Sorting whole-key halves would need an argsort; here the position of each key is put in
    the cleared low bits and one plain `np.sort` (much faster) orders everything. `hi` is then
    sorted by bucket, so `searchsorted(hi, probe & high)` finds the first key of a probe's
    bucket (every `hi` of a bucket lies between its floor and the next bucket's floor).
    """

    hi: U64
    lo: U64
    values: npt.NDArray[np.uint32]
    high: np.uint64  # the bits of `hi` that make its bucket
    # Made at the first search (a run merged away first, or rebuilt at a restart, skips it).
    directory: _Directory | None = None
    searched: bool = False

    def first_of_buckets(self, probe: U64) -> npt.NDArray[np.intp]:
        """`searchsorted(hi, probe)` for bucket floors `probe` (as `probe & high`)."""
        if not self.searched:
            self.directory, self.searched = _directory(self.hi, self.high), True
        directory = self.directory
        if directory is None:
            return self.hi.searchsorted(probe, side="left")
        top = (probe >> directory.shift).astype(np.intp)
        low = directory.starts[top].astype(np.intp)
        high = directory.starts[top + 1].astype(np.intp)
        last = len(self.hi) - 1
        for _ in range(directory.steps):
            mid = (low + high) >> 1
            right = (mid < high) & ((self.hi[np.minimum(mid, last)] & self.high) < probe)
            low = np.where(right, mid + 1, low)
            high = np.where(right, high, mid)
        return low

    @classmethod
    def of(cls, hi: U64, lo: U64, values: npt.NDArray[np.uint32]) -> _Run:
        order = _bucket_order(hi)
        return cls(hi[order], lo[order], values[order], _high_bits(len(hi)))

    @classmethod
    def of_packed(cls, packed: bytes, first_value: int) -> _Run:
        """The keys packed in `packed`, with values first_value, first_value + 1, ..."""
        words = _words(packed)
        order = _bucket_order(words[:, 0])
        # One gather of whole 16-byte keys (as complex128 items, a type `take` moves fast):
        # half the cache misses of gathering each half.
        whole = words.view(np.complex128).reshape(-1).take(order)
        rows = whole.view("<u8").reshape(-1, 2)
        values = (order + first_value).astype(np.uint32)
        return cls(
            np.ascontiguousarray(rows[:, 0]),
            np.ascontiguousarray(rows[:, 1]),
            values,
            _high_bits(len(words)),
        )

    def __len__(self) -> int:
        return len(self.hi)

    def lookup(self, hi: U64, lo: U64, found: Values) -> None:
        """Set `found[i]` to the value of key i where this run holds it."""
        n = len(self.hi)
        probe = hi & self.high
        start = self.first_of_buckets(probe)
        at = np.minimum(start, n - 1)
        inside = start < n
        exact = inside & (self.hi[at] == hi) & (self.lo[at] == lo)
        found[exact] = self.values[at[exact]]
        # A bucket's first key is not the probe but the bucket goes on: look further (rare:
        # keys this close are one in millions, unless made to collide on purpose).
        shared = inside & ~exact & ((self.hi[at] & self.high) == probe)
        for i in np.flatnonzero(shared).tolist():
            j = int(start[i]) + 1
            while j < n and (self.hi[j] & self.high) == probe[i]:
                if self.hi[j] == hi[i] and self.lo[j] == lo[i]:
                    found[i] = int(self.values[j])
                    break
                j += 1

    def without(self, hi: U64, lo: U64) -> _Run:
        """This run less the given keys (those it holds)."""
        keep = np.ones(len(self.hi), dtype=bool)
        probe = hi & self.high
        start = self.hi.searchsorted(probe, side="left")
        stop = self.hi.searchsorted(probe | ~self.high, side="right")
        for i in np.flatnonzero(stop > start).tolist():
            span = slice(int(start[i]), int(stop[i]))
            keep[span] &= (self.hi[span] != hi[i]) | (self.lo[span] != lo[i])
        return _Run(self.hi[keep], self.lo[keep], self.values[keep], self.high)


@dataclass(frozen=True)
class NewKeys:
    """Keys checked to be new, as a run ready to add (`KeyIndex.new_keys`)."""

    keys: list[bytes]
    first_value: int
    run: _Run


def _merge(a: _Run, b: _Run) -> _Run:
    """One run of the keys of `a` and `b`, in linear time.

    Both are in bucket order for their own masks, so also for the coarser mask of the merged
    run (whose order within a bucket does not matter): a stable argsort of the two bucket
    columns one after the other is a merge of two sorted runs (timsort finds them), and the
    gathers that follow read nearly in order.
    """
    high = _high_bits(len(a) + len(b))
    order = np.argsort(np.concatenate([a.hi & high, b.hi & high]), kind="stable")
    hi, lo, values = (
        np.concatenate([x, y]).take(order)
        for x, y in ((a.hi, b.hi), (a.lo, b.lo), (a.values, b.values))
    )
    return _Run(hi, lo, values, high)


def _high_bits(n: int) -> np.uint64:
    """The bucket mask of a run of `n` keys: all but the low bits that can number them."""
    return ~np.uint64((1 << max(1, (n - 1).bit_length())) - 1)


def _bucket_order(hi: U64) -> npt.NDArray[np.intp]:
    """Positions of `hi` in bucket order (ties by position), by one plain sort."""
    high = _high_bits(len(hi))
    keyed = np.sort((hi & high) | np.arange(len(hi), dtype=np.uint64))
    return (keyed & ~high).view(np.intp)


# The process's secret for `_keyed` (see the module docstring).
_SECRET = np.frombuffer(os.urandom(16), dtype="<u8")
_MIX_A = np.uint64(0xFF51AFD7ED558CCD)
_MIX_B = np.uint64(0xC4CEB9FE1A85EC53)
_MIX_SHIFT = np.uint64(33)


def _mix_in_place(x: U64, scratch: U64) -> None:
    """MurmurHash3's 64-bit finalizer, in place: a bijection whose every output bit depends on
    every input bit (uint64 arithmetic wraps, as the finalizer intends)."""
    for multiplier in (_MIX_A, _MIX_B):
        np.right_shift(x, _MIX_SHIFT, out=scratch)
        x ^= scratch
        x *= multiplier
    np.right_shift(x, _MIX_SHIFT, out=scratch)
    x ^= scratch


def _keyed(first: U64, lo: U64) -> U64:
    """`hi` of each key: mix(first ^ mix(lo ^ s0) ^ s1), a bijection of `first` for each `lo`,
    so (`hi`, `lo`) still names exactly one key."""
    hi: U64 = lo ^ _SECRET[0]
    scratch = np.empty_like(hi)
    _mix_in_place(hi, scratch)
    hi ^= first
    hi ^= _SECRET[1]
    _mix_in_place(hi, scratch)
    return hi


_SECRET_INTS = (int(_SECRET[0]), int(_SECRET[1]))
_MASK64 = (1 << 64) - 1


def _mix_int(x: int) -> int:
    """`_mix_in_place` for one Python int (quicker than numpy for a single key)."""
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _MASK64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _MASK64
    return x ^ (x >> 33)


def _keyed_key(key: bytes) -> tuple[np.uint64, np.uint64]:
    """(`hi`, `lo`) of one 16-byte key, as `halves` gives them."""
    first = int.from_bytes(key[:8], "little")
    lo = int.from_bytes(key[8:], "little")
    hi = _mix_int(first ^ _mix_int(lo ^ _SECRET_INTS[0]) ^ _SECRET_INTS[1])
    return np.uint64(hi), np.uint64(lo)


# Keys mixed at a time by `_words`: the scratch columns stay in the CPU's cache.
_MIX_CHUNK = 1 << 14


def _words(packed: bytes) -> npt.NDArray[np.uint64]:
    """Each 16-byte key packed in `packed` as a row (`hi`, `lo`): see `halves`."""
    raw = np.frombuffer(packed, dtype="<u8").reshape(-1, 2)
    words = np.empty_like(raw)
    for start in range(0, len(raw), _MIX_CHUNK):
        rows = slice(start, start + _MIX_CHUNK)
        words[rows, 1] = raw[rows, 1]
        words[rows, 0] = _keyed(raw[rows, 0], raw[rows, 1])
    return words


def halves(packed: bytes) -> tuple[U64, U64]:
    """(`hi`, `lo`) of each 16-byte key packed in `packed`, as uint64: `lo` is the key's last
    8 bytes, `hi` a keyed mix of the whole key (`_keyed`)."""
    raw = np.frombuffer(packed, dtype="<u8").reshape(-1, 2)
    lo = np.ascontiguousarray(raw[:, 1])
    return _keyed(raw[:, 0], lo), lo


class KeyIndex:
    """16-byte keys to values in [0, 2**32): add, look up, remove (rarely)."""

    def __init__(self, tail_limit: int = DEFAULT_TAIL, run_keys: int = RUN_KEYS) -> None:
        self._tail_limit = max(1, tail_limit)
        self._run_keys = max(1, run_keys)
        self._tail: dict[bytes, int] = {}
        self._runs: list[_Run] = []  # sizes non-increasing
        self._len = 0
        # Over the keys in runs (the tail is a dict); None: built from the runs when next
        # needed (a restart's first group pays for it, not the restart).
        self._filter: KeyFilter | None = None

    def __len__(self) -> int:
        return self._len

    def __contains__(self, key: bytes) -> bool:
        return self.get(key) is not None

    @property
    def nbytes(self) -> int:
        """Bytes in runs and their filter (the tail is a dict of at most `tail_limit` keys)."""
        runs = sum(r.hi.nbytes + r.lo.nbytes + r.values.nbytes for r in self._runs)
        return runs + (self._filter.nbytes if self._filter is not None else 0)

    def get(self, key: bytes) -> int | None:
        value = self._tail.get(key)
        if value is not None or not self._runs:
            return value
        hi, lo = _keyed_key(key)
        for run in self._runs:
            probe = hi & run.high
            at = int(run.hi.searchsorted(probe))
            while at < len(run.hi) and (run.hi[at] & run.high) == probe:
                if run.hi[at] == hi and run.lo[at] == lo:
                    return int(run.values[at])
                at += 1
        return None

    def lookup(self, packed: bytes) -> Values:
        """The value of each key packed in `packed` (16 bytes each), -1 where absent."""
        found = self._in_runs(packed)
        if self._tail:
            get = self._tail.get
            for i, key in enumerate(_split(packed)):
                value = get(key)
                if value is not None:
                    found[i] = value
        return found

    def lookup_values(self, packed: bytes) -> Values:
        """`lookup` (the name `aggregator.keytable.Keys` gives it)."""
        return self.lookup(packed)

    def _in_runs(self, packed: bytes) -> Values:
        """`lookup` over the runs only."""
        hi, lo = halves(packed)
        found = np.full(len(hi), -1, dtype=np.int64)
        if not self._runs:
            return found
        # Probes in key order walk each run forwards: far fewer cache misses.
        order = np.argsort(hi)
        hi, lo = hi[order], lo[order]
        found_sorted = np.full(len(hi), -1, dtype=np.int64)
        for run in self._runs:
            run.lookup(hi, lo, found_sorted)
        found[order] = found_sorted
        return found

    def new_keys(self, keys: list[bytes], packed: bytes, first_value: int) -> NewKeys | None:
        """`keys` (also given packed) ready for `add_new` with values first_value,
        first_value + 1, ..., or None when one of them repeats among them or is held.

        One sort serves the three steps: the check for repeats (equal keys are in one
        bucket), the lookups (probes in key order) and the new run itself.
        """
        if first_value + len(keys) > MAX_VALUE:
            raise OverflowError("a key index holds at most 2**32 - 1 keys")
        run = _Run.of_packed(packed, first_value)
        high = run.high
        if ((run.hi[1:] & high) == (run.hi[:-1] & high)).any() and len(set(keys)) != len(keys):
            return None
        # (`isdisjoint` hashes every key even against an empty tail: skip it then.)
        if self._tail and not self._tail.keys().isdisjoint(keys):
            return None
        if self._runs:
            # Only the keys the filter cannot rule out are searched (still in bucket order).
            maybe = self._runs_filter().maybe_held(run.lo)
            if len(maybe):
                hi, lo = run.hi[maybe], run.lo[maybe]
                found = np.full(len(maybe), -1, dtype=np.int64)
                for held in self._runs:
                    held.lookup(hi, lo, found)
                if (found >= 0).any():
                    return None
        return NewKeys(keys, first_value, run)

    def add_all_new(self, packed: bytes, first_value: int) -> bool:
        """Add every key packed in `packed` (values first_value, first_value + 1, ...), or
        none when one of them is held or repeats among them: returns whether they were."""
        new = self.new_keys(_split(packed), packed, first_value)
        if new is None:
            return False
        self.add_new(new)
        return True

    def add_new(self, new: NewKeys) -> None:
        """Add keys checked by `new_keys` (nothing added in between)."""
        n = len(new.keys)
        self._len += n
        if n < self._run_keys and len(self._tail) + n < self._tail_limit:
            values = range(new.first_value, new.first_value + n)
            self._tail.update(zip(new.keys, values, strict=True))
            return
        if self._tail:
            # Empty the tail too: while it holds keys, every `new_keys` hashes each key.
            self._flush_tail()
        self._push(new.run)

    def add(self, key: bytes, value: int) -> None:
        """Add a key that is not held."""
        self._tail[key] = value
        self._len += 1
        if len(self._tail) >= self._tail_limit:
            self._flush_tail()

    def bulk_add(self, packed: bytes, first_value: int) -> None:
        """Add many keys at once (none held), with values first_value, first_value + 1, ...,
        e.g. when rebuilding from storage."""
        n = len(packed) // KEY_BYTES
        if n == 0:
            return
        if first_value + n > MAX_VALUE:
            raise OverflowError("a key index holds at most 2**32 - 1 keys")
        self._len += n
        self._push(_Run.of_packed(packed, first_value))

    def discard_many(self, packed: bytes) -> None:
        """Remove the keys packed in `packed` where held (undoing a failed transaction)."""
        keys = _split(packed)
        before = self._len
        removed = 0
        for key in keys:
            if self._tail.pop(key, None) is not None:
                removed += 1
        hi, lo = halves(packed)
        runs = []
        for run in self._runs:
            smaller = run.without(hi, lo)
            removed += len(run) - len(smaller)
            if len(smaller):
                runs.append(smaller)
        self._runs = sorted(runs, key=len, reverse=True)
        self._len = before - removed

    def clear(self) -> None:
        self._tail.clear()
        self._runs = []
        self._len = 0
        self._filter = None

    def _runs_filter(self) -> KeyFilter:
        if self._filter is None:
            self._filter = KeyFilter.of([r.lo for r in self._runs], sum(map(len, self._runs)))
        return self._filter

    def _flush_tail(self) -> None:
        keys = list(self._tail)
        values = np.fromiter(self._tail.values(), dtype=np.uint32, count=len(keys))
        hi, lo = halves(b"".join(keys))
        self._tail = {}
        self._push(_Run.of(hi, lo, values))

    def _push(self, run: _Run) -> None:
        """Add a run, merging while the last run is no larger than twice the new one."""
        runs = self._runs
        if self._filter is not None:
            if self._filter.fits(len(run)):
                self._filter.add(run.lo)
            else:
                self._filter = None  # rebuilt larger when next needed
        merged = False
        while runs and len(runs[-1]) <= 2 * len(run):
            merged = True
            run = _merge(runs.pop(), run)
        runs.append(run)
        if len(run) >= _TRIM_AFTER_KEYS and merged:
            _return_freed_memory()


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] | None = getattr(ctypes.CDLL(name), "malloc_trim", None)
    except OSError:
        return None
    return trim if name else None


_MALLOC_TRIM = _load_malloc_trim()


def _return_freed_memory() -> None:
    """Give freed heap pages back to the system (glibc's malloc_trim; elsewhere nothing).

    A merge allocates the merged run and frees its inputs and temporaries, megabytes each, in
    sizes that glibc serves from its heap rather than separate mappings; without a trim those
    freed pages stay resident and the process grows by several times what its runs hold.
    """
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _split(packed: bytes) -> list[bytes]:
    return [packed[i : i + KEY_BYTES] for i in range(0, len(packed), KEY_BYTES)]
