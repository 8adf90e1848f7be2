"""Valid reports already in wire form, many at a time: one numpy row per report.

A load test must spend its CPU on sending, not on building protobuf objects, so it encodes its
reports before the clock starts, vectorized. Each row is a complete serialized
`SubmitReportRequest` (field 1 = the `Report`), which is also, byte for byte, one `reports`
entry of a `SubmitBatchRequest` (field 1 too): a batch is consecutive rows joined.

Answers are random bits with zero padding; pseudonyms and report ids are 16 random bytes each,
so two runs never collide (with overwhelming probability) unless given the same seed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError

ID_BYTES = 16
# Proto field tags (field number << 3 | wire type): 0 = varint, 2 = length-delimited.
_QUERY_ID, _ROUND, _PSEUDONYM, _REPORT_ID, _ANSWERS = 0x0A, 0x10, 0x1A, 0x22, 0x2A
_REPORT = 0x0A  # SubmitReportRequest.report and SubmitBatchRequest.reports


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer."""
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _layout(query_id: str, round_: int, n_targets: int) -> tuple[bytes, bytes, int]:
    """(bytes before the pseudonym, the answers' tag and length, answer bytes per report)."""
    answer_bytes = (n_targets + 7) // 8
    qid = query_id.encode()
    fixed = bytes([_QUERY_ID]) + varint(len(qid)) + qid + bytes([_ROUND]) + varint(round_)
    answers_head = bytes([_ANSWERS]) + varint(answer_bytes)
    report_len = len(fixed) + 2 * (2 + ID_BYTES) + len(answers_head) + answer_bytes
    head = bytes([_REPORT]) + varint(report_len) + fixed
    return head, answers_head, answer_bytes


def row_bytes(query_id: str, round_: int, n_targets: int) -> int:
    """The size of one encoded report (one row)."""
    head, answers_head, answer_bytes = _layout(query_id, round_, n_targets)
    return len(head) + 2 * (2 + ID_BYTES) + len(answers_head) + answer_bytes


def encode_reports(
    query_id: str, round_: int, n_targets: int, count: int, rng: np.random.Generator
) -> npt.NDArray[np.uint8]:
    """`count` distinct valid reports for `query_id` and `round_`, shape (count, row_bytes)."""
    if not query_id or n_targets < 1 or round_ < 1 or count < 0:
        raise ParameterError(
            "reports", (query_id, round_, n_targets, count), "a query id, round >= 1, targets >= 1"
        )
    head, answers_head, answer_bytes = _layout(query_id, round_, n_targets)
    rows = np.empty((count, row_bytes(query_id, round_, n_targets)), dtype=np.uint8)
    at = 0

    def put_constant(data: bytes) -> None:
        nonlocal at
        rows[:, at : at + len(data)] = np.frombuffer(data, dtype=np.uint8)
        at += len(data)

    def put_random(width: int) -> npt.NDArray[np.uint8]:
        nonlocal at
        part = rows[:, at : at + width]
        part[...] = np.frombuffer(rng.bytes(count * width), dtype=np.uint8).reshape(count, width)
        at += width
        return part

    put_constant(head)
    for tag in (_PSEUDONYM, _REPORT_ID):
        put_constant(bytes([tag, ID_BYTES]))
        put_random(ID_BYTES)
    put_constant(answers_head)
    answers = put_random(answer_bytes)
    padding = 8 * answer_bytes - n_targets
    answers[:, -1] &= np.uint8((0xFF << padding) & 0xFF)
    return rows
