"""The collector (the operator's side of secure mode): create a secure query carrying the
collector's HPKE config, and release it: close, collect both aggregators' noised and sealed
aggregate shares through the leader, open them with the collector's key, add them up and
debias with the mechanism's own estimator (standard errors include both aggregators'
noise)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import grpc
import numpy as np

from ldpcollect.accounting.discrete_gaussian import discrete_gaussian_variance
from ldpcollect.mechanisms import Estimates, Mechanism
from ldpcollect.secure.query_vdaf import query_vdaf, round_counts, vdaf_kind
from ldpcollect.secure.sealing import ROLE_HELPER, ROLE_LEADER, HpkeKeyPair, open_aggregate_share
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


def open_release(collector: HpkeKeyPair, answer: spb.CollectSharesResponse) -> SecureRelease:
    """Open both shares, unshard, debias. Raises SealingError when a share does not open."""
    query = answer.query
    mechanism = mechanism_from_proto(query.mechanism)
    kind = vdaf_kind(mechanism.name)
    vdaf = query_vdaf(kind, len(query.targets))
    shares = [
        vdaf.decode_agg_share(
            open_aggregate_share(collector, role, query.query_id, query.upload_round, sealed)
        )
        for role, sealed in ((ROLE_LEADER, answer.leader_share), (ROLE_HELPER, answer.helper_share))
    ]
    modulus = vdaf.field.modulus
    counts = [signed(x, modulus) for x in vdaf.merge(shares)]
    rows = round_counts(kind, counts, len(query.targets))
    variance = 0.0
    if query.noise_sigma:
        sigma = Fraction(query.noise_sigma)
        variance = 2 * discrete_gaussian_variance(sigma * sigma)
    estimates = mechanism.estimate(
        np.asarray(rows, dtype=np.int64), int(answer.reports), count_noise_variance=variance
    )
    return SecureRelease(
        query, mechanism, rows, int(answer.reports), variance, estimates, list(answer.claims)
    )


def release_secure_query(
    channel: grpc.Channel,
    token: str,
    collector: HpkeKeyPair,
    query_id: str,
    wait_s: float = 300.0,
) -> SecureRelease:
    """Close, wait up to `wait_s` for held reports to be aggregated, collect, open."""
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
    return open_release(collector, answer)
