"""A secure release for the CLI (`ldpcollect release --secure`, `ldpcollect secure release`):
the opened, debiased counts as the trusted mode's `QueryRelease` (estimates, round counts,
claims per view), so both render alike, and the views in words."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from client.channels import open_channel
from client.secure_collector import SecureRelease, release_secure_query
from ldpcollect.errors import ParameterError
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect_cli.service_render import print_json, release_json


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


def print_secure_release(
    query_id: str,
    collector_key: Path,
    admin_token: str,
    server: str,
    tls_ca: Path | None,
    json_out: bool,
) -> None:
    """The release as a table and the views in words (or JSON: the release and the views)."""
    if not admin_token:
        raise ParameterError("--admin-token", "", "given (or LDPCOLLECT_ADMIN_TOKEN)")
    console = Console()
    collector = load_or_create_key_pair(collector_key)
    with open_channel(server, tls_ca) as channel:
        opened = release_secure_query(channel, admin_token, collector, query_id)
    message = release_message(opened, opened.claims)
    views = views_json(opened.claims)
    if json_out:
        print_json({"release": release_json(message), "views": views})
        return
    table = Table(title=f"secure release of {query_id}, {opened.reports:,} reports")
    for column in ("cell", "estimate", "std err", "95% interval", "round counts"):
        table.add_column(column, justify="right")
    for e in message.estimates:
        table.add_row(
            str(e.location_id),
            f"{e.estimate:.1f}",
            f"{e.std_error:.1f}",
            f"[{e.ci_low:.1f}, {e.ci_high:.1f}]",
            ", ".join(str(c) for c in e.round_counts),
        )
    console.print(table)
    for view in views.values():
        epsilon = view["epsilon"]
        number = "unbounded" if epsilon is None else f"epsilon {epsilon:.3g}"
        console.print(f"{view['words']}: {number} at delta {view['delta']:g}")
