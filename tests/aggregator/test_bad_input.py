"""Every kind of bad input gets its precise status through a real server and changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import grpc
import pytest

from aggregator.server import AggregatorServer
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.wire import MAX_DESCRIPTION_CHARS
from tests.aggregator.conftest import ADMIN, Device, Harness, connect, expected_counts, make_config

TARGETS = list(range(100, 110))  # 10 targets -> 2 bytes, 6 padding bits
MAX_BATCH = 50
MAX_MESSAGE = 64 * 1024


@pytest.fixture
async def small(tmp_path: Path) -> AsyncIterator[Harness]:
    config = make_config(
        tmp_path / "agg.db", max_batch_reports=MAX_BATCH, max_message_bytes=MAX_MESSAGE
    )
    h = await connect(AggregatorServer(config))
    try:
        yield h
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)


async def refused(call: Awaitable[Any], code: grpc.StatusCode, *words: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    details = info.value.details() or ""
    for word in words:
        assert word in details, f"{word!r} not in {details!r}"


def variant(report: pb.Report, **changes: Any) -> pb.Report:
    copy = pb.Report()
    copy.CopyFrom(report)
    for key, value in changes.items():
        setattr(copy, key, value)
    return copy


def rr_spec(flip1: str = "0.85", flip2: str = "0.3") -> pb.MechanismSpec:
    return pb.MechanismSpec(randomized_response=pb.RandomizedResponse(flip1=flip1, flip2=flip2))


async def test_bad_input_matrix_changes_no_count(small: Harness) -> None:
    h = small
    c, a = h.collector, h.admin
    rr = RandomizedResponse("0.85", "0.3")
    sp = SamplingPrivacy("1/2")
    await h.create("rr", rr, TARGETS, min_reports=5)
    await h.create("sp", sp, TARGETS, min_reports=1)
    await h.create("few", rr, TARGETS, min_reports=100)
    good = [Device(rr, 100 + i % 10, TARGETS) for i in range(8)]
    batch = await c.SubmitBatch(pb.SubmitBatchRequest(reports=[d.report("rr", 1) for d in good]))
    assert batch.accepted == 8
    sp_dev = Device(sp, 101, TARGETS)
    await c.SubmitReport(pb.SubmitReportRequest(report=sp_dev.report("sp", 1)))
    await c.SubmitReport(pb.SubmitReportRequest(report=Device(rr, 100, TARGETS).report("few", 1)))

    async def snapshot() -> list[tuple[str, list[int], int, int]]:
        listed = await a.ListQueries(pb.ListQueriesRequest(), metadata=ADMIN)
        return [
            (q.query_id, list(q.reports_per_round), q.completed_devices, q.state)
            for q in listed.queries
        ]

    before = await snapshot()
    base = Device(rr, 103, TARGETS).report("rr", 1)

    def submit(report: pb.Report) -> Awaitable[pb.SubmitReportResponse]:
        return c.SubmitReport(pb.SubmitReportRequest(report=report))

    # --- reports ------------------------------------------------------------------------
    await refused(submit(variant(base, query_id="nope")), grpc.StatusCode.NOT_FOUND, "'nope'")
    await refused(
        submit(variant(base, round=2)), grpc.StatusCode.FAILED_PRECONDITION, "round 1", "round 2"
    )
    await refused(
        submit(Device(sp, 100, TARGETS).report("sp", 2)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "accepting round 1",
    )
    await refused(
        submit(variant(base, answers=b"\x00")), grpc.StatusCode.INVALID_ARGUMENT, "2 bytes", "got 1"
    )
    await refused(
        submit(variant(base, answers=b"\x00" * 3)), grpc.StatusCode.INVALID_ARGUMENT, "2 bytes"
    )
    await refused(
        submit(variant(base, answers=b"\x00\x01")), grpc.StatusCode.INVALID_ARGUMENT, "padding"
    )
    await refused(
        submit(variant(base, device_pseudonym=b"x" * 15)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "device_pseudonym must be 16 bytes",
    )
    await refused(
        submit(variant(base, report_id=b"")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "report_id must be 16 bytes",
    )
    await refused(
        submit(variant(base, answers=b"\x00" * (MAX_MESSAGE + 10))),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    )
    # Batch-level problems refuse everything, even the valid reports inside.
    fresh = [Device(rr, 105, TARGETS) for _ in range(MAX_BATCH + 1)]
    await refused(
        c.SubmitBatch(pb.SubmitBatchRequest(reports=[d.report("rr", 1) for d in fresh])),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"max_batch_reports {MAX_BATCH}",
    )
    await refused(
        c.SubmitBatch(pb.SubmitBatchRequest()), grpc.StatusCode.INVALID_ARGUMENT, "no reports"
    )
    # Per-report rejections in a batch: every bad one named by index and code.
    original = good[0].report("rr", 1).answers
    flipped = bytes([original[0] ^ 0x80]) + original[1:]  # same report id, other answers
    mixed = await c.SubmitBatch(
        pb.SubmitBatchRequest(
            reports=[
                variant(base, query_id="nope"),
                variant(base, answers=b"\xff\xff"),
                variant(good[0].report("rr", 1), answers=flipped),
                variant(base, round=3),
            ]
        )
    )
    assert (mixed.accepted, mixed.duplicates) == (0, 0)
    assert [(r.index, r.code) for r in mixed.rejected] == [
        (0, grpc.StatusCode.NOT_FOUND.value[0]),
        (1, grpc.StatusCode.INVALID_ARGUMENT.value[0]),
        (2, grpc.StatusCode.ALREADY_EXISTS.value[0]),
        (3, grpc.StatusCode.FAILED_PRECONDITION.value[0]),
    ]
    assert all(r.message for r in mixed.rejected)

    # --- admin: bad mechanism parameters and query definitions ----------------------------
    def create(**fields: Any) -> Awaitable[pb.Query]:
        request: dict[str, Any] = {
            "query_id": "new",
            "mechanism": rr_spec(),
            "location_scheme": pb.LocationScheme(grid=pb.GridScheme()),
            "targets": TARGETS,
            "min_reports": 1,
        }
        request.update(fields)
        return a.CreateQuery(pb.CreateQueryRequest(**request), metadata=ADMIN)

    bad_requests: list[tuple[dict[str, Any], str]] = [
        ({"mechanism": rr_spec(flip1="1.5")}, "flip1"),
        ({"mechanism": rr_spec(flip2="-0.1")}, "flip2"),
        ({"mechanism": rr_spec(flip1="abc")}, "flip1"),
        (
            {"mechanism": pb.MechanismSpec(sampling_privacy=pb.SamplingPrivacy(sampling_rate="0"))},
            "sampling_rate",
        ),
        ({"mechanism": pb.MechanismSpec()}, "mechanism"),
        ({"location_scheme": pb.LocationScheme()}, "location_scheme"),
        ({"location_scheme": pb.LocationScheme(h3=pb.H3Scheme(resolution=16))}, "h3 resolution"),
        ({"targets": []}, "targets"),
        (
            {"location_scheme": pb.LocationScheme(h3=pb.H3Scheme(resolution=8)), "targets": [5]},
            "cell",
        ),
        ({"targets": [1, 1]}, "targets"),
        ({"min_reports": 0}, "min_reports"),
        ({"noise": pb.ReleaseNoise(sigma="-2")}, "noise sigma"),
        # Bounded-cost parsing: a huge exponent used to block the event loop for seconds.
        ({"mechanism": rr_spec(flip1="1e4000000")}, "exponent beyond"),
        ({"mechanism": rr_spec(flip1="1" * 60_000)}, "longer than 64 characters"),
        ({"noise": pb.ReleaseNoise(sigma="1e-300")}, "exponent beyond"),
        # Noise no release could ever use: refused at creation, not at every release after.
        ({"noise": pb.ReleaseNoise(sigma="1e30")}, "[1/10, 1000]"),
        ({"noise": pb.ReleaseNoise(sigma="1/1000")}, "zero almost surely"),
        ({"noise": pb.ReleaseNoise(sigma="10000")}, "too costly"),
        # No privacy at all, unless allow_no_privacy says so.
        ({"mechanism": rr_spec(flip1="1", flip2="0")}, "--allow-no-privacy"),
        ({"mechanism": rr_spec(flip2="1")}, "give no privacy"),
        (
            {"mechanism": pb.MechanismSpec(sampling_privacy=pb.SamplingPrivacy(sampling_rate="1"))},
            "--allow-no-privacy",
        ),
        ({"query_id": "bad id!"}, "query_id"),
    ]
    for fields, parameter in bad_requests:
        await refused(create(**fields), grpc.StatusCode.INVALID_ARGUMENT, parameter)
    with pytest.raises(grpc.aio.AioRpcError) as huge:  # a 60 kB value is not echoed back
        await create(mechanism=rr_spec(flip1="7" * 60_000))
    assert len(huge.value.details() or "") < 400
    assert "(60000 characters)" in (huge.value.details() or "")
    await refused(create(query_id="rr"), grpc.StatusCode.ALREADY_EXISTS, "'rr'")

    # --- admin: lifecycle in the wrong order ----------------------------------------------
    def ask(method: str, query_id: str) -> Awaitable[Any]:
        requests = {
            "AdvanceRound": pb.AdvanceRoundRequest,
            "CloseQuery": pb.CloseQueryRequest,
            "Release": pb.ReleaseRequest,
            "GetRelease": pb.GetReleaseRequest,
            "GetQuery": pb.GetQueryRequest,
        }
        return getattr(a, method)(requests[method](query_id=query_id), metadata=ADMIN)  # type: ignore[no-any-return]

    for method in ("AdvanceRound", "CloseQuery", "Release", "GetRelease", "GetQuery"):
        await refused(ask(method, "nope"), grpc.StatusCode.NOT_FOUND, "'nope'")
    await refused(ask("AdvanceRound", "rr"), grpc.StatusCode.FAILED_PRECONDITION, "last round")
    await refused(ask("CloseQuery", "sp"), grpc.StatusCode.FAILED_PRECONDITION, "AdvanceRound")
    await refused(ask("Release", "rr"), grpc.StatusCode.FAILED_PRECONDITION, "CloseQuery before")
    await refused(ask("GetRelease", "rr"), grpc.StatusCode.NOT_FOUND, "not released")
    await refused(
        c.GetQuery(pb.GetQueryRequest(query_id="nope")), grpc.StatusCode.NOT_FOUND, "'nope'"
    )

    assert await snapshot() == before

    # --- closed, released, below min_reports, second release ------------------------------
    await ask("CloseQuery", "rr")
    await refused(submit(base), grpc.StatusCode.FAILED_PRECONDITION, "closed")
    await refused(ask("CloseQuery", "rr"), grpc.StatusCode.FAILED_PRECONDITION, "already closed")
    await refused(ask("AdvanceRound", "rr"), grpc.StatusCode.FAILED_PRECONDITION, "closed")
    await ask("CloseQuery", "few")
    await refused(
        ask("Release", "few"),
        grpc.StatusCode.FAILED_PRECONDITION,
        "has 1 devices",
        "min_reports 100",
    )
    await ask("AdvanceRound", "sp")
    await refused(ask("AdvanceRound", "sp"), grpc.StatusCode.FAILED_PRECONDITION, "last round")
    await refused(
        submit(Device(sp, 100, TARGETS).report("sp", 2)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "no round-1 report",
    )
    await refused(
        submit(variant(sp_dev.report("sp", 1), report_id=b"\x02" * 16)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "round 2",
    )
    release = await ask("Release", "rr")
    await refused(
        ask("Release", "rr"), grpc.StatusCode.FAILED_PRECONDITION, "already released", "GetRelease"
    )
    await refused(submit(base), grpc.StatusCode.FAILED_PRECONDITION, "released")

    # Counts: only the 8 good reports entered, nothing else.
    expected = expected_counts(good, 1, len(TARGETS))
    assert [list(e.round_counts) for e in release.estimates] == [[x] for x in expected[0]]
    assert release.participants == 8
    after = {q[0]: q[1:] for q in await snapshot()}
    assert after["rr"] == ([8], 8, pb.QUERY_STATE_RELEASED)
    assert after["sp"] == ([1, 0], 0, pb.QUERY_STATE_OPEN)
    assert after["few"] == ([1], 1, pb.QUERY_STATE_CLOSED)
    assert "new" not in after


async def test_admin_rpcs_need_the_token(harness: Harness) -> None:
    a = harness.admin
    request = pb.ListQueriesRequest()
    await refused(a.ListQueries(request), grpc.StatusCode.UNAUTHENTICATED, "authorization")
    await refused(
        a.ListQueries(request, metadata=(("authorization", "Basic abc"),)),
        grpc.StatusCode.UNAUTHENTICATED,
        "Bearer",
    )
    await refused(
        a.ListQueries(request, metadata=(("authorization", "Bearer wrong"),)),
        grpc.StatusCode.PERMISSION_DENIED,
        "wrong",
    )
    create = pb.CreateQueryRequest(
        query_id="x",
        mechanism=rr_spec(),
        location_scheme=pb.LocationScheme(grid=pb.GridScheme()),
        targets=[1],
        min_reports=1,
    )
    await refused(a.CreateQuery(create), grpc.StatusCode.UNAUTHENTICATED)
    await refused(
        a.CreateQuery(create, metadata=(("authorization", "Bearer nope"),)),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await refused(a.SetBudget(pb.SetBudgetRequest(epsilon=1)), grpc.StatusCode.UNAUTHENTICATED)
    # Nothing was created; the right token works.
    listed = await a.ListQueries(request, metadata=ADMIN)
    assert list(listed.queries) == []


async def test_a_description_is_bounded(small: Harness) -> None:
    """Free text for people, not a place for megabytes (it is in every listing)."""
    rr = RandomizedResponse("0.85", "0.3")
    await small.create("long-enough", rr, TARGETS, description="d" * MAX_DESCRIPTION_CHARS)
    await refused(
        small.create("too-long", rr, TARGETS, description="d" * 500_000),
        grpc.StatusCode.INVALID_ARGUMENT,
        "description",
        "500000 characters",
    )
    # Over CreateQuery's 1 MiB: refused before it is read.
    await refused(
        small.create("too-long", rr, TARGETS, description="d" * 3_900_000),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    )
    await refused(small.query("too-long"), grpc.StatusCode.NOT_FOUND)
