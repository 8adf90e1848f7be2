"""The privacy ledger through the real server: budget, filter, charge, odometer, persistence.

Figures are compared with the accounting package's functions AND with independent computations
written out here (zCDP of sensitivity-sqrt(2) Gaussian noise, the Bun-Steinke and
Canonne-Kamath-Steinke conversions, randomized response's pure epsilon, the odometer's tiers).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import grpc
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from aggregator.server import AggregatorServer
from ldpcollect.accounting.release_cost import release_claims
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.aggregator.conftest import (
    ADMIN,
    Device,
    Harness,
    connect,
    expected_counts,
    make_config,
)

TARGETS = [101, 102, 103, 104, 105, 106]
DELTA = 1e-6


# -- independent figures ------------------------------------------------------------------------


def cks_epsilon(rho: float, delta: float) -> float:
    """Canonne-Kamath-Steinke 2020: eps = min over alpha > 1 of
    alpha rho + log(1/delta)/(alpha-1) + log(alpha-1) - alpha log(alpha)/(alpha-1)."""

    def eps(log_am1: float) -> float:
        a = 1.0 + math.exp(log_am1)
        return a * rho + math.log(1 / delta) / (a - 1) + math.log(a - 1) - a * math.log(a) / (a - 1)

    grid = np.linspace(-12.0, 12.0, 4801)
    best = min(grid, key=eps)
    refined = minimize_scalar(eps, bounds=(best - 0.01, best + 0.01), method="bounded")
    return max(0.0, min(eps(best), float(refined.fun)))


def bun_steinke(rho: float, delta: float) -> float:
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def rr_pure_two_answers(p: float, q: float) -> float:
    """A device moving between two targets: one answer Yes->No, another No->Yes."""
    yes_if_yes, yes_if_no = p + (1 - p) * q, (1 - p) * q
    return math.log(yes_if_yes / yes_if_no) + math.log((1 - yes_if_no) / (1 - yes_if_yes))


def scheduled_epsilon(runs: Sequence[tuple[Mechanism, int, Fraction]], delta: float) -> float:
    """The odometer's basic composition with its delta schedule, written out: the i-th release
    restated at (delta / 2) 6 / (pi^2 i^2)."""
    total = 0.0
    for i, (mech, targets, sigma) in enumerate(runs, start=1):
        share = delta / 2 * 6 / (math.pi**2 * i * i)
        claims = release_claims(mech, targets, sigma, share)
        total += next(c for c in claims if c.view == "public").epsilon
    return total


# -- helpers ------------------------------------------------------------------------------------


async def collect(
    h: Harness,
    query_id: str,
    mech: Mechanism,
    targets: Sequence[int] = TARGETS,
    n: int = 18,
    sigma: str | None = None,
) -> list[Device]:
    """Create a query, run n devices through every round, close it."""
    noise = pb.ReleaseNoise(sigma=sigma) if sigma is not None else None
    await h.create(query_id, mech, targets, noise=noise)
    devices = [Device(mech, targets[i % len(targets)], targets) for i in range(n)]
    for round_ in range(1, mech.rounds + 1):
        if round_ > 1:
            await h.admin.AdvanceRound(pb.AdvanceRoundRequest(query_id=query_id), metadata=ADMIN)
        await h.collector.SubmitBatch(
            pb.SubmitBatchRequest(reports=[d.report(query_id, round_) for d in devices])
        )
    await h.admin.CloseQuery(pb.CloseQueryRequest(query_id=query_id), metadata=ADMIN)
    return devices


async def release(h: Harness, query_id: str) -> pb.QueryRelease:
    return await h.admin.Release(pb.ReleaseRequest(query_id=query_id), metadata=ADMIN)


async def ledger(h: Harness) -> pb.Ledger:
    return await h.admin.GetLedger(pb.GetLedgerRequest(), metadata=ADMIN)


async def set_budget(
    h: Harness, epsilon: float, delta: float, *, new_filter: bool = False
) -> pb.Ledger:
    return await h.admin.SetBudget(
        pb.SetBudgetRequest(epsilon=epsilon, delta=delta, new_filter=new_filter), metadata=ADMIN
    )


async def refused(h: Harness, query_id: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await release(h, query_id)
    return info.value


def public(claims: Sequence[pb.PrivacyClaim]) -> pb.PrivacyClaim:
    (claim,) = [c for c in claims if c.view == "public"]
    return claim


# -- tests --------------------------------------------------------------------------------------


async def test_noised_sp_is_charged_one_over_sigma_squared_and_persists_across_restart(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agg.db"
    sp = SamplingPrivacy("1/2")
    h = await connect(AggregatorServer(make_config(db)))
    try:
        budget = await set_budget(h, 5.0, DELTA)
        assert (budget.budget_mode, budget.currency) == ("zcdp", "rho")
        assert budget.reporting_delta == DELTA
        assert cks_epsilon(budget.budget_rho, DELTA) == pytest.approx(5.0, rel=1e-6)
        await collect(h, "sp2", sp, sigma="2")
        await collect(h, "sp2b", sp, sigma="2")
        out = await release(h, "sp2")
        # rho = sensitivity^2 / (2 sigma^2) with sensitivity^2 = 2 (>= 2 targets) = 1/sigma^2.
        claim = public(out.claims)
        assert claim.guarantee == "zcdp"
        assert claim.rho == pytest.approx(2 / (2 * 2.0**2)) == 0.25
        assert claim.delta == DELTA
        assert claim.epsilon_bun_steinke == pytest.approx(bun_steinke(0.25, DELTA), rel=1e-9)
        assert 0 < claim.epsilon <= cks_epsilon(0.25, DELTA) * (1 + 1e-6)
        c_public, c_aggregator = release_claims(sp, len(TARGETS), Fraction(2), DELTA)
        assert (claim.rho, claim.epsilon, claim.explanation) == (
            c_public.rho,
            c_public.epsilon,
            c_public.explanation,
        )
        aggregator = next(c for c in out.claims if c.view == "aggregator")
        assert (aggregator.guarantee, aggregator.reveal_probability) == ("approximate", 0.5)
        assert math.isinf(aggregator.epsilon) and aggregator.delta == DELTA
        assert aggregator.delta == c_aggregator.delta
        before = await ledger(h)
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)

    h = await connect(AggregatorServer(make_config(db)))
    try:
        after = await ledger(h)
        assert after == before
        assert [e.query_id for e in after.entries] == ["sp2"]
        assert after.entries[0].charged == 0.25
        assert after.spent == after.spent_rho == 0.25
        assert after.remaining == pytest.approx(after.budget_rho - 0.25)
        assert after.spent_epsilon == pytest.approx(cks_epsilon(0.25, DELTA), rel=1e-4)
        assert after.spent_epsilon_bun_steinke == pytest.approx(bun_steinke(0.25, DELTA))
        # The filter's state survived the restart: a second rho 0.25 would pass rho_B 0.463.
        error = await refused(h, "sp2b")
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        details = error.details() or ""
        assert "spent rho 0.25" in details and "requested rho 0.25" in details
        assert f"remaining rho {after.budget_rho - 0.25:.6g}" in details
        assert (await h.query("sp2b")).state == pb.QUERY_STATE_CLOSED
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)


async def test_release_beyond_a_pure_budget_is_refused_before_anything_changes(
    harness: Harness,
) -> None:
    rr = RandomizedResponse("0.85", "0.3")
    cost = rr_pure_two_answers(0.85, 0.3)
    await set_budget(harness, 6.0, 0.0)
    await collect(harness, "first", rr)
    devices = await collect(harness, "second", rr)
    out = await release(harness, "first")
    assert public(out.claims).pure_epsilon == pytest.approx(cost, rel=1e-6)
    query_before = await harness.query("second")
    ledger_before = await ledger(harness)
    assert ledger_before.spent == pytest.approx(cost, rel=1e-6)

    error = await refused(harness, "second")
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    details = error.details() or ""
    assert f"spent epsilon {ledger_before.spent:.6g}" in details
    assert f"requested epsilon {ledger_before.spent:.6g}" in details  # same query shape
    assert f"remaining epsilon {6.0 - ledger_before.spent:.6g}" in details
    # Nothing changed: still closed, reports kept, counts and ledger as before.
    assert await harness.query("second") == query_before
    assert query_before.state == pb.QUERY_STATE_CLOSED
    assert harness.server.store.stored_report_count("second") == len(devices)
    assert await ledger(harness) == ledger_before
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await harness.admin.GetRelease(pb.GetReleaseRequest(query_id="second"), metadata=ADMIN)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND

    # Raising the budget within the filter is refused (it would void the filter's guarantee).
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await set_budget(harness, 11.0, 0.0)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "--new-filter" in (info.value.details() or "")
    assert await ledger(harness) == ledger_before
    # A new filter, an explicit recorded act, lets it through (counts exactly as stored).
    fresh = await set_budget(harness, 6.0, 0.0, new_filter=True)
    assert [(c.releases_before, c.new_filter) for c in fresh.budget_changes] == [
        (0, False),
        (1, True),
    ]
    assert (fresh.filter_start, fresh.spent) == (1, 0.0)
    assert any("new filter(s) were started" in n for n in fresh.notes)
    second = await release(harness, "second")
    counts = expected_counts(devices, 1, len(TARGETS))
    assert [[e.round_counts[0] for e in second.estimates]] == counts
    final = await ledger(harness)
    assert [e.query_id for e in final.entries] == ["first", "second"]
    assert final.spent == pytest.approx(cost, rel=1e-6)  # the new filter's release only
    assert final.spent_pure_epsilon == pytest.approx(2 * cost, rel=1e-6)
    # Every release had a pure bound: the odometer is their sum (delta 0) when that is smaller.
    assert final.odometer_epsilon == pytest.approx(2 * cost, rel=1e-6)
    assert final.odometer_delta == 0.0


async def test_unnoised_sp_under_a_budget_is_refused_with_the_reason(harness: Harness) -> None:
    sp = SamplingPrivacy("1/2")
    await set_budget(harness, 5.0, DELTA)
    await collect(harness, "bare", sp)
    error = await refused(harness, "bare")
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    details = error.details() or ""
    assert "no zCDP bound" in details and "add release noise" in details
    assert "requested rho inf" in details
    assert (await harness.query("bare")).state == pb.QUERY_STATE_CLOSED
    assert not (await ledger(harness)).entries


async def test_single_target_noise_costs_half_and_the_odometer_reads_the_exact_pairs(
    harness: Harness,
) -> None:
    sp = SamplingPrivacy("1/2")
    await collect(harness, "one", sp, targets=[7], sigma="3")
    await collect(harness, "many", sp, sigma="5")
    one, many = await release(harness, "one"), await release(harness, "many")
    assert public(one.claims).rho == pytest.approx(1 / (2 * 9))
    assert public(many.claims).rho == pytest.approx(1 / 25)
    view = await ledger(harness)
    # No budget: reported at the fixed delta, nothing refused, no "charged" figure.
    assert (view.budget_mode, view.reporting_delta) == ("none", DELTA)
    assert not view.HasField("remaining") and math.isinf(view.remaining_rho)
    assert all(not e.HasField("charged") for e in view.entries)
    assert [len(e.claims) for e in view.entries] == [2, 2]
    for entry, rel in zip(view.entries, (one, many), strict=True):
        assert list(entry.claims) == list(rel.claims)
    total = 1 / 18 + 1 / 25
    assert view.spent_rho == pytest.approx(total)
    assert view.odometer_delta == DELTA
    # The odometer (tests/accounting/test_ledger_odometer.py checks both of its readings):
    # here the basic composition with the delta schedule, far below the zCDP tiers' figure.
    runs = [(sp, 1, Fraction(3)), (sp, 2, Fraction(5))]
    assert view.odometer_epsilon == pytest.approx(scheduled_epsilon(runs, DELTA), rel=1e-9)
    assert view.odometer_epsilon < cks_epsilon(total, DELTA)  # rho alone: 2.3
    assert view.odometer_method.startswith("basic composition with scheduled deltas; also")


async def test_unnoised_sp_without_budget_is_recorded_with_its_weak_guarantee(
    harness: Harness,
) -> None:
    await collect(harness, "weak", SamplingPrivacy("1/2"))
    out = await release(harness, "weak")
    claim = public(out.claims)
    # No finite epsilon at the reporting delta: the selection shows with probability 1/2.
    assert (claim.guarantee, claim.delta, claim.reveal_probability) == ("approximate", DELTA, 0.5)
    assert math.isinf(claim.epsilon)
    assert not claim.HasField("rho")
    view = await ledger(harness)
    assert any(n.startswith("weak (public)") and "probability 1/2" in n for n in view.notes)
    assert math.isinf(view.spent_rho)
    assert view.odometer_delta == pytest.approx(0.5 + DELTA)
    assert "WITHOUT a privacy budget" in claim.explanation
    # A budget set now starts the first filter (recorded): it limits later releases, and the
    # ledger's headline, over everything, stays unbounded because of this release.
    budgeted = await set_budget(harness, 5.0, DELTA)
    assert (budgeted.filter_start, budgeted.spent) == (1, 0.0)
    assert budgeted.budget_changes[-1].new_filter
    assert math.isinf(budgeted.odometer_epsilon) or budgeted.odometer_delta > 0.5


async def test_set_budget_validates_and_cannot_go_below_spent(harness: Harness) -> None:
    start = await ledger(harness)
    bad = (
        (-1.0, DELTA, "epsilon", "[0, inf)"),
        (math.nan, DELTA, "epsilon", "[0, inf)"),
        (math.inf, DELTA, "epsilon", "[0, inf)"),
        (1.0, 1.0, "delta", "[0, 1)"),
        (1.0, -0.1, "delta", "[0, 1)"),
        (1.0, math.nan, "delta", "[0, 1)"),
    )
    for epsilon, delta, name, allowed in bad:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await set_budget(harness, epsilon, delta)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        details = info.value.details() or ""
        assert name in details and allowed in details
    assert await ledger(harness) == start

    await set_budget(harness, 5.0, DELTA)
    await collect(harness, "s", SamplingPrivacy("1/2"), sigma="1")  # rho 1 > rho_B(5) = 0.46
    assert (await refused(harness, "s")).code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    await set_budget(harness, 8.0, DELTA)  # rho_B 1.05
    await release(harness, "s")
    before = await ledger(harness)
    # Once a release is charged the filter's budget is fixed: neither lowered nor raised.
    for epsilon in (7.0, 7.9, 9.0):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await set_budget(harness, epsilon, DELTA)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "budget is fixed once a release was charged" in (info.value.details() or "")
        assert await ledger(harness) == before
    same = await set_budget(harness, 8.0, DELTA)  # the same budget again changes nothing
    assert (same.spent, len(same.budget_changes)) == (1.0, len(before.budget_changes))


async def test_a_ledger_written_before_accounting_is_read_and_its_releases_flagged(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agg.db"
    h = await connect(AggregatorServer(make_config(db)))
    await h.channel.close(None)
    await h.server.stop(grace=None)
    legacy = {
        "budget_epsilon": 0.0,
        "budget_delta": 0.0,
        "entries": [{"query_id": "old", "released_at": 1.0, "claims": []}],
        "accounting": None,
    }
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO ledger (id, body) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET body = excluded.body",
            (json.dumps(legacy),),
        )
    h = await connect(AggregatorServer(make_config(db)))
    try:
        view = await ledger(h)
        assert view.budget_mode == "none" and not view.entries
        assert any("NOT counted" in n and n.endswith(": old") for n in view.notes)
        await collect(h, "new", SamplingPrivacy("1/2"), sigma="4")
        await release(h, "new")
        view = await ledger(h)
        assert [e.query_id for e in view.entries] == ["new"]
        assert any(n.endswith(": old") for n in view.notes)  # still flagged after a charge
    finally:
        await h.channel.close(None)
        await h.server.stop(grace=None)
