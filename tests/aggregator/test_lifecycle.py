"""Query lifecycles through the real server: RR and SP, idempotency, dropouts, releases."""

from __future__ import annotations

import grpc
import pytest

from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.aggregator.conftest import ADMIN, Device, Harness, expected_counts

TARGETS = [3, 17, 42, 99, 1000, 7, 8, 9, 10, 11]  # 10 targets: 2 bytes, 6 padding bits


async def test_randomized_response_lifecycle(harness: Harness) -> None:
    rr = RandomizedResponse("0.85", "0.3")
    created = await harness.create("rr1", rr, TARGETS, min_reports=30)
    assert created.state == pb.QUERY_STATE_OPEN and created.rounds == 1
    assert created.current_round == 1
    listed = await harness.collector.ListOpenQueries(pb.ListOpenQueriesRequest())
    assert [q.query_id for q in listed.queries] == ["rr1"]

    devices = [Device(rr, TARGETS[i % 4], TARGETS) for i in range(40)]
    # Unary for the first 10, one stream for the next 10, one batch for the rest.
    for d in devices[:10]:
        reply = await harness.collector.SubmitReport(
            pb.SubmitReportRequest(report=d.report("rr1", 1))
        )
        assert reply.ack.report_id == d.report_ids[1] and not reply.ack.duplicate
    stream = await harness.collector.StreamReports(
        iter([pb.SubmitReportRequest(report=d.report("rr1", 1)) for d in devices[10:20]])
    )
    assert (stream.accepted, stream.duplicates, list(stream.rejected)) == (10, 0, [])
    batch = await harness.collector.SubmitBatch(
        pb.SubmitBatchRequest(reports=[d.report("rr1", 1) for d in devices[20:]])
    )
    assert (batch.accepted, batch.duplicates, list(batch.rejected)) == (20, 0, [])

    query = await harness.query("rr1")
    assert list(query.reports_per_round) == [40] and query.completed_devices == 40
    assert harness.server.store.stored_report_count("rr1") == 40

    closed = await harness.admin.CloseQuery(pb.CloseQueryRequest(query_id="rr1"), metadata=ADMIN)
    assert closed.state == pb.QUERY_STATE_CLOSED
    release = await harness.admin.Release(pb.ReleaseRequest(query_id="rr1"), metadata=ADMIN)
    assert release.participants == 40
    counts = expected_counts(devices, 1, len(TARGETS))
    assert [list(e.round_counts) for e in release.estimates] == [[c] for c in counts[0]]
    assert [e.location_id for e in release.estimates] == TARGETS
    for e, c in zip(release.estimates, counts[0], strict=True):
        # (C - a0 N)/p with a0 = (1-p) q = 0.045, p = 0.85.
        assert e.estimate == pytest.approx((c - 0.045 * 40) / 0.85)
        # The exact interval is of counts in [0, 40]: it holds the estimate clipped to them.
        assert e.std_error > 0 and e.ci_low <= min(max(e.estimate, 0.0), 40) <= e.ci_high
        assert e.ci_low <= e.ci_high
        assert e.participants == 40

    # Stored and served again; the individual reports are gone.
    again = await harness.admin.GetRelease(pb.GetReleaseRequest(query_id="rr1"), metadata=ADMIN)
    assert again == release
    assert harness.server.store.stored_report_count("rr1") == 0
    assert (await harness.query("rr1")).state == pb.QUERY_STATE_RELEASED
    assert not (await harness.collector.ListOpenQueries(pb.ListOpenQueriesRequest())).queries


async def test_sampling_privacy_counts_only_devices_that_completed_both_rounds(
    harness: Harness,
) -> None:
    sp = SamplingPrivacy("1/2")
    await harness.create("sp1", sp, TARGETS, min_reports=20)
    devices = [Device(sp, TARGETS[i % 3], TARGETS) for i in range(30)]
    first = await harness.collector.SubmitBatch(
        pb.SubmitBatchRequest(reports=[d.report("sp1", 1) for d in devices])
    )
    assert first.accepted == 30
    advanced = await harness.admin.AdvanceRound(
        pb.AdvanceRoundRequest(query_id="sp1"), metadata=ADMIN
    )
    assert advanced.current_round == 2 and advanced.state == pb.QUERY_STATE_OPEN
    # Ten devices drop out after round 1.
    completers = devices[:20]
    second = await harness.collector.StreamReports(
        iter([pb.SubmitReportRequest(report=d.report("sp1", 2)) for d in completers])
    )
    assert second.accepted == 20
    query = await harness.query("sp1")
    assert list(query.reports_per_round) == [30, 20] and query.completed_devices == 20

    await harness.admin.CloseQuery(pb.CloseQueryRequest(query_id="sp1"), metadata=ADMIN)
    release = await harness.admin.Release(pb.ReleaseRequest(query_id="sp1"), metadata=ADMIN)
    assert release.participants == 20
    expected = expected_counts(completers, 2, len(TARGETS))
    got = [list(e.round_counts) for e in release.estimates]
    assert got == [[expected[0][t], expected[1][t]] for t in range(len(TARGETS))]
    for e in release.estimates:
        y1, y2 = e.round_counts
        assert e.estimate == pytest.approx((y2 - y1) / 0.5)


async def test_same_report_twice_counts_once_and_conflicts_are_already_exists(
    harness: Harness,
) -> None:
    rr = RandomizedResponse("1", "0")  # truthful: the counts are the locations
    await harness.create("idem", rr, [1, 2, 3], allow_no_privacy=True)
    device = Device(rr, 2, [1, 2, 3])
    report = device.report("idem", 1)
    first = await harness.collector.SubmitReport(pb.SubmitReportRequest(report=report))
    again = await harness.collector.SubmitReport(pb.SubmitReportRequest(report=report))
    assert not first.ack.duplicate and again.ack.duplicate
    # Also idempotent inside one batch and across paths.
    batch = await harness.collector.SubmitBatch(pb.SubmitBatchRequest(reports=[report, report]))
    assert (batch.accepted, batch.duplicates) == (0, 2)

    conflicting = pb.Report()
    conflicting.CopyFrom(report)
    conflicting.answers = bytes([0b1000_0000])  # same report id, different answers
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await harness.collector.SubmitReport(pb.SubmitReportRequest(report=conflicting))
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "different report" in (info.value.details() or "")
    # Same device and round under a new report id.
    second = pb.Report()
    second.CopyFrom(report)
    second.report_id = b"\x01" * 16
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await harness.collector.SubmitReport(pb.SubmitReportRequest(report=second))
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "already reported round 1" in (info.value.details() or "")

    query = await harness.query("idem")
    assert list(query.reports_per_round) == [1]
    await harness.admin.CloseQuery(pb.CloseQueryRequest(query_id="idem"), metadata=ADMIN)
    release = await harness.admin.Release(pb.ReleaseRequest(query_id="idem"), metadata=ADMIN)
    assert [list(e.round_counts) for e in release.estimates] == [[0], [1], [0]]


async def test_concurrent_copies_of_one_report_are_counted_once(harness: Harness) -> None:
    import asyncio

    rr = RandomizedResponse("1", "0")
    await harness.create("race", rr, [5], allow_no_privacy=True)
    report = Device(rr, 5, [5]).report("race", 1)
    replies = await asyncio.gather(
        *(harness.collector.SubmitReport(pb.SubmitReportRequest(report=report)) for _ in range(20))
    )
    assert sorted(r.ack.duplicate for r in replies) == [False] + [True] * 19
    assert list((await harness.query("race")).reports_per_round) == [1]
