"""Leader: its calls to the helper (aggregation.proto) with the peer token; a failed call
becomes a domain error naming the helper's status, so the domain never sees gRPC: the
helper's refusals (its policy: FAILED_PRECONDITION, RESOURCE_EXHAUSTED; INVALID_ARGUMENT,
ALREADY_EXISTS) keep their kind, anything else is `Unavailable`."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import grpc

from aggregator.errors import (
    AlreadyExists,
    FailedPrecondition,
    Invalid,
    ServiceError,
    Unavailable,
)
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.v1 import aggregation_pb2_grpc as apb_grpc

T = TypeVar("T")
TIMEOUT_S = 60.0
# The helper's refusals passed on with their own kind (the operator must see the rule).
REFUSALS: dict[grpc.StatusCode, type[ServiceError]] = {
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: FailedPrecondition,
    grpc.StatusCode.INVALID_ARGUMENT: Invalid,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
}


class HelperClient:
    def __init__(self, channel: grpc.aio.Channel, peer_token: str) -> None:
        self._stub = apb_grpc.HelperStub(channel)
        self._metadata = (("authorization", f"Bearer {peer_token}"),)

    async def _call(self, what: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except grpc.aio.AioRpcError as error:
            kind = REFUSALS.get(error.code(), Unavailable)
            raise kind(
                f"the helper did not {what} ({error.code().name}: {error.details()})"
            ) from None

    async def hpke_config(self) -> apb.GetHpkeConfigResponse:
        """Its HPKE config, with its origin name and the token issuer it accepts."""
        return await self._call(
            "give its HPKE config",
            self._stub.GetHpkeConfig(
                apb.GetHpkeConfigRequest(), metadata=self._metadata, timeout=TIMEOUT_S
            ),
        )

    async def provision(self, request: apb.ProvisionQueryRequest) -> apb.ProvisionQueryResponse:
        return await self._call(
            "provision the query",
            self._stub.ProvisionQuery(request, metadata=self._metadata, timeout=TIMEOUT_S),
        )

    async def aggregate(self, request: apb.AggregationJobRequest) -> apb.AggregationJobResponse:
        return await self._call(
            "finish an aggregation job",
            self._stub.Aggregate(request, metadata=self._metadata, timeout=TIMEOUT_S),
        )

    async def aggregate_share(self, query_id: str, reports: int) -> apb.AggregateShareResponse:
        return await self._call(
            "give its aggregate share",
            self._stub.AggregateShare(
                apb.AggregateShareRequest(query_id=query_id, reports=reports),
                metadata=self._metadata,
                timeout=TIMEOUT_S,
            ),
        )
