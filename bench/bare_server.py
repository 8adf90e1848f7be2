"""The ceiling for ingest: a bare grpc.aio Collector that only counts what it receives.

It speaks the same wire contract as the aggregator, so the load generator is byte-for-byte the
same against both; it validates nothing and stores nothing. Run:

    python -m bench.bare_server --port 50099
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import AsyncIterator

import grpc

from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc


class CountingCollector(pb_grpc.CollectorServicer):
    def __init__(self) -> None:
        self.reports = 0

    async def ListOpenQueries(
        self,
        request: pb.ListOpenQueriesRequest,
        context: grpc.aio.ServicerContext[pb.ListOpenQueriesRequest, pb.ListOpenQueriesResponse],
    ) -> pb.ListOpenQueriesResponse:
        return pb.ListOpenQueriesResponse()

    async def GetQuery(
        self,
        request: pb.GetQueryRequest,
        context: grpc.aio.ServicerContext[pb.GetQueryRequest, pb.Query],
    ) -> pb.Query:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "the bare server only counts reports")

    async def SubmitReport(
        self,
        request: pb.SubmitReportRequest,
        context: grpc.aio.ServicerContext[pb.SubmitReportRequest, pb.SubmitReportResponse],
    ) -> pb.SubmitReportResponse:
        self.reports += 1
        return pb.SubmitReportResponse(ack=pb.ReportAck(report_id=request.report.report_id))

    async def StreamReports(
        self,
        request_iterator: AsyncIterator[pb.SubmitReportRequest],
        context: grpc.aio.ServicerContext[pb.SubmitReportRequest, pb.SubmitReportsResponse],
    ) -> pb.SubmitReportsResponse:
        accepted = 0
        async for _ in request_iterator:
            accepted += 1
        self.reports += accepted
        return pb.SubmitReportsResponse(accepted=accepted)

    async def SubmitBatch(
        self,
        request: pb.SubmitBatchRequest,
        context: grpc.aio.ServicerContext[pb.SubmitBatchRequest, pb.SubmitReportsResponse],
    ) -> pb.SubmitReportsResponse:
        accepted = len(request.reports)
        self.reports += accepted
        return pb.SubmitReportsResponse(accepted=accepted)


async def serve(port: int) -> None:
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ]
    )
    pb_grpc.add_CollectorServicer_to_server(CountingCollector(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"bare server listening on 127.0.0.1:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(grace=1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()
