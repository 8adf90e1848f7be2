"""The load-test engine against a small scripted Collector on 127.0.0.1 (a stand-in server whose
behaviour the test chooses: a stall, pushback), so that what the engine records can be checked
against what the server did."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest

from client.loadtest import PUSHBACK_KEY, LoadTest, LoadTestConfig, LoadTestError
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc


class ScriptedCollector(pb_grpc.CollectorServicer):
    """Stalls the first report `stall` seconds; answers every `pushback_every`-th with
    RESOURCE_EXHAUSTED and a retry pushback; accepts the others."""

    def __init__(self, stall: float = 0.0, pushback_every: int = 0, round_: int = 1) -> None:
        self.stall = stall
        self.pushback_every = pushback_every
        self.round = round_
        self.calls = 0
        self.report_ids: list[bytes] = []

    async def GetQuery(
        self, request: pb.GetQueryRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.Query:
        if request.query_id != "q":
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no query {request.query_id!r}")
        return pb.Query(
            query_id="q", targets=list(range(20)), rounds=2, current_round=self.round,
            state=pb.QUERY_STATE_OPEN,
            mechanism=pb.MechanismSpec(sampling_privacy=pb.SamplingPrivacy(sampling_rate="1/2")),
        )  # fmt: skip

    async def SubmitReport(
        self, request: pb.SubmitReportRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.SubmitReportResponse:
        self.calls += 1
        self.report_ids.append(request.report.report_id)
        if self.calls == 1 and self.stall:
            await asyncio.sleep(self.stall)
        if self.pushback_every and self.calls % self.pushback_every == 0:
            context.set_trailing_metadata(((PUSHBACK_KEY, "100"),))
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "overloaded, come back")
        return pb.SubmitReportResponse(ack=pb.ReportAck(report_id=request.report.report_id))

    async def ListOpenQueries(
        self, request: pb.ListOpenQueriesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ListOpenQueriesResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not scripted")

    async def StreamReports(
        self,
        request_iterator: AsyncIterator[pb.SubmitReportRequest],
        context: grpc.aio.ServicerContext[object, object],
    ) -> pb.SubmitReportsResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not scripted")

    async def SubmitBatch(
        self, request: pb.SubmitBatchRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.SubmitReportsResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not scripted")


async def _serve(servicer: ScriptedCollector) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    pb_grpc.add_CollectorServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
async def stalled() -> AsyncIterator[tuple[ScriptedCollector, str]]:
    servicer = ScriptedCollector(stall=0.5)
    server, address = await _serve(servicer)
    yield servicer, address
    await server.stop(None)


async def test_a_stall_is_charged_to_every_request_due_during_it(
    stalled: tuple[ScriptedCollector, str],
) -> None:
    servicer, address = stalled
    # 2 s at 20/s: the requests held back by the 0.5 s stall have 1.5 s to catch up before
    # the end, so a loaded machine (slower calls) still sends every one (it once sent 19).
    config = LoadTestConfig((address,), "q", "unary", rate=20, duration=2.0, max_in_flight=1)
    result = await LoadTest(config).run()
    assert result.planned == result.sent == result.answered == servicer.calls == 40
    assert result.statuses == {"OK": 40}
    # request 1 was due at 0.05 s but could only go after the 0.5 s stall: its latency
    # counts the wait, as a device's would
    assert result.latencies[1] >= 0.5 - 0.05
    assert result.waited_for_slot >= 1 and result.late >= 1
    # 10 of the 40 requests were due during the stall, waiting 0.5, 0.45, ..., 0.05 s: the
    # 90th percentile (the 4th longest, 0.35 s) is one of them (a closed-loop tool would
    # report a few ms there)
    assert result.latency.percentile_ms(90) >= 0.3 * 1000
    assert list(result.intended_at[:3]) == pytest.approx([0.0, 0.05, 0.1])


async def test_nothing_is_sent_after_the_end_what_was_held_back_is_counted_unsent() -> None:
    servicer = ScriptedCollector(stall=1.5)
    server, address = await _serve(servicer)
    try:
        config = LoadTestConfig((address,), "q", "unary", rate=10, duration=1.0, max_in_flight=1)
        result = await LoadTest(config).run()
    finally:
        await server.stop(None)
    # request 0 held the only slot for 1.5 s; requests 1-9 were due within the second
    assert (servicer.calls, result.sent, result.answered, result.unsent) == (1, 1, 1, 9)
    assert result.statuses == {"OK": 1} and result.accepted == 1


async def test_pushback_is_counted_and_nothing_is_resent() -> None:
    servicer = ScriptedCollector(pushback_every=3)
    server, address = await _serve(servicer)
    try:
        config = LoadTestConfig((address,), "q", "unary", rate=0, duration=5.0, max_requests=30)
        result = await LoadTest(config).run()
    finally:
        await server.stop(None)
    assert servicer.calls == result.sent == 30
    assert len(set(servicer.report_ids)) == 30  # every report sent once
    assert result.statuses == {"OK": 20, "RESOURCE_EXHAUSTED": 10}
    assert result.pushback == {"RESOURCE_EXHAUSTED": 10}
    assert result.accepted == 20 and result.accepted_by_address == {address: 20}
    assert sum(result.unknown_by_address.values()) == 0
    assert result.exhausted  # closed loop stopped at --max-requests, before the duration


async def test_a_query_past_round_one_is_refused_before_sending() -> None:
    servicer = ScriptedCollector(round_=2)
    server, address = await _serve(servicer)
    try:
        with pytest.raises(LoadTestError, match="round 2"):
            await LoadTest(LoadTestConfig((address,), "q", rate=10, duration=1)).run()
    finally:
        await server.stop(None)
    assert servicer.calls == 0
