"""The stored release's JSON: the same text as the generic dataclass encoding, and it reads
back to the same record."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

from aggregator.model import ReleaseRecord, TargetRelease
from aggregator.store.release_codec import release_from_json, release_to_json


def test_the_stored_text_is_asdicts_and_reads_back() -> None:
    record = ReleaseRecord(
        query_id="q",
        participants=12,
        released_at=1700000000.25,
        estimates=tuple(
            TargetRelease(10**12 + i, 1.5 * i, 0.25, -0.5, math.inf, 12, (i, 3 * i))
            for i in range(5)
        ),
        claims=({"view": "public", "epsilon": math.inf, "figures": {"local_exact": 1.25}},),
    )
    text = release_to_json(record)
    assert text == json.dumps(asdict(record))
    assert release_from_json(text) == record
