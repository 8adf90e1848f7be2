"""Restart on the same file, health, reflection and metrics through the real server."""

from __future__ import annotations

import asyncio
import sqlite3
import urllib.request
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from aggregator.server import AggregatorServer
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.aggregator.conftest import ADMIN, Device, Harness, connect, expected_counts, make_config

TARGETS = [11, 22, 33, 44, 55]


async def test_restart_reloads_queries_counts_pending_rounds_and_releases(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agg.db"
    rr = RandomizedResponse("0.85", "0.3")
    sp = SamplingPrivacy("1/2")
    rr_devices = [Device(rr, TARGETS[i % 5], TARGETS) for i in range(12)]
    sp_devices = [Device(sp, TARGETS[i % 2], TARGETS) for i in range(10)]

    h = await connect(AggregatorServer(make_config(db)))
    try:
        await h.create("rr", rr, TARGETS)
        await h.create("sp", sp, TARGETS)
        await h.create("done", rr, TARGETS)
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report("rr", 1) for d in rr_devices[:8]])
        )
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report("sp", 1) for d in sp_devices])
        )
        await h.admin.AdvanceRound(pb.AdvanceRoundRequest(query_id="sp"), metadata=ADMIN)
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report("sp", 2) for d in sp_devices[:4]])
        )
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report("done", 1) for d in rr_devices])
        )
        await h.admin.CloseQuery(pb.CloseQueryRequest(query_id="done"), metadata=ADMIN)
        first_release = await h.admin.Release(pb.ReleaseRequest(query_id="done"), metadata=ADMIN)
        queries_before = await h.admin.ListQueries(pb.ListQueriesRequest(), metadata=ADMIN)
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)

    h = await connect(AggregatorServer(make_config(db)))
    try:
        queries_after = await h.admin.ListQueries(pb.ListQueriesRequest(), metadata=ADMIN)
        assert queries_after == queries_before
        served = await h.admin.GetRelease(pb.GetReleaseRequest(query_id="done"), metadata=ADMIN)
        assert served == first_release
        # Dedup survives: an old report is a duplicate, not a second count.
        again = await h.collector.SubmitReport(
            pb.SubmitReportRequest(report=rr_devices[0].report("rr", 1))
        )
        assert again.ack.duplicate
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report("rr", 1) for d in rr_devices[8:]])
        )
        # SP devices whose round 1 was stored before the restart can still complete.
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report("sp", 2) for d in sp_devices[4:7]])
        )
        for qid in ("rr", "sp"):
            await h.admin.CloseQuery(pb.CloseQueryRequest(query_id=qid), metadata=ADMIN)
        rr_release = await h.admin.Release(pb.ReleaseRequest(query_id="rr"), metadata=ADMIN)
        sp_release = await h.admin.Release(pb.ReleaseRequest(query_id="sp"), metadata=ADMIN)
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)

    expected_rr = expected_counts(rr_devices, 1, len(TARGETS))
    assert [list(e.round_counts) for e in rr_release.estimates] == [[x] for x in expected_rr[0]]
    expected_sp = expected_counts(sp_devices[:7], 2, len(TARGETS))
    assert [list(e.round_counts) for e in sp_release.estimates] == [
        [expected_sp[0][t], expected_sp[1][t]] for t in range(len(TARGETS))
    ]
    assert sp_release.participants == 7
    # No individual report is left in the file once every query is released.
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM reports").fetchone() == (0,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def reflected(channel: grpc.aio.Channel) -> set[str]:
    reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = reflect.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")])
    )
    names: set[str] = set()
    async for reply in call:
        names.update(s.name for s in reply.list_services_response.service)
    return names


async def test_health_and_reflection_answer(harness: Harness) -> None:
    health = health_pb2_grpc.HealthStub(harness.channel)
    for service in ("", "ldpcollect.v1.Collector", "ldpcollect.v1.Admin"):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING

    names = await reflected(harness.channel)
    assert {"ldpcollect.v1.Collector", "grpc.health.v1.Health"} <= names
    assert "ldpcollect.v1.Admin" not in names  # not advertised to anyone who asks


async def test_reflection_lists_the_admin_service_only_when_asked(tmp_path: Path) -> None:
    config = make_config(tmp_path / "r.db", reflection_admin=True)
    h = await connect(AggregatorServer(config))
    try:
        names = await reflected(h.channel)
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)
    assert {"ldpcollect.v1.Collector", "ldpcollect.v1.Admin", "grpc.health.v1.Health"} <= names


async def test_metrics_endpoint_counts_reports(tmp_path: Path) -> None:
    h = await connect(AggregatorServer(make_config(tmp_path / "m.db", metrics_port=0)))
    try:
        rr = RandomizedResponse("0.85", "0.3")
        await h.create("m", rr, TARGETS)
        devices = [Device(rr, 11, TARGETS) for _ in range(5)]
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report("m", 1) for d in devices])
        )
        await h.collector.SubmitReport(pb.SubmitReportRequest(report=devices[0].report("m", 1)))
        bad = devices[1].report("m", 1)
        bad.query_id = "missing"
        try:
            await h.collector.SubmitReport(pb.SubmitReportRequest(report=bad))
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
        port = h.server.metrics_port
        assert port
        url = f"http://127.0.0.1:{port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url).read().decode())
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)
    assert "ldpcollect_reports_accepted_total 5.0" in text
    assert "ldpcollect_reports_duplicate_total 1.0" in text
    assert 'ldpcollect_reports_rejected_total{reason="NOT_FOUND"} 1.0' in text
    assert 'ldpcollect_submission_reports_count{path="batch"} 1.0' in text
    assert "ldpcollect_commit_seconds_count" in text
    assert "ldpcollect_commit_group_reports_sum" in text
    # The writer's time by phase: each one spent some, and together no more than its groups.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    writer = families["ldpcollect_writer_seconds"].samples
    spent = {s.labels["phase"]: s.value for s in writer if s.name.endswith("_total")}
    (commit_total,) = [
        s.value for s in families["ldpcollect_commit_seconds"].samples if s.name.endswith("_sum")
    ]
    assert set(spent) == {"apply", "write", "commit"}
    assert all(value > 0 for value in spent.values())
    assert sum(spent.values()) <= commit_total
    # Each Python thread's CPU time: the server's writer did work, and so did this process's
    # main thread (its event loop served the RPCs).
    threads = {
        s.labels["thread"]: s.value for s in families["ldpcollect_thread_cpu_seconds"].samples
    }
    assert threads["sqlite-writer"] > 0
    assert threads["MainThread"] > 0


def test_run_entry_point_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    import signal
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = tmp_path / "run.db"
    code = (
        "from aggregator.config import AggregatorConfig; from aggregator.server import run; "
        f"run(AggregatorConfig(db_path={str(db)!r}, admin_token='t', listen='127.0.0.1:{port}'))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not listen"
                time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert db.exists()
