"""The stored release's JSON: by columns, read back to the same record; releases stored one
object per target (the earlier layout) still read."""

from __future__ import annotations

import json
import math
from typing import Any

from aggregator.model import ReleaseRecord, TargetRelease
from aggregator.store.release_codec import release_from_json, release_to_json


def test_a_stored_release_reads_back_in_either_layout() -> None:
    record = ReleaseRecord(
        query_id="q",
        participants=12,
        released_at=1700000000.25,
        estimates=tuple(
            TargetRelease(2**64 - 1 - i, 1.5 * i, 0.25, -0.5, math.inf, 12, (i, -3 * i))
            for i in range(5)
        ),
        claims=({"view": "public", "epsilon": math.inf, "figures": {"local_exact": 1.25}},),
    )
    assert release_from_json(release_to_json(record)) == record
    rows = {**asdict_fields(record), "estimates": [e._asdict() for e in record.estimates]}
    assert release_from_json(json.dumps(rows)) == record  # stored one object per target
    empty = ReleaseRecord("e", 0, 1.0, (), ())
    assert release_from_json(release_to_json(empty)) == empty


def asdict_fields(record: ReleaseRecord) -> dict[str, Any]:
    return {
        "query_id": record.query_id,
        "participants": record.participants,
        "released_at": record.released_at,
        "claims": list(record.claims),
    }
