"""The secure roles' gRPC edge: servicers that check the bearer token, run the domain step
(`upload`, `admin`, `aggregation_handler`) and map its refusals to statuses
(`aggregator.status_map`). Leader: SecureCollector (devices, no token) and SecureAdmin (admin
token). Helper: Helper (peer token). Tokens are compared in constant time."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from aggregator.errors import ServiceError
from aggregator.secure.admin import LeaderAdmin
from aggregator.secure.aggregation_handler import HelperHandler
from aggregator.secure.queries import query_message
from aggregator.secure.store import OPEN
from aggregator.secure.store_api import SecureStoreApi
from aggregator.secure.upload import LeaderUpload
from aggregator.status_map import bounded, status_of
from ldpcollect.errors import ParameterError
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.v1 import aggregation_pb2_grpc as apb_grpc
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc

Context = grpc.aio.ServicerContext[Any, Any]
T = TypeVar("T")


async def require_bearer(context: Context, token: str, who: str) -> None:
    """Abort with UNAUTHENTICATED unless the call carries `authorization: Bearer <token>`."""
    metadata = dict(context.invocation_metadata() or ())
    given = str(metadata.get("authorization", ""))
    if not given.startswith("Bearer ") or not hmac.compare_digest(
        given[len("Bearer ") :].encode(), token.encode()
    ):
        await context.abort(
            grpc.StatusCode.UNAUTHENTICATED,
            f"missing or wrong bearer token: this RPC needs the {who} token "
            "(`authorization: Bearer <token>`)",
        )


async def guarded(context: Context, work: Awaitable[T]) -> T:
    """`work`'s result, or the call aborted with the refusal's status and message."""
    try:
        return await work
    except ServiceError as error:
        await context.abort(status_of(error), bounded(error.message))
    except ParameterError as error:
        await context.abort(status_of(error), bounded(str(error)))
    raise AssertionError("unreachable: abort raises")


def in_thread(work: Callable[[], T]) -> Awaitable[T]:
    return asyncio.to_thread(work)


# A query's progress is the operator's (SecureAdmin.GetSecureQuery): shown to anyone, the
# counts would let a third party watch one device's report be aggregated or refused.
def public_view(query: spb.SecureQuery) -> spb.SecureQuery:
    """The query as devices see it: what they need to upload, no progress counts."""
    query.ClearField("aggregated_reports")
    query.ClearField("pending_reports")
    query.ClearField("refused_reports")
    return query


class SecureCollectorService(spb_grpc.SecureCollectorServicer):
    def __init__(self, store: SecureStoreApi, upload: LeaderUpload) -> None:
        self.store, self.uploads = store, upload

    async def GetSecureQuery(
        self, request: spb.GetSecureQueryRequest, context: Context
    ) -> spb.SecureQuery:
        def work() -> spb.SecureQuery:
            return public_view(query_message(self.store.query(request.query_id)))

        return await guarded(context, in_thread(work))

    async def ListSecureQueries(
        self, request: spb.ListSecureQueriesRequest, context: Context
    ) -> spb.ListSecureQueriesResponse:
        queries = await in_thread(self.store.queries)
        return spb.ListSecureQueriesResponse(
            queries=[public_view(query_message(q)) for q in queries if q.state == OPEN]
        )

    async def UploadSecureReports(
        self, request: spb.UploadSecureReportsRequest, context: Context
    ) -> spb.UploadSecureReportsResponse:
        bodies, tokens = list(request.reports), list(request.tokens)
        result = await guarded(context, in_thread(lambda: self.uploads.upload(bodies, tokens)))
        return spb.UploadSecureReportsResponse(
            accepted=result.accepted,
            duplicates=result.duplicates,
            rejected=[
                pb.ReportRejection(
                    index=index,
                    report_id=report_id,
                    code=status_of(refusal).value[0],
                    message=bounded(refusal.message),
                )
                for index, report_id, refusal in result.rejected
            ],
        )


class SecureAdminService(spb_grpc.SecureAdminServicer):
    def __init__(self, admin: LeaderAdmin, admin_token: str) -> None:
        self.admin, self.token = admin, admin_token

    async def _run(self, context: Context, work: Awaitable[T]) -> T:
        await require_bearer(context, self.token, "admin")
        return await guarded(context, work)

    async def CreateSecureQuery(
        self, request: spb.CreateSecureQueryRequest, context: Context
    ) -> spb.SecureQuery:
        return await self._run(context, self.admin.create(request))

    async def GetSecureQuery(
        self, request: spb.GetSecureQueryRequest, context: Context
    ) -> spb.SecureQuery:
        return await self._run(context, self.admin.get(request.query_id))

    async def ListSecureQueries(
        self, request: spb.ListSecureQueriesRequest, context: Context
    ) -> spb.ListSecureQueriesResponse:
        return await self._run(context, self.admin.list())

    async def CloseSecureQuery(
        self, request: spb.CloseSecureQueryRequest, context: Context
    ) -> spb.SecureQuery:
        return await self._run(context, self.admin.close(request.query_id))

    async def CollectShares(
        self, request: spb.CollectSharesRequest, context: Context
    ) -> spb.CollectSharesResponse:
        return await self._run(context, self.admin.collect(request.query_id))

    async def GetSecureLedger(self, request: pb.GetLedgerRequest, context: Context) -> pb.Ledger:
        return await self._run(context, self.admin.ledger())

    async def SetSecureBudget(self, request: pb.SetBudgetRequest, context: Context) -> pb.Ledger:
        return await self._run(context, self.admin.set_budget(request))


class HelperService(apb_grpc.HelperServicer):
    def __init__(self, handler: HelperHandler, peer_token: str) -> None:
        self.handler, self.token = handler, peer_token
        self._jobs = asyncio.Lock()

    async def _run(self, context: Context, work: Callable[[], T]) -> T:
        await require_bearer(context, self.token, "peer (leader-helper)")
        async with self._jobs:
            return await guarded(context, in_thread(work))

    async def GetHpkeConfig(
        self, request: apb.GetHpkeConfigRequest, context: Context
    ) -> apb.GetHpkeConfigResponse:
        return await self._run(context, self.handler.hpke_config)

    async def ProvisionQuery(
        self, request: apb.ProvisionQueryRequest, context: Context
    ) -> apb.ProvisionQueryResponse:
        return await self._run(context, lambda: self.handler.provision(request))

    async def Aggregate(
        self, request: apb.AggregationJobRequest, context: Context
    ) -> apb.AggregationJobResponse:
        return await self._run(context, lambda: self.handler.aggregate(request))

    async def AggregateShare(
        self, request: apb.AggregateShareRequest, context: Context
    ) -> apb.AggregateShareResponse:
        return await self._run(context, lambda: self.handler.aggregate_share(request))
