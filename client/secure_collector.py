"""The collector (the operator's side of secure mode): create a secure query carrying the
collector's HPKE config, and release it: close, collect both aggregators' noised and sealed
aggregate shares through the leader, open them with the collector's key, add them up and
debias with the mechanism's own estimator (standard errors include both aggregators'
noise). Each share opens only under what its aggregator bound it to (the query's parameters
as that aggregator holds them, its report count and its noise: `share_binding`), taken here
from the leader's answer: a leader that misstates any of them is detected and named
(`LeaderMisstated`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import grpc
import numpy as np

from ldpcollect.accounting.discrete_gaussian import discrete_gaussian_variance
from ldpcollect.intervals import release_intervals
from ldpcollect.mechanisms import Estimates, Mechanism
from ldpcollect.secure.query_vdaf import query_vdaf, round_counts, vdaf_kind
from ldpcollect.secure.sealing import (
    ROLE_HELPER,
    ROLE_LEADER,
    ROLES,
    HpkeKeyPair,
    SealingError,
    open_aggregate_share,
)
from ldpcollect.secure.share_binding import ShareBinding, mechanism_text
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from ldpcollect.wire import mechanism_from_proto, mechanism_to_proto


def _auth(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


def create_secure_query(
    channel: grpc.Channel,
    token: str,
    collector: HpkeKeyPair,
    mechanism: Mechanism,
    targets: Sequence[int],
    min_reports: int,
    noise_sigma: str = "",
    query_id: str = "",
    description: str = "",
    require_tokens: bool = False,
    scheme: pb.LocationScheme | None = None,
    allow_no_privacy: bool = False,
) -> spb.SecureQuery:
    request = spb.CreateSecureQueryRequest(
        query_id=query_id,
        description=description,
        mechanism=mechanism_to_proto(mechanism),
        targets=list(targets),
        min_reports=min_reports,
        noise_sigma=noise_sigma,
        collector_hpke_config=collector.config.encode(),
        require_tokens=require_tokens,
        location_scheme=scheme,
        allow_no_privacy=allow_no_privacy,
    )
    return spb_grpc.SecureAdminStub(channel).CreateSecureQuery(
        request, metadata=_auth(token), timeout=60
    )


@dataclass(frozen=True)
class SecureRelease:
    query: spb.SecureQuery
    mechanism: Mechanism
    round_counts: list[list[int]]
    reports: int
    noise_variance_per_count: float
    estimates: Estimates
    # The release's privacy per view, as the leader's ledger recorded it.
    claims: list[pb.PrivacyClaim]


def signed(value: int, modulus: int) -> int:
    """A field element as the integer nearest zero (noise may make a count negative)."""
    return value - modulus if value > modulus // 2 else value


class LeaderMisstated(SealingError):
    """An aggregate share does not open under what the leader says it is bound to: the
    leader lies about the query, the report count or the noise (or tampered the share)."""


def share_binding(
    query: spb.SecureQuery, reports: int, sigma: str, kind: str, mechanism: Mechanism
) -> ShareBinding:
    return ShareBinding(
        query.query_id,
        query.upload_round,
        kind,
        len(query.targets),
        query.min_reports,
        mechanism_text(mechanism.name, mechanism.params()),
        reports,
        sigma,
    )


def _noise_variance(*sigmas: str) -> float:
    return sum(
        discrete_gaussian_variance(Fraction(s) * Fraction(s)) for s in sigmas if s and Fraction(s)
    )


def check_expected(answer: spb.CollectSharesResponse, expected: spb.SecureQuery) -> None:
    """LeaderMisstated unless the leader's statement of the query is what the collector
    created (mechanism, targets, minimum batch, noise)."""
    stated, wanted = answer.query, expected
    for name in ("query_id", "mechanism", "targets", "min_reports", "noise_sigma"):
        if getattr(stated, name) != getattr(wanted, name):
            raise LeaderMisstated(
                f"the leader states the query's {name} as {getattr(stated, name)!r}, the "
                f"collector created it with {getattr(wanted, name)!r}: not trusting this release"
            )


def open_release(
    collector: HpkeKeyPair,
    answer: spb.CollectSharesResponse,
    expected: spb.SecureQuery | None = None,
) -> SecureRelease:
    """Open both shares, unshard, debias. LeaderMisstated when a share does not open under
    the leader's statement of the query, count and noise (or it differs from `expected`,
    the query as the collector created it)."""
    query = answer.query
    if expected is not None:
        check_expected(answer, expected)
    mechanism = mechanism_from_proto(query.mechanism)
    kind = vdaf_kind(mechanism.name)
    vdaf = query_vdaf(kind, len(query.targets))
    promised = Fraction(query.noise_sigma) if query.noise_sigma else Fraction(0)
    for who, sigma in (
        ("leader", answer.leader_noise_sigma),
        ("helper", answer.helper_noise_sigma),
    ):
        if (Fraction(sigma) if sigma else Fraction(0)) < promised:
            raise LeaderMisstated(
                f"the {who} added noise sigma {sigma or 'none'}, less than the query's "
                f"{query.noise_sigma}: not trusting this release"
            )
    shares = []
    for role, sealed, sigma in (  # the helper's first: it is what a lying leader cannot forge
        (ROLE_HELPER, answer.helper_share, answer.helper_noise_sigma),
        (ROLE_LEADER, answer.leader_share, answer.leader_noise_sigma),
    ):
        binding = share_binding(query, int(answer.reports), sigma, kind, mechanism)
        try:
            opened = open_aggregate_share(collector, role, binding, sealed)
        except SealingError as error:
            raise LeaderMisstated(
                f"the {ROLES[role]}'s aggregate share does not open for {binding.describe()}, "
                f"as the leader states them ({error}): the leader misstates the query's "
                "parameters, the report count or the noise, or the share was altered; not "
                "trusting this release"
            ) from None
        shares.append(vdaf.decode_agg_share(opened))
    modulus = vdaf.field.modulus
    counts = [signed(x, modulus) for x in vdaf.merge(shares)]
    rows = round_counts(kind, counts, len(query.targets))
    variance = _noise_variance(answer.leader_noise_sigma, answer.helper_noise_sigma)
    table = np.asarray(rows, dtype=np.int64)
    estimates = mechanism.estimate(table, int(answer.reports), count_noise_variance=variance)
    # Exact 95% intervals, as the trusted release gives (the plug-in one undercovers small
    # cells), through both aggregators' noise on every count.
    sigmas = [Fraction(s) for s in (answer.leader_noise_sigma, answer.helper_noise_sigma) if s]
    low, high = release_intervals(mechanism, table, int(answer.reports), sigmas)
    estimates = replace(estimates, ci_low=low, ci_high=high)
    return SecureRelease(
        query, mechanism, rows, int(answer.reports), variance, estimates, list(answer.claims)
    )


def release_secure_query(
    channel: grpc.Channel,
    token: str,
    collector: HpkeKeyPair,
    query_id: str,
    wait_s: float = 300.0,
    expected: spb.SecureQuery | None = None,
) -> SecureRelease:
    """Close, wait up to `wait_s` for held reports to be aggregated, collect, open (checked
    against `expected`, the query as created, when given)."""
    stub = spb_grpc.SecureAdminStub(channel)
    closed = stub.CloseSecureQuery(
        spb.CloseSecureQueryRequest(query_id=query_id), metadata=_auth(token), timeout=60
    )
    deadline = time.monotonic() + wait_s
    while closed.pending_reports and time.monotonic() < deadline:
        time.sleep(0.2)  # held reports still being aggregated with the helper
        closed = stub.GetSecureQuery(
            spb.GetSecureQueryRequest(query_id=query_id), metadata=_auth(token), timeout=60
        )
    answer = stub.CollectShares(
        spb.CollectSharesRequest(query_id=query_id), metadata=_auth(token), timeout=120
    )
    return open_release(collector, answer, expected)
