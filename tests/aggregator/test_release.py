"""Release noise, the budget seam and the ledger view through the real server."""

from __future__ import annotations

import math

import grpc
import pytest

from ldpcollect.accounting.discrete_gaussian import discrete_gaussian_variance
from ldpcollect.mechanisms import RandomizedResponse
from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.aggregator.conftest import ADMIN, Device, Harness

TARGETS = list(range(1, 21))


async def test_release_noise_is_integer_discrete_gaussian_and_enters_the_error(
    harness: Harness,
) -> None:
    truthful = RandomizedResponse("1", "0")  # counts are exact, so the noise is visible
    await harness.create("noisy", truthful, TARGETS, noise=pb.ReleaseNoise(sigma="2"))
    devices = [Device(truthful, TARGETS[i % 20], TARGETS) for i in range(60)]
    await harness.collector.SubmitBatch(
        pb.SubmitBatchRequest(reports=[d.report("noisy", 1) for d in devices])
    )
    await harness.admin.CloseQuery(pb.CloseQueryRequest(query_id="noisy"), metadata=ADMIN)
    release = await harness.admin.Release(pb.ReleaseRequest(query_id="noisy"), metadata=ADMIN)
    noise = [e.round_counts[0] - 3 for e in release.estimates]  # 3 devices per target
    assert any(n != 0 for n in noise)  # all 20 zero has probability ~0.2**20
    assert all(abs(n) <= 20 for n in noise)  # 10 sigma
    expected_se = math.sqrt(discrete_gaussian_variance(4))  # sigma^2 = 4; p = 1 adds nothing
    for e in release.estimates:
        assert e.estimate == pytest.approx(e.round_counts[0])
        assert e.std_error == pytest.approx(expected_se)


async def test_budget_set_without_accounting_refuses_release_and_bad_budget_is_invalid(
    harness: Harness,
) -> None:
    rr = RandomizedResponse("0.85", "0.3")
    await harness.create("b", rr, TARGETS)
    await harness.collector.SubmitReport(
        pb.SubmitReportRequest(report=Device(rr, 1, TARGETS).report("b", 1))
    )
    await harness.admin.CloseQuery(pb.CloseQueryRequest(query_id="b"), metadata=ADMIN)
    for epsilon, delta, word in ((-1.0, 1e-6, "epsilon"), (1.0, 1.5, "delta")):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await harness.admin.SetBudget(
                pb.SetBudgetRequest(epsilon=epsilon, delta=delta), metadata=ADMIN
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert word in (info.value.details() or "")
    ledger = await harness.admin.SetBudget(
        pb.SetBudgetRequest(epsilon=1.0, delta=1e-6), metadata=ADMIN
    )
    assert (ledger.budget_epsilon, ledger.budget_delta) == (1.0, 1e-6)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await harness.admin.Release(pb.ReleaseRequest(query_id="b"), metadata=ADMIN)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # Refused before anything happened: still closed, reports kept, no ledger entry.
    assert (await harness.query("b")).state == pb.QUERY_STATE_CLOSED
    assert harness.server.store.stored_report_count("b") == 1
    assert not (await harness.admin.GetLedger(pb.GetLedgerRequest(), metadata=ADMIN)).entries
    # Without a budget the release goes through and is listed in the ledger.
    await harness.admin.SetBudget(pb.SetBudgetRequest(epsilon=0.0, delta=0.0), metadata=ADMIN)
    await harness.admin.Release(pb.ReleaseRequest(query_id="b"), metadata=ADMIN)
    ledger = await harness.admin.GetLedger(pb.GetLedgerRequest(), metadata=ADMIN)
    assert [e.query_id for e in ledger.entries] == ["b"]
