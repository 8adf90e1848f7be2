"""A secure release as the trusted mode's wire shapes, so the CLI renders both alike: the
opened, debiased counts as a `QueryRelease` (estimates, round counts, claims per view)."""

from __future__ import annotations

from client.secure_collector import SecureRelease
from ldpcollect.v1 import ldpcollect_pb2 as pb


def release_message(release: SecureRelease, claims: list[pb.PrivacyClaim]) -> pb.QueryRelease:
    est = release.estimates
    return pb.QueryRelease(
        query_id=release.query.query_id,
        participants=release.reports,
        estimates=[
            pb.TargetEstimate(
                location_id=target,
                estimate=float(est.estimate[i]),
                std_error=float(est.std_error[i]),
                ci_low=float(est.ci_low[i]),
                ci_high=float(est.ci_high[i]),
                participants=release.reports,
                round_counts=[row[i] for row in release.round_counts],
            )
            for i, target in enumerate(release.query.targets)
        ],
        claims=claims,
    )


VIEW_WORDS = {
    "aggregator": "one aggregator alone: uniformly random shares, nothing about any answer",
    "collector+aggregator": "the collector with one aggregator: protected by the other's noise",
    "public": "the public: the released estimates (both noises; stated at one)",
}


def views_json(claims: list[pb.PrivacyClaim]) -> dict[str, dict[str, object]]:
    """Each view in words and numbers (epsilon at delta; null when unbounded)."""
    out: dict[str, dict[str, object]] = {}
    for claim in claims:
        finite = claim.epsilon != float("inf")
        out[claim.view] = {
            "words": VIEW_WORDS.get(claim.view, claim.view),
            "guarantee": claim.guarantee,
            "epsilon": claim.epsilon if finite else None,
            "delta": claim.delta,
            "explanation": claim.explanation,
        }
    return out
