"""A secure release for `ldpcollect release` at a leader: the opened, debiased counts as the
trusted mode's `QueryRelease` (estimates, round counts, claims per view) beside the query as
a trusted `Query`, so the table, maps, GeoJSON, CSV and JSON are the trusted release's; plus
the views in words (`views` in the JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from client.secure_admin import SecureAdminClient, as_query
from ldpcollect.errors import ParameterError
from ldpcollect.v1 import ldpcollect_pb2 as pb

if TYPE_CHECKING:
    from client.secure_collector import SecureRelease


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
    "aggregator": "one aggregator alone, once the release is public: the counts through the "
    "other's noise (before it: random shares, nothing)",
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


def view_lines(views: dict[str, dict[str, object]]) -> list[str]:
    lines = []
    for view in views.values():
        epsilon = view["epsilon"]
        number = "unbounded" if epsilon is None else f"epsilon {epsilon:.3g}"
        lines.append(f"{view['words']}: {number} at delta {view['delta']:g}")
    return lines


def fetch_secure_release(
    client: SecureAdminClient, collector_key: Path, query_id: str
) -> tuple[pb.Query, pb.QueryRelease, dict[str, dict[str, object]]]:
    """Close, collect both noised shares, open them with the collector's key, debias: the
    query and release in the trusted mode's messages, and the views."""
    from ldpcollect.secure.key_file import load_or_create_key_pair
    from ldpcollect.secure.sealing import SealingError

    if not collector_key.exists():
        raise ParameterError(
            "--collector-key",
            str(collector_key),
            "the collector key file the query was created with",
            "it does not exist: the shares are sealed to that key",
        )
    try:
        opened = client.release(load_or_create_key_pair(collector_key), query_id)
    except SealingError as error:
        raise ParameterError(
            "--collector-key",
            str(collector_key),
            "the collector key file the query was created with",
            f"the shares do not open with it ({error})",
        ) from None
    return as_query(opened.query), release_message(opened, opened.claims), views_json(opened.claims)
