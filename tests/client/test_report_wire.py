"""Pre-encoded reports are exactly what protobuf would send, valid and distinct."""

from __future__ import annotations

import numpy as np
import pytest

from client.report_wire import encode_reports, row_bytes, varint
from ldpcollect.errors import ParameterError
from ldpcollect.v1 import ldpcollect_pb2 as pb


@pytest.mark.parametrize(
    ("query_id", "round_", "n_targets"),
    [("q1", 1, 100), ("a" * 64, 2, 1), ("sp-query.v2", 1, 65_536), ("x", 1, 7)],
)
def test_each_row_is_the_protobuf_encoding_of_a_valid_submit_report_request(
    query_id: str, round_: int, n_targets: int
) -> None:
    rows = encode_reports(query_id, round_, n_targets, 5, np.random.default_rng(3))
    assert rows.shape == (5, row_bytes(query_id, round_, n_targets))
    for row in rows:
        request = pb.SubmitReportRequest.FromString(row.tobytes())
        assert request.SerializeToString() == row.tobytes()
        report = request.report
        assert (report.query_id, report.round) == (query_id, round_)
        assert len(report.device_pseudonym) == len(report.report_id) == 16
        assert len(report.answers) == (n_targets + 7) // 8
        padding = 8 * len(report.answers) - n_targets
        assert report.answers[-1] & ((1 << padding) - 1) == 0


def test_consecutive_rows_are_a_submit_batch_request() -> None:
    rows = encode_reports("q1", 1, 100, 300, np.random.default_rng(4))
    batch = pb.SubmitBatchRequest.FromString(rows[100:200].tobytes())
    assert len(batch.reports) == 100
    assert batch.reports[0].SerializeToString() == (
        pb.SubmitReportRequest.FromString(rows[100].tobytes()).report.SerializeToString()
    )


def test_ids_and_answers_are_random_and_distinct() -> None:
    rows = encode_reports("q1", 1, 100, 10_000, np.random.default_rng(5))
    reports = [pb.SubmitReportRequest.FromString(r.tobytes()).report for r in rows]
    assert len({r.report_id for r in reports}) == len(reports)
    assert len({r.device_pseudonym for r in reports}) == len(reports)
    bits = np.unpackbits(np.frombuffer(b"".join(r.answers for r in reports), dtype=np.uint8))
    # 10^6 fair bits (4 padding bits of 104 per report are zero): mean 1/2 within 5 SE.
    real = bits.reshape(len(reports), 104)[:, :100]
    assert abs(real.mean() - 0.5) < 5 * 0.5 / np.sqrt(real.size)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_384, 2**32 - 1])
def test_varint_matches_protobuf(value: int) -> None:
    encoded = pb.Report(round=value).SerializeToString() if value else b"\x10\x00"
    assert b"\x10" + varint(value) == encoded


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ParameterError):
        encode_reports("", 1, 10, 1, np.random.default_rng(0))
    with pytest.raises(ParameterError):
        encode_reports("q", 1, 0, 1, np.random.default_rng(0))
