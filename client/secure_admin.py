"""The operator's client for secure queries at a leader (SecureAdmin, bearer token on every
call), shaped like `client.admin.AdminClient` so the CLI's `query`, `ledger` and `release`
commands treat both kinds of query alike. `as_query` shows a secure query as the trusted
mode's `Query` message (the fields both kinds share), so one renderer serves both."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import grpc

if TYPE_CHECKING:  # the collector's side loads numpy and the accounting: only when used
    from client.secure_collector import SecureRelease
    from ldpcollect.mechanisms import Mechanism
    from ldpcollect.secure.sealing import HpkeKeyPair
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from ldpcollect.wire import mechanism_from_proto

STATES = {
    spb.SECURE_QUERY_STATE_OPEN: pb.QUERY_STATE_OPEN,
    spb.SECURE_QUERY_STATE_CLOSED: pb.QUERY_STATE_CLOSED,
    spb.SECURE_QUERY_STATE_RELEASED: pb.QUERY_STATE_RELEASED,
}


def as_query(query: spb.SecureQuery) -> pb.Query:
    """The secure query as a trusted `Query`: every device answers all rounds in one upload
    (an SP pair is sealed for round 2), so each round's count is the aggregated reports."""
    rounds = mechanism_from_proto(query.mechanism).rounds
    return pb.Query(
        query_id=query.query_id,
        description=query.description,
        mechanism=query.mechanism,
        location_scheme=query.location_scheme,
        targets=list(query.targets),
        rounds=rounds,
        current_round=query.upload_round,
        state=STATES.get(query.state, pb.QUERY_STATE_UNSPECIFIED),
        min_reports=query.min_reports,
        noise=pb.ReleaseNoise(sigma=query.noise_sigma),
        reports_per_round=[query.aggregated_reports] * rounds,
        completed_devices=query.aggregated_reports,
        require_tokens=query.require_tokens,
        token_issuer=query.token_issuer,
    )


class SecureAdminClient:
    """Wraps `SecureAdminStub`; every call carries `authorization: Bearer <token>`."""

    def __init__(self, channel: grpc.Channel, token: str, *, timeout: float = 60.0) -> None:
        self._channel = channel
        self._token = token
        self._stub = spb_grpc.SecureAdminStub(channel)
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout

    def create_query(
        self,
        collector: HpkeKeyPair,
        mechanism: Mechanism,
        scheme: pb.LocationScheme,
        targets: Sequence[int],
        *,
        query_id: str = "",
        description: str = "",
        min_reports: int = 1,
        noise_sigma: Fraction | None = None,
        allow_no_privacy: bool = False,
        require_tokens: bool = False,
    ) -> spb.SecureQuery:
        from client.secure_collector import create_secure_query

        return create_secure_query(
            self._channel,
            self._token,
            collector,
            mechanism,
            targets,
            min_reports,
            "" if noise_sigma is None else str(noise_sigma),
            query_id,
            description,
            require_tokens=require_tokens,
            scheme=scheme,
            allow_no_privacy=allow_no_privacy,
        )

    def list_queries(self) -> list[spb.SecureQuery]:
        response = self._stub.ListSecureQueries(
            spb.ListSecureQueriesRequest(), metadata=self._metadata, timeout=self._timeout
        )
        return list(response.queries)

    def get_query(self, query_id: str) -> spb.SecureQuery:
        return self._stub.GetSecureQuery(
            spb.GetSecureQueryRequest(query_id=query_id),
            metadata=self._metadata,
            timeout=self._timeout,
        )

    def close(self, query_id: str) -> spb.SecureQuery:
        return self._stub.CloseSecureQuery(
            spb.CloseSecureQueryRequest(query_id=query_id),
            metadata=self._metadata,
            timeout=self._timeout,
        )

    def release(self, collector: HpkeKeyPair, query_id: str) -> SecureRelease:
        """Close (if open), wait for held reports, collect both shares and open them. A
        released query returns the same sealed shares again, never fresh noise."""
        from client.secure_collector import release_secure_query

        return release_secure_query(self._channel, self._token, collector, query_id)

    def ledger(self) -> pb.Ledger:
        return self._stub.GetSecureLedger(
            pb.GetLedgerRequest(), metadata=self._metadata, timeout=self._timeout
        )

    def set_budget(
        self,
        epsilon: float,
        delta: float,
        filter: str = "",
        new_filter: bool = False,
        no_budget: bool = False,
    ) -> pb.Ledger:
        return self._stub.SetSecureBudget(
            pb.SetBudgetRequest(
                epsilon=epsilon,
                delta=delta,
                filter=filter,
                new_filter=new_filter,
                no_budget=no_budget,
            ),
            metadata=self._metadata,
            timeout=self._timeout,
        )
