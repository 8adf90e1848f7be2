"""A release's estimates as serialized `QueryRelease.estimates`, encoded with numpy.

Building one `TargetEstimate` message per target costs microseconds each: seconds for a
release of 65,536 targets. The same bytes are a few numpy passes: every estimate is a record
`0x12 <length> <TargetEstimate>` with its fields in number order, varints written column by
column into an (n, width) byte matrix with a mask of the bytes each row uses. Zero values are
written explicitly (proto3 serializers leave them out; parsers read both the same), so every
record has every field. `release_to_proto` parses these bytes with the rest of the message.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from aggregator.model import TargetRelease, estimate_columns

U8 = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]
_MAX_VARINT = 10


def _varints(values: npt.NDArray[np.uint64]) -> tuple[U8, Mask]:
    """Each value as a 10-byte-wide varint row and a mask of the bytes it uses."""
    n = len(values)
    groups = np.empty((n, _MAX_VARINT), dtype=np.uint8)
    rest = values.copy()
    used = np.ones(n, dtype=np.int64)
    for k in range(_MAX_VARINT):
        groups[:, k] = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest >>= np.uint64(7)
        used += rest > 0
    width = np.arange(_MAX_VARINT)
    mask = width[None, :] < used[:, None]
    more = width[None, :] < (used - 1)[:, None]  # continuation bit on all but the last byte
    groups |= more.astype(np.uint8) << 7
    return groups, mask


def _constant(byte: int, n: int) -> tuple[U8, Mask]:
    return np.full((n, 1), byte, dtype=np.uint8), np.ones((n, 1), dtype=bool)


def _double(tag: int, values: npt.NDArray[np.float64]) -> list[tuple[U8, Mask]]:
    n = len(values)
    raw = np.ascontiguousarray(values.astype("<f8")).view(np.uint8).reshape(n, 8)
    return [_constant(tag, n), (raw, np.ones((n, 8), dtype=bool))]


def encode_estimates(estimates: Sequence[TargetRelease]) -> bytes:
    """The serialized `repeated TargetEstimate estimates = 2` of a QueryRelease."""
    n = len(estimates)
    if n == 0:
        return b""
    rounds = len(estimates[0].round_counts)
    fields = estimate_columns(estimates)
    location = np.array(fields[0], dtype=np.uint64)
    floats = np.array(fields[1:5], dtype=np.float64).T
    participants = np.array(fields[5], dtype=np.uint64)
    counts = np.array(fields[6], dtype=np.int64).reshape(n, rounds)
    body: list[tuple[U8, Mask]] = [_constant(0x08, n), _varints(location)]
    for column, tag in enumerate((0x11, 0x19, 0x21, 0x29)):
        body += _double(tag, floats[:, column])
    body += [_constant(0x30, n), _varints(participants)]
    if rounds:
        packed = [_varints(counts[:, r].view(np.uint64)) for r in range(rounds)]
        packed_length = sum(mask.sum(axis=1) for _, mask in packed)
        body += [_constant(0x3A, n), _varints(packed_length.astype(np.uint64)), *packed]
    body_length = sum(mask.sum(axis=1) for _, mask in body)
    parts = [_constant(0x12, n), _varints(np.asarray(body_length, dtype=np.uint64)), *body]
    matrix = np.hstack([values for values, _ in parts])
    used = np.hstack([mask for _, mask in parts])
    return matrix[used].tobytes()
