"""A stored release as JSON text (the `releases.body` column of every backend)."""

from __future__ import annotations

import json

from aggregator.model import ReleaseRecord, TargetRelease


def release_to_json(record: ReleaseRecord) -> str:
    """The record as `dataclasses.asdict` would give it (the same text), built directly: a
    release of 65,536 targets is one dict per target, and asdict's generic deep copy of each
    field costs several times the encoding."""
    return json.dumps(
        {
            "query_id": record.query_id,
            "participants": record.participants,
            "released_at": record.released_at,
            "estimates": [
                {
                    "location_id": e.location_id,
                    "estimate": e.estimate,
                    "std_error": e.std_error,
                    "ci_low": e.ci_low,
                    "ci_high": e.ci_high,
                    "participants": e.participants,
                    "round_counts": list(e.round_counts),
                }
                for e in record.estimates
            ],
            "claims": list(record.claims),
        }
    )


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
