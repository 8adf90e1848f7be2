"""The ledger's Renyi filter chosen through SetBudget: count-level RR releases fit a budget that
the zCDP filter (which charges RR its local rho 4.42) empties at once."""

from __future__ import annotations

import grpc
import pytest

from ldpcollect.mechanisms import RandomizedResponse
from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.aggregator.conftest import ADMIN, Device, Harness

TARGETS = [101, 102, 103, 104, 105]
FLOOR = 2_000  # min_reports: the count-level public figure is 0.543 at delta 1e-6 here
BUDGET = 0.8  # the Renyi filter admits one such release within it, not two


async def _released_query(h: Harness, query_id: str) -> None:
    rr = RandomizedResponse("0.85", "0.3")
    await h.create(query_id, rr, TARGETS, min_reports=FLOOR)
    devices = [Device(rr, TARGETS[i % 5], TARGETS) for i in range(FLOOR)]
    for start in range(0, FLOOR, 500):
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report(query_id, 1) for d in devices[start:][:500]])
        )
    await h.admin.CloseQuery(pb.CloseQueryRequest(query_id=query_id), metadata=ADMIN)


async def test_renyi_filter_admits_a_count_level_release_the_zcdp_filter_refuses(
    harness: Harness,
) -> None:
    a = harness.admin
    await _released_query(harness, "first")
    await _released_query(harness, "second")

    zcdp = await a.SetBudget(pb.SetBudgetRequest(epsilon=BUDGET, delta=1e-6), metadata=ADMIN)
    assert zcdp.budget_mode == "zcdp"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await a.Release(pb.ReleaseRequest(query_id="first"), metadata=ADMIN)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await a.SetBudget(
            pb.SetBudgetRequest(epsilon=1.0, delta=1e-6, filter="odometer"), metadata=ADMIN
        )
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "zcdp, renyi" in (bad.value.details() or "")

    renyi = await a.SetBudget(
        pb.SetBudgetRequest(epsilon=BUDGET, delta=1e-6, filter="renyi"), metadata=ADMIN
    )
    assert renyi.budget_mode == "renyi"
    released = await a.Release(pb.ReleaseRequest(query_id="first"), metadata=ADMIN)
    public = next(c for c in released.claims if c.view == "public")
    assert public.epsilon < BUDGET  # the count-level figure, not the local 5.198
    # One such release uses most of the budget: the second is refused, nothing changes.
    with pytest.raises(grpc.aio.AioRpcError) as full:
        await a.Release(pb.ReleaseRequest(query_id="second"), metadata=ADMIN)
    assert full.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (await harness.query("second")).state == pb.QUERY_STATE_CLOSED

    # The filter is chosen before the first release, never switched within it after one.
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await a.SetBudget(
            pb.SetBudgetRequest(epsilon=BUDGET, delta=1e-6, filter="zcdp"), metadata=ADMIN
        )
    assert late.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "budget is fixed once a release was charged" in (late.value.details() or "")
    ledger = await a.GetLedger(pb.GetLedgerRequest(), metadata=ADMIN)
    assert ledger.budget_mode == "renyi" and [e.query_id for e in ledger.entries] == ["first"]
