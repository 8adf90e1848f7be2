"""A stored release as JSON text (the `releases.body` column of every backend).

Estimates are stored by column (`estimate_columns`): each field is the base64 of its values as
little-endian 8-byte numbers (location ids and participants uint64, estimates and errors IEEE
float64, round counts int64, one column per round), exact and quick to write and read at
65,536 targets. Releases stored earlier, one JSON object per target (`estimates`), read the
same way.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from aggregator.model import ReleaseRecord, TargetRelease, estimate_columns

# Column name -> little-endian dtype, in TargetRelease field order (round counts apart).
_COLUMNS = {
    "location_id": "<u8",
    "estimate": "<f8",
    "std_error": "<f8",
    "ci_low": "<f8",
    "ci_high": "<f8",
    "participants": "<u8",
}


def _encode(values: Any, dtype: str) -> str:
    return base64.b64encode(np.asarray(values, dtype=dtype).tobytes()).decode("ascii")


def _decode(text: str, dtype: str) -> list[Any]:
    values: list[Any] = np.frombuffer(base64.b64decode(text), dtype=dtype).tolist()
    return values


def release_to_json(record: ReleaseRecord) -> str:
    fields = estimate_columns(record.estimates)
    columns: dict[str, Any] = {
        name: _encode(values, dtype)
        for (name, dtype), values in zip(_COLUMNS.items(), fields, strict=False)
    }
    estimates = record.estimates
    rounds = len(estimates[0].round_counts) if estimates else 0
    counts = np.asarray(fields[6], dtype=np.int64).reshape(len(estimates), rounds)
    columns["round_counts"] = [_encode(counts[:, r], "<i8") for r in range(counts.shape[1])]
    return json.dumps(
        {
            "query_id": record.query_id,
            "participants": record.participants,
            "released_at": record.released_at,
            "estimate_columns": columns,
            "claims": list(record.claims),
        }
    )


def release_from_json(text: str) -> ReleaseRecord:
    data = json.loads(text)
    return ReleaseRecord(
        query_id=data["query_id"],
        participants=int(data["participants"]),
        released_at=float(data["released_at"]),
        estimates=_estimates(data),
        claims=tuple(dict(c) for c in data["claims"]),
    )


def _estimates(data: dict[str, Any]) -> tuple[TargetRelease, ...]:
    columns = data.get("estimate_columns")
    if columns is None:  # stored one object per target
        return tuple(
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
        )
    fields = [_decode(columns[name], dtype) for name, dtype in _COLUMNS.items()]
    n = len(fields[0])
    per_round = [_decode(text, "<i8") for text in columns["round_counts"]]
    counts = list(zip(*per_round, strict=True)) if per_round else [()] * n
    if any(len(f) != n for f in fields) or len(counts) != n:
        raise ValueError("stored release columns have different lengths")
    return tuple(map(TargetRelease._make, zip(*fields, counts, strict=True)))
