"""Aggregator values -> wire messages."""

from __future__ import annotations

from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from aggregator.model import QueryInfo, ReleaseRecord
from aggregator.release import LedgerState, NoiseOnlyAccounting
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.wire import mechanism_to_proto, noise_sigma_to_proto, scheme_from_text

_CLAIM_FIELDS = frozenset(pb.PrivacyClaim.DESCRIPTOR.fields_by_name)


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(round(seconds * 1e9))
    return ts


def query_to_proto(info: QueryInfo) -> pb.Query:
    spec = info.spec
    return pb.Query(
        query_id=spec.query_id,
        description=spec.description,
        mechanism=mechanism_to_proto(spec.mechanism),
        location_scheme=scheme_from_text(spec.scheme),
        targets=spec.targets,
        rounds=spec.mechanism.rounds,
        current_round=info.current_round,
        state=int(info.status),  # type: ignore[arg-type]
        min_reports=spec.min_reports,
        noise=noise_sigma_to_proto(spec.noise_sigma),
        reports_per_round=info.reports_per_round,
        completed_devices=info.completed_devices,
        created_at=timestamp(info.created_at),
    )


def claim_to_proto(claim: dict[str, Any]) -> pb.PrivacyClaim:
    return pb.PrivacyClaim(
        **{k: v for k, v in claim.items() if k in _CLAIM_FIELDS and v is not None}
    )


def release_to_proto(record: ReleaseRecord) -> pb.QueryRelease:
    return pb.QueryRelease(
        query_id=record.query_id,
        participants=record.participants,
        released_at=timestamp(record.released_at),
        estimates=[
            pb.TargetEstimate(
                location_id=e.location_id,
                estimate=e.estimate,
                std_error=e.std_error,
                ci_low=e.ci_low,
                ci_high=e.ci_high,
                participants=e.participants,
                round_counts=e.round_counts,
            )
            for e in record.estimates
        ],
        claims=[claim_to_proto(c) for c in record.claims],
    )


def ledger_to_proto(body: str | None) -> pb.Ledger:
    ledger = LedgerState.from_body(body)
    return pb.Ledger(
        budget_epsilon=ledger.budget_epsilon,
        budget_delta=ledger.budget_delta,
        entries=[
            pb.LedgerEntry(
                query_id=str(e["query_id"]),
                released_at=timestamp(float(e["released_at"])),
                claims=[claim_to_proto(c) for c in e.get("claims", [])],
            )
            for e in ledger.entries
        ],
        notes=[NoiseOnlyAccounting.NOTE],
    )
