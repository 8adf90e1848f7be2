"""Release noise and the claims a release carries, through the real server."""

from __future__ import annotations

import math

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
    await harness.create(
        "noisy", truthful, TARGETS, noise=pb.ReleaseNoise(sigma="2"), allow_no_privacy=True
    )
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


async def test_release_claims_are_stored_with_the_release_and_infinities_survive(
    harness: Harness,
) -> None:
    truthful = RandomizedResponse("1", "0")  # reports the true answer: no guarantee at all
    await harness.create("t", truthful, TARGETS, allow_no_privacy=True)
    await harness.collector.SubmitReport(
        pb.SubmitReportRequest(report=Device(truthful, 1, TARGETS).report("t", 1))
    )
    await harness.admin.CloseQuery(pb.CloseQueryRequest(query_id="t"), metadata=ADMIN)
    released = await harness.admin.Release(pb.ReleaseRequest(query_id="t"), metadata=ADMIN)
    assert [c.view for c in released.claims] == ["public", "aggregator"]
    for claim in released.claims:
        assert claim.guarantee == "none"
        assert math.isinf(claim.epsilon) and math.isinf(claim.epsilon_bun_steinke)
        assert not claim.HasField("rho") and claim.explanation
        assert "created this query with --allow-no-privacy" in claim.explanation
    served = await harness.admin.GetRelease(pb.GetReleaseRequest(query_id="t"), metadata=ADMIN)
    assert list(served.claims) == list(released.claims)
    ledger = await harness.admin.GetLedger(pb.GetLedgerRequest(), metadata=ADMIN)
    assert list(ledger.entries[0].claims) == list(released.claims)
    assert math.isinf(ledger.odometer_epsilon)
    assert any(note.startswith("t (public)") for note in ledger.notes)
    # A budget set now starts the first filter (it limits later releases only); the
    # odometer, over everything, keeps saying there is no bound.
    budgeted = await harness.admin.SetBudget(
        pb.SetBudgetRequest(epsilon=1.0, delta=1e-6), metadata=ADMIN
    )
    assert (budgeted.filter_start, budgeted.spent) == (1, 0.0)
    assert math.isinf(budgeted.odometer_epsilon)
