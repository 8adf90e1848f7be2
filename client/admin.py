"""A thin typed client for the operator's Admin service (bearer token on every call)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import grpc

from client.channels import ClientIdentity, open_channel
from ldpcollect import wire
from ldpcollect.mechanisms import Mechanism
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc


class AdminClient:
    """Wraps `AdminStub`; every call carries `authorization: Bearer <token>`."""

    def __init__(self, channel: grpc.Channel, token: str, *, timeout: float = 30.0) -> None:
        self._stub = pb_grpc.AdminStub(channel)
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout

    def create_query(
        self,
        mechanism: Mechanism,
        scheme: str,
        targets: Sequence[int],
        *,
        query_id: str = "",
        description: str = "",
        min_reports: int = 1,
        noise_sigma: Fraction | None = None,
        allow_no_privacy: bool = False,
        require_tokens: bool = False,
    ) -> pb.Query:
        request = pb.CreateQueryRequest(
            query_id=query_id,
            description=description,
            mechanism=wire.mechanism_to_proto(mechanism),
            location_scheme=wire.scheme_from_text(scheme),
            targets=list(targets),
            min_reports=min_reports,
            noise=wire.noise_sigma_to_proto(noise_sigma),
            allow_no_privacy=allow_no_privacy,
            require_tokens=require_tokens,
        )
        return self._stub.CreateQuery(request, metadata=self._metadata, timeout=self._timeout)

    def list_queries(self) -> list[pb.Query]:
        response = self._stub.ListQueries(
            pb.ListQueriesRequest(), metadata=self._metadata, timeout=self._timeout
        )
        return list(response.queries)

    def get_query(self, query_id: str) -> pb.Query:
        return self._stub.GetQuery(
            pb.GetQueryRequest(query_id=query_id), metadata=self._metadata, timeout=self._timeout
        )

    def advance(self, query_id: str) -> pb.Query:
        return self._stub.AdvanceRound(
            pb.AdvanceRoundRequest(query_id=query_id),
            metadata=self._metadata,
            timeout=self._timeout,
        )

    def close(self, query_id: str) -> pb.Query:
        return self._stub.CloseQuery(
            pb.CloseQueryRequest(query_id=query_id), metadata=self._metadata, timeout=self._timeout
        )

    def delete(self, query_id: str) -> pb.DeleteQueryResponse:
        return self._stub.DeleteQuery(
            pb.DeleteQueryRequest(query_id=query_id), metadata=self._metadata, timeout=self._timeout
        )

    def release(self, query_id: str) -> pb.QueryRelease:
        return self._stub.Release(
            pb.ReleaseRequest(query_id=query_id), metadata=self._metadata, timeout=self._timeout
        )

    def get_release(self, query_id: str) -> pb.QueryRelease:
        return self._stub.GetRelease(
            pb.GetReleaseRequest(query_id=query_id),
            metadata=self._metadata,
            timeout=self._timeout,
        )

    def ledger(self) -> pb.Ledger:
        return self._stub.GetLedger(
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
        request = pb.SetBudgetRequest(
            epsilon=epsilon,
            delta=delta,
            filter=filter,
            new_filter=new_filter,
            no_budget=no_budget,
        )
        return self._stub.SetBudget(
            request,
            metadata=self._metadata,
            timeout=self._timeout,
        )


@contextmanager
def connect_admin(
    server: str,
    token: str,
    *,
    tls_ca: str | Path | None = None,
    identity: ClientIdentity | None = None,
    timeout: float = 30.0,
) -> Iterator[AdminClient]:
    """An AdminClient on its own channel to `server` (TLS when `tls_ca` is given, presenting
    `identity` for mutual TLS), closed after."""
    with open_channel(server, tls_ca, identity=identity) as channel:
        yield AdminClient(channel, token, timeout=timeout)
