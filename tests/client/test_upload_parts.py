"""Uploads split to fit the leader's limits: every report sent once, in order, each upload
within the report and byte bounds (a report over the byte bound alone)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aggregator.role_limits import LEADER_LIMITS
from client.upload_parts import MAX_UPLOAD_BYTES, MAX_UPLOAD_REPORTS, upload_parts


@given(
    sizes=st.lists(st.integers(1, 400), max_size=60),
    max_reports=st.integers(1, 8),
    max_bytes=st.integers(1, 1_000),
)
def test_parts_cover_every_report_once_within_bounds(
    sizes: list[int], max_reports: int, max_bytes: int
) -> None:
    parts = upload_parts(sizes, max_reports, max_bytes)
    assert [i for part in parts for i in part] == list(range(len(sizes)))
    for part in parts:
        assert 1 <= len(part) <= max_reports
        assert sum(sizes[i] for i in part) <= max_bytes or len(part) == 1


def test_the_defaults_fit_the_leader_limit() -> None:
    limit = LEADER_LIMITS.limit("SecureCollector/UploadSecureReports")
    # Framing: a tag and a length of up to 4 bytes per report and per token.
    assert limit > MAX_UPLOAD_BYTES + MAX_UPLOAD_REPORTS * 2 * 5
    sizes = [36_000] * 500  # a 1,000-target Sampling Privacy pair, 500 devices
    parts = upload_parts(sizes)
    assert len(parts) == 3 and all(sum(sizes[i] for i in p) <= MAX_UPLOAD_BYTES for p in parts)
