"""The Collector (devices) and Admin (operator) gRPC services over a `Store`."""

from __future__ import annotations

import asyncio
import functools
import hmac
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf.message import DecodeError

from aggregator.batch_codec import decode_batch, report_columns
from aggregator.errors import NotFound, ServiceError, shown
from aggregator.lifecycle import unknown_query
from aggregator.metrics import AggregatorMetrics
from aggregator.model import QueryInfo, QuerySpec, QueryStatus
from aggregator.overload import (
    PUSHBACK_METADATA_KEY,
    InFlightBudget,
    Overloaded,
    OverloadLimits,
)
from aggregator.protoconv import ledger_to_proto, query_to_proto, release_to_proto
from aggregator.redemption import Redeemer
from aggregator.release import (
    Releaser,
    accounting_loaded,
    release_function,
    set_budget_function,
)
from aggregator.rounds import ReportColumns
from aggregator.status_map import bounded, outcome_status, status_of
from aggregator.store.base import ReleaseFn, Store, SubmitResult
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import validate_targets
from ldpcollect.mechanisms.no_privacy import refuse_no_privacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect.wire import (
    mechanism_from_proto,
    noise_sigma_from_proto,
    scheme_from_proto,
    validate_description,
    validate_query_id,
)

Context = grpc.aio.ServicerContext[Any, Any]
T = TypeVar("T")

# Stream chunks in flight per stream before the reader waits (bounds memory on long streams).
_MAX_INFLIGHT_CHUNKS = 8


async def _fail(context: Context, exc: ServiceError | ParameterError) -> NoReturn:
    await context.abort(status_of(exc), bounded(str(exc)))
    raise AssertionError("unreachable: abort raises")


async def _guarded(context: Context, work: Awaitable[T]) -> T:
    try:
        return await work
    except (ServiceError, ParameterError) as exc:
        await _fail(context, exc)


def _lookup(store: Store, query_id: str) -> pb.Query:
    info = store.query(query_id)
    if info is None:
        raise unknown_query(query_id)
    return query_to_proto(info)


async def _overloaded(
    context: Context, metrics: AggregatorMetrics, exc: Overloaded, reports: int
) -> NoReturn:
    """RESOURCE_EXHAUSTED with the retry hint in trailing metadata (gRPC's retry pushback)."""
    metrics.observe_rejected_rpc(grpc.StatusCode.RESOURCE_EXHAUSTED, reports)
    await context.abort(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        exc.message,
        trailing_metadata=((PUSHBACK_METADATA_KEY, str(exc.pushback_ms)),),
    )
    raise AssertionError("unreachable: abort raises")


def _tokens_of(reports: list[pb.Report]) -> list[bytes]:
    return [report.token for report in reports]


def _batch_tokens(request: bytes | pb.SubmitBatchRequest) -> list[bytes]:
    """Each report's token (parsed again only when a query of the batch requires tokens)."""
    if isinstance(request, bytes):
        request = pb.SubmitBatchRequest.FromString(request)
    return _tokens_of(list(request.reports))


class CollectorService(pb_grpc.CollectorServicer):
    def __init__(
        self,
        store: Store,
        metrics: AggregatorMetrics,
        max_batch_reports: int,
        chunk: int,
        limits: OverloadLimits | None = None,
        redeemer: Redeemer | None = None,
    ) -> None:
        self._budget = InFlightBudget(limits or OverloadLimits())
        self._store = store
        self._redeemer = redeemer or Redeemer(store)
        self._metrics = metrics
        self._max_batch = max_batch_reports
        self._chunk = chunk
        self._unary_size = metrics.batch_size.labels(path="unary")
        self._stream_size = metrics.batch_size.labels(path="stream")
        self._batch_size = metrics.batch_size.labels(path="batch")

    async def ListOpenQueries(
        self,
        request: pb.ListOpenQueriesRequest,
        context: grpc.aio.ServicerContext[pb.ListOpenQueriesRequest, pb.ListOpenQueriesResponse],
    ) -> pb.ListOpenQueriesResponse:
        return pb.ListOpenQueriesResponse(
            queries=[
                query_to_proto(q) for q in self._store.queries() if q.status == QueryStatus.OPEN
            ]
        )

    async def GetQuery(
        self,
        request: pb.GetQueryRequest,
        context: grpc.aio.ServicerContext[pb.GetQueryRequest, pb.Query],
    ) -> pb.Query:
        try:
            return _lookup(self._store, request.query_id)
        except ServiceError as exc:
            await _fail(context, exc)

    async def SubmitReport(
        self,
        request: pb.SubmitReportRequest,
        context: grpc.aio.ServicerContext[pb.SubmitReportRequest, pb.SubmitReportResponse],
    ) -> pb.SubmitReportResponse:
        self._unary_size.observe(1)
        report = request.report
        columns = ReportColumns(
            [report.query_id],
            [report.round],
            [report.device_pseudonym],
            [report.report_id],
            [report.answers],
        )
        try:
            self._budget.take(1)
        except Overloaded as exc:
            await _overloaded(context, self._metrics, exc, 1)
        try:
            result = await self._submit(columns, lambda: [report.token])
        except (ServiceError, ParameterError) as exc:
            await _fail(context, exc)
        finally:
            self._budget.give_back(1)
        self._metrics.observe_submission(result)
        if result.rejected:
            outcome = result.rejected[0][1]
            await context.abort(outcome_status(outcome), outcome.message)
        return pb.SubmitReportResponse(
            ack=pb.ReportAck(report_id=report.report_id, duplicate=result.duplicates == 1)
        )

    async def StreamReports(
        self,
        request_iterator: AsyncIterator[pb.SubmitReportRequest],
        context: grpc.aio.ServicerContext[pb.SubmitReportRequest, pb.SubmitReportsResponse],
    ) -> pb.SubmitReportsResponse:
        try:
            self._budget.open_stream()
        except Overloaded as exc:
            await _overloaded(context, self._metrics, exc, 0)
        try:
            return await self._stream(request_iterator, context)
        finally:
            self._budget.close_stream()

    async def _stream(
        self,
        request_iterator: AsyncIterator[pb.SubmitReportRequest],
        context: grpc.aio.ServicerContext[pb.SubmitReportRequest, pb.SubmitReportsResponse],
    ) -> pb.SubmitReportsResponse:
        inflight: list[asyncio.Future[SubmitResult]] = []
        done = SubmitResult()
        offsets: list[int] = []  # index in the stream of each in-flight chunk's first report
        received: list[pb.Report] = []
        report_ids: list[bytes] = []
        sent = 0

        def absorb(offset: int, result: SubmitResult) -> None:
            done.accepted += result.accepted
            done.duplicates += result.duplicates
            done.rejected.extend((offset + i, outcome) for i, outcome in result.rejected)

        async def send_received() -> None:
            """Hand what was read so far to the store as one chunk, within the budget."""
            nonlocal received, sent
            chunk, messages = report_columns(received), received
            report_ids.extend(chunk.report_ids)
            offsets.append(sent)
            sent += len(chunk)
            received = []
            await self._budget.wait_and_take(len(chunk))
            future = asyncio.ensure_future(
                self._submit(chunk, functools.partial(_tokens_of, messages))
            )
            future.add_done_callback(functools.partial(self._give_back, len(chunk)))
            inflight.append(future)

        async def drain() -> None:
            for offset, future in zip(offsets, inflight, strict=True):
                absorb(offset, await future)

        idle = self._budget.limits.stream_idle_timeout_s
        messages = aiter(request_iterator)
        try:
            while True:
                try:
                    message = await asyncio.wait_for(anext(messages), idle)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    if received:  # what it did send is handled as if the stream had ended
                        await send_received()
                    await drain()
                    self._metrics.observe_submission(done)
                    await context.abort(
                        grpc.StatusCode.UNAVAILABLE,
                        f"the stream sent nothing for {idle:g} s and was ended; the "
                        f"{len(report_ids)} reports it sent before are handled ({done.accepted} "
                        f"accepted, {done.duplicates} duplicates, {len(done.rejected)} "
                        "rejected): resend the rest, and any report you are unsure of with "
                        "its same id (acknowledged once)",
                        trailing_metadata=((PUSHBACK_METADATA_KEY, "0"),),
                    )
                received.append(message.report)
                if len(received) >= self._chunk:
                    await send_received()
                    if len(inflight) >= _MAX_INFLIGHT_CHUNKS:
                        absorb(offsets.pop(0), await inflight.pop(0))
            if received:
                await send_received()
            await drain()
        except (ServiceError, Overloaded) as exc:
            for future in inflight:
                future.cancel()
            if isinstance(exc, Overloaded):
                await _overloaded(context, self._metrics, exc, 0)
            await _fail(context, exc)
        self._stream_size.observe(len(report_ids))
        return self._summarize(done, report_ids)

    async def SubmitBatch(
        self,
        request: bytes | pb.SubmitBatchRequest,
        context: grpc.aio.ServicerContext[Any, pb.SubmitReportsResponse],
    ) -> pb.SubmitReportsResponse:
        """Registered (`rpc_handlers.add_services`) to receive the serialized request: a uniform
        batch is decoded into columns directly (`batch_codec`), anything else by protobuf."""
        try:
            reports = (
                decode_batch(request)
                if isinstance(request, bytes)
                else report_columns(request.reports)
            )
        except DecodeError as err:
            self._metrics.observe_rejected_rpc(grpc.StatusCode.INVALID_ARGUMENT, 0)
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the request is not a valid ldpcollect.v1.SubmitBatchRequest ({err}); "
                "nothing was counted",
            )
        n = len(reports)
        if n == 0:
            self._metrics.observe_rejected_rpc(grpc.StatusCode.INVALID_ARGUMENT, 0)
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the batch has no reports; send at least one"
            )
        if n > self._max_batch:
            self._metrics.observe_rejected_rpc(grpc.StatusCode.RESOURCE_EXHAUSTED, n)
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the batch has {n} reports, more than this server's max_batch_reports "
                f"{self._max_batch}; split it into smaller batches",
            )
        try:
            self._budget.take(n)
        except Overloaded as exc:
            await _overloaded(context, self._metrics, exc, n)
        try:
            self._batch_size.observe(n)
            tokens = functools.partial(_batch_tokens, request)
            result = await _guarded(context, self._submit(reports, tokens))
        finally:
            self._budget.give_back(n)
        return self._summarize(result, reports.report_ids)

    def _give_back(self, n: int, _: asyncio.Future[SubmitResult]) -> None:
        self._budget.give_back(n)

    async def _submit(
        self, reports: ReportColumns, tokens: Callable[[], Sequence[bytes]]
    ) -> SubmitResult:
        """Redeem tokens where required (`aggregator.redemption`), then hand the reports to
        the store; the time it takes steers the overload retry hint."""
        started = time.perf_counter()
        result = await self._redeemer.submit(reports, tokens, self._store.submit)
        self._budget.observe_commit(time.perf_counter() - started)
        return result

    def _summarize(self, result: SubmitResult, report_ids: list[bytes]) -> pb.SubmitReportsResponse:
        self._metrics.observe_submission(result)
        return pb.SubmitReportsResponse(
            accepted=result.accepted,
            duplicates=result.duplicates,
            rejected=[
                pb.ReportRejection(
                    index=index,
                    report_id=report_ids[index],
                    code=outcome_status(outcome).value[0],
                    message=outcome.message,
                )
                for index, outcome in result.rejected
            ],
        )


def _admin(
    method: Callable[[AdminService, Any, Context], Awaitable[T]],
) -> Callable[[AdminService, Any, Context], Awaitable[T]]:
    """Require the admin bearer token, then map refusals to their gRPC status."""

    async def wrapper(self: AdminService, request: Any, context: Context) -> T:
        await self.authorize(context)
        try:
            return await method(self, request, context)
        except (ServiceError, ParameterError) as exc:
            await _fail(context, exc)

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class AdminService(pb_grpc.AdminServicer):
    def __init__(
        self,
        store: Store,
        admin_token: str,
        release_fn: ReleaseFn | None = None,
        clock: Callable[[], float] = time.time,
        redeemer: Redeemer | None = None,
    ) -> None:
        self._store = store
        self._redeemer = redeemer or Redeemer(store)
        self._token = admin_token.encode()
        self._release_fn = release_fn if release_fn is not None else release_function()
        self._clock = clock
        self._background: set[asyncio.Task[None]] = set()

    async def authorize(self, context: Context) -> None:
        """Missing token: UNAUTHENTICATED; wrong token: PERMISSION_DENIED."""
        values = [
            v
            for k, v in (context.invocation_metadata() or ())
            if k.lower() == "authorization" and isinstance(v, str)
        ]
        if not values:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "admin RPCs need the metadata 'authorization: Bearer <admin token>'",
            )
        scheme, _, token = values[0].strip().partition(" ")
        if scheme.lower() != "bearer" or not token:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "the authorization metadata must read 'Bearer <admin token>'",
            )
        if not hmac.compare_digest(token.strip().encode(), self._token):
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                "the admin token is wrong; use the token the aggregator was started with",
            )

    @_admin
    async def CreateQuery(self, request: pb.CreateQueryRequest, context: Context) -> pb.Query:
        spec = self._spec(request)
        info = await self._store.create_query(spec, self._clock())
        if accounting_loaded():
            # Only then: the first use imports the accounting code and SciPy, more than a
            # second of CPU that the reports arriving right after creation would pay for.
            self._prepare_release(info)
        return query_to_proto(info)

    def _prepare_release(self, info: QueryInfo) -> None:
        """Compute the query's privacy claims in the background, cached for its release
        (about 0.2 s, plus about 1.3 s the first time for the imports). A failure is left for
        the release to report."""
        if not isinstance(self._release_fn, Releaser):
            return
        task = asyncio.create_task(
            asyncio.to_thread(self._release_fn.prepare, info, self._store.ledger())
        )
        self._background.add(task)
        task.add_done_callback(_settled_quietly(self._background))

    @_admin
    async def ListQueries(
        self, request: pb.ListQueriesRequest, context: Context
    ) -> pb.ListQueriesResponse:
        queries = await self._store.current_queries()
        return pb.ListQueriesResponse(queries=[query_to_proto(q) for q in queries])

    @_admin
    async def GetQuery(self, request: pb.GetQueryRequest, context: Context) -> pb.Query:
        # Operators see every report committed before the call, on any replica.
        info = await self._store.current_query(request.query_id)
        if info is None:
            raise unknown_query(request.query_id)
        return query_to_proto(info)

    @_admin
    async def AdvanceRound(self, request: pb.AdvanceRoundRequest, context: Context) -> pb.Query:
        return query_to_proto(await self._store.advance_round(request.query_id))

    @_admin
    async def CloseQuery(self, request: pb.CloseQueryRequest, context: Context) -> pb.Query:
        info = await self._store.close_query(request.query_id)
        self._prepare_release(info)  # no more reports: its release comes next
        return query_to_proto(info)

    @_admin
    async def Release(self, request: pb.ReleaseRequest, context: Context) -> pb.QueryRelease:
        info = self._store.query(request.query_id)
        if info is not None and isinstance(self._release_fn, Releaser):
            # Privacy claims computed here, off the store's writer thread.
            await asyncio.to_thread(self._release_fn.prepare, info, self._store.ledger())
        record = await self._store.release(request.query_id, self._release_fn)
        return release_to_proto(record)

    @_admin
    async def GetRelease(self, request: pb.GetReleaseRequest, context: Context) -> pb.QueryRelease:
        record = self._store.release_of(request.query_id)
        if record is None:
            info = self._store.query(request.query_id)
            where = (
                f"no query {shown(request.query_id)}"
                if info is None
                else f"query {request.query_id!r} is {info.status.name.lower()}, not released"
            )
            raise NotFound(f"no release: {where}")
        return release_to_proto(record)

    @_admin
    async def GetLedger(self, request: pb.GetLedgerRequest, context: Context) -> pb.Ledger:
        return ledger_to_proto(self._store.ledger())

    @_admin
    async def SetBudget(self, request: pb.SetBudgetRequest, context: Context) -> pb.Ledger:
        update = set_budget_function(
            request.epsilon, request.delta, self._clock, filter=request.filter
        )
        return ledger_to_proto(await self._store.update_ledger(update))

    def _spec(self, request: pb.CreateQueryRequest) -> QuerySpec:
        query_id = request.query_id or f"q-{secrets.token_hex(6)}"
        validate_query_id(query_id)
        mechanism = mechanism_from_proto(request.mechanism)
        if not request.allow_no_privacy:
            refuse_no_privacy(mechanism)
        scheme = scheme_from_proto(request.location_scheme)
        targets = validate_targets(request.targets)
        for target in targets:
            scheme.validate_cell(target)
        if request.min_reports < 1:
            raise ParameterError("min_reports", request.min_reports, "[1, 2**63)")
        if request.min_reports >= 2**63:
            raise ParameterError("min_reports", request.min_reports, "[1, 2**63)")
        return QuerySpec(
            query_id=query_id,
            description=validate_description(request.description),
            mechanism=mechanism,
            scheme=scheme.describe(),
            targets=targets,
            min_reports=request.min_reports,
            noise_sigma=noise_sigma_from_proto(request.noise),
            token_issuer=self._redeemer.issuer_name() if request.require_tokens else None,
        )


def _settled_quietly(tasks: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
    """A done-callback that forgets a background task and retrieves its outcome (a failure is
    not logged as never retrieved; the release that needs the result reports it)."""

    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()

    return done
