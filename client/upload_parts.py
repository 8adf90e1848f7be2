"""Splitting a device fleet's sealed reports into uploads the leader takes: at most
`MAX_UPLOAD_REPORTS` reports and `MAX_UPLOAD_BYTES` bytes each (its per-RPC limit for
UploadSecureReports, docs/design.md "Every role's edge", less room for the message framing
and tokens)."""

from __future__ import annotations

from collections.abc import Sequence

MAX_UPLOAD_REPORTS = 1_000
# The leader refuses an UploadSecureReports request over 8 MiB before reading it.
MAX_UPLOAD_BYTES = 7 << 20


def upload_parts(
    sizes: Sequence[int], max_reports: int = MAX_UPLOAD_REPORTS, max_bytes: int = MAX_UPLOAD_BYTES
) -> list[range]:
    """Consecutive index ranges covering `sizes` (each report's bytes with its token), each
    within both bounds; a report larger than `max_bytes` goes alone."""
    parts: list[range] = []
    start = total = 0
    for i, size in enumerate(sizes):
        if i > start and (i - start >= max_reports or total + size > max_bytes):
            parts.append(range(start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        parts.append(range(start, len(sizes)))
    return parts
