"""A stored release as JSON text (the `releases.body` column of every backend)."""

from __future__ import annotations

import json
from dataclasses import asdict

from aggregator.model import ReleaseRecord, TargetRelease


def release_to_json(record: ReleaseRecord) -> str:
    return json.dumps(asdict(record))


def release_from_json(text: str) -> ReleaseRecord:
    data = json.loads(text)
    return ReleaseRecord(
        query_id=data["query_id"],
        participants=int(data["participants"]),
        released_at=float(data["released_at"]),
        estimates=tuple(
            TargetRelease(
                location_id=int(e["location_id"]),
                estimate=float(e["estimate"]),
                std_error=float(e["std_error"]),
                ci_low=float(e["ci_low"]),
                ci_high=float(e["ci_high"]),
                participants=int(e["participants"]),
                round_counts=tuple(int(c) for c in e["round_counts"]),
            )
            for e in data["estimates"]
        ),
        claims=tuple(dict(c) for c in data["claims"]),
    )
