"""Serialized `SubmitBatchRequest` -> `ReportColumns` without a protobuf object per report.

A batch from one device fleet is almost always uniform: every `Report` has the same byte length
and the same layout, as protobuf serializes it (field order 1..5, each present once):

    0x0a len query_id | 0x10 round | 0x1a len pseudonym | 0x22 len report_id | 0x2a len answers

so the whole request is `n` equal-length records `0x0a <varint L> <Report>`. `decode_uniform`
reads the first record's layout, checks with numpy that every record has the same tag and
length bytes, then slices the columns out of an (n, record) byte matrix. Query ids and rounds
may differ from record to record (a batch mixing queries whose ids have one length); the usual
batch, one query and one round, is checked with one comparison of those bytes and the tags
and lengths together (0.19 against 0.33 µs a report at 100 targets).

Anything else (reports of different lengths, fields in another order, repeated or unknown
fields, a field proto3 leaves out because it holds its default, such as round 0 or empty
answers, a multi-byte round varint, a non-canonical varint, a non-ASCII query id, query ids
of different lengths, trailing or truncated bytes) returns None, and the caller parses with
protobuf instead. The fast path only
ever accepts bytes whose protobuf parse has exactly the columns it returns.

The usual batch (one query, one round) is decoded in compiled code first
(`aggregator/_native_writer.c`, `decode_one_query`: the same checks), into packed columns
rather than an object per report (`rounds.PackedReports`); `decode_uniform_python` is the
Python reference the tests hold it to.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from aggregator import _native_writer
from aggregator.rounds import PackedReports, ReportColumns
from ldpcollect.v1 import ldpcollect_pb2 as pb

# Tag bytes: (field number << 3) | wire type (0 = varint, 2 = length-delimited).
_BATCH_REPORTS = 0x0A  # SubmitBatchRequest.reports = 1
_QUERY_ID = 0x0A  # Report.query_id = 1 (string)
_ROUND = 0x10  # Report.round = 2 (uint32)
_PSEUDONYM = 0x1A  # Report.device_pseudonym = 3 (bytes)
_REPORT_ID = 0x22  # Report.report_id = 4 (bytes)
_ANSWERS = 0x2A  # Report.answers = 5 (bytes)
# Longest varint read here (5 bytes: below 2**35, more than any message gRPC accepts).
_MAX_VARINT_BYTES = 5


def _varint(data: bytes, pos: int) -> tuple[int, int] | None:
    """The canonical (shortest-form) varint at `pos`: (value, position after it), else None."""
    value = 0
    for i in range(pos, min(pos + _MAX_VARINT_BYTES, len(data))):
        byte = data[i]
        value |= (byte & 0x7F) << (7 * (i - pos))
        if byte < 0x80:
            if byte == 0 and i > pos:
                return None  # a padded varint: protobuf reads it, but leave it to protobuf
            return value, i + 1
    return None


@dataclass(frozen=True)
class _Layout:
    """Where the fields sit in every record of a uniform batch (offsets within a record)."""

    record_bytes: int
    query_id: tuple[int, int]
    round_at: int
    pseudonym: tuple[int, int]
    report_id: tuple[int, int]
    answers: tuple[int, int]


@functools.lru_cache(maxsize=64)
def _fixed_positions(layout: _Layout, *, one_query_and_round: bool) -> npt.NDArray[np.intp]:
    """Offsets of the bytes that must be equal in all records: tags and lengths, and with
    `one_query_and_round` the query id and the round too (the usual batch). Computed once per
    layout (a fleet sends one); the array is shared: read it, never write to it."""
    variable = np.zeros(layout.record_bytes, dtype=bool)
    spans = [layout.pseudonym, layout.report_id, layout.answers]
    if not one_query_and_round:
        spans.append(layout.query_id)
        variable[layout.round_at] = True
    for start, stop in spans:
        variable[start:stop] = True
    return np.flatnonzero(~variable)


def _bytes_field(data: bytes, pos: int, tag: int) -> tuple[int, int] | None:
    """A non-empty length-delimited field with tag `tag` at `pos`: (value start, value end)."""
    if pos >= len(data) or data[pos] != tag:
        return None
    header = _varint(data, pos + 1)
    if header is None or header[0] == 0:
        return None
    length, start = header
    return start, start + length


def _first_layout(data: bytes) -> _Layout | None:
    """The layout of the first record, if it is the common one (see module docstring)."""
    if len(data) < 2 or data[0] != _BATCH_REPORTS:
        return None
    header = _varint(data, 1)
    if header is None:
        return None
    body_length, pos = header
    end = pos + body_length
    if end > len(data) or pos >= end or data[pos] != _QUERY_ID:
        return None
    query_header = _varint(data, pos + 1)
    if query_header is None:
        return None
    query_length, query_start = query_header
    query_end = query_start + query_length
    # Round: one varint byte (rounds 0..127), not left out.
    round_at = query_end + 1
    if round_at >= end or data[query_end] != _ROUND or data[round_at] >= 0x80:
        return None
    pseudonym = _bytes_field(data, round_at + 1, _PSEUDONYM)
    report_id = None if pseudonym is None else _bytes_field(data, pseudonym[1], _REPORT_ID)
    answers = None if report_id is None else _bytes_field(data, report_id[1], _ANSWERS)
    if pseudonym is None or report_id is None or answers is None or answers[1] != end:
        return None
    return _Layout(end, (query_start, query_end), round_at, pseudonym, report_id, answers)


def _column(records: npt.NDArray[np.uint8], span: tuple[int, int]) -> list[bytes]:
    """One bytes object per record: the bytes at `span` (void items keep every byte, NULs too)."""
    start, stop = span
    block = np.ascontiguousarray(records[:, start:stop])
    values: list[bytes] = block.view(f"V{stop - start}").ravel().tolist()
    return values


def _query_ids(records: npt.NDArray[np.uint8], span: tuple[int, int]) -> list[str] | None:
    """Each record's query id (one string object per distinct id), or None if any id is not
    ASCII (protobuf's UTF-8 rules decide those)."""
    start, stop = span
    block = np.ascontiguousarray(records[:, start:stop])
    if block.max() >= 0x80:
        return None
    column = block.view(f"V{stop - start}").ravel()
    same = column == column[0]
    names = [block[0].tobytes().decode("ascii")]
    if same.all():  # the common case: one query
        return names * len(records)
    # A few queries, each found by one comparison of the whole column with its first record.
    codes = np.zeros(len(records), dtype=np.intp)
    rest = np.flatnonzero(~same)
    while len(rest) and len(names) < _FEW_QUERIES:
        match = column[rest] == column[rest[0]]
        codes[rest[match]] = len(names)
        names.append(block[rest[0]].tobytes().decode("ascii"))
        rest = rest[~match]
    if len(rest):  # many queries: sort them out
        distinct, inverse = np.unique(column[rest], return_inverse=True)
        codes[rest] = inverse.ravel() + len(names)
        names += [bytes(v).decode("ascii") for v in distinct.tolist()]
    ids: list[str] = np.array(names, dtype=object)[codes].tolist()
    return ids


# Up to this many queries in one batch, `_query_ids` finds each by comparing the column.
_FEW_QUERIES = 8


def decode_uniform(data: bytes) -> ReportColumns | None:
    """The columns of a uniform serialized `SubmitBatchRequest`, or None to parse it normally.

    When it returns columns they are exactly `SubmitBatchRequest.FromString(data)`'s reports'
    fields, in order.
    """
    one_query = _native_writer.decode_one_query(data)
    if one_query is not None:  # the usual batch, decoded in compiled code, columns packed
        return ReportColumns(packed=PackedReports(*one_query))
    return decode_uniform_python(data)


def decode_uniform_python(data: bytes) -> ReportColumns | None:
    """`decode_uniform` in Python (the reference of the compiled one-query path), with
    every column a list."""
    layout = _first_layout(data)
    if layout is None or len(data) % layout.record_bytes:
        return None
    n = len(data) // layout.record_bytes
    records = np.frombuffer(data, dtype=np.uint8).reshape(n, layout.record_bytes)
    rounds: list[int]
    common = _fixed_positions(layout, one_query_and_round=True)
    query_and_round = slice(layout.query_id[0], layout.round_at + 1)
    if (records[-1, query_and_round] == records[0, query_and_round]).all() and (
        records[1:, common] == records[0, common]
    ).all():
        # One query and one round, as the first record has them (one comparison in all).
        start, stop = layout.query_id
        query_id, round_ = data[start:stop], data[layout.round_at]
        if round_ >= 0x80 or not query_id.isascii():
            return None  # a multi-byte round varint; a query id protobuf must check
        query_ids, rounds = [query_id.decode("ascii")] * n, [round_] * n
    else:
        fixed = _fixed_positions(layout, one_query_and_round=False)
        if not (records[1:, fixed] == records[0, fixed]).all():
            return None
        round_column = records[:, layout.round_at]
        if (round_column >= 0x80).any():
            return None  # a multi-byte round varint in some record
        mixed = _query_ids(records, layout.query_id)
        if mixed is None:
            return None
        query_ids, rounds = mixed, round_column.tolist()
    return ReportColumns(
        query_ids=query_ids,
        rounds=rounds,
        pseudonyms=_column(records, layout.pseudonym),
        report_ids=_column(records, layout.report_id),
        answers=_column(records, layout.answers),
    )


def report_columns(reports: Iterable[pb.Report]) -> ReportColumns:
    """Parsed reports' fields as columns (one pass over the messages, one field read each)."""
    rows = [(r.query_id, r.round, r.device_pseudonym, r.report_id, r.answers) for r in reports]
    if not rows:
        return ReportColumns()
    query_ids, rounds, pseudonyms, report_ids, answers = map(list, zip(*rows, strict=True))
    return ReportColumns(query_ids, rounds, pseudonyms, report_ids, answers)


def decode_batch(data: bytes) -> ReportColumns:
    """The reports of a serialized `SubmitBatchRequest` as columns: a uniform batch directly,
    anything else through protobuf (whose `DecodeError` on malformed bytes propagates)."""
    columns = decode_uniform(data)
    if columns is None:
        columns = report_columns(pb.SubmitBatchRequest.FromString(data).reports)
    return columns
