"""Leader: the collect step. Once a query is closed and every held report is aggregated, the
leader asks the helper for its noised, sealed aggregate share (telling it how many reports it
aggregated, so disagreeing aggregators release nothing), then seals its own. Each share is
made once and kept: a retried collect returns the same bytes, never fresh noise. The helper
checks its own count and policy before it releases, and binds its share to its parameters,
count and noise (the collector opens it only with those)."""

from __future__ import annotations

import asyncio
import time

from aggregator.errors import FailedPrecondition, Unavailable
from aggregator.protoconv import claim_to_proto
from aggregator.release import NO_BUDGET_REFUSAL, StoredLedger, iso_time, refusal, unbudgeted
from aggregator.secure.helper_client import HelperClient
from aggregator.secure.queries import mechanism_of, query_message, sigma_of
from aggregator.secure.release_share import noised_sealed_share
from aggregator.secure.store import OPEN
from aggregator.secure.store_api import SecureStoreApi
from aggregator.secure.views import secure_claims
from ldpcollect.accounting.ledger import BudgetExceeded
from ldpcollect.secure.sealing import ROLE_LEADER
from ldpcollect.secure.share_binding import sigma_text
from ldpcollect.v1 import secure_pb2 as spb


async def collect_shares(
    store: SecureStoreApi, helper: HelperClient, query_id: str, require_budget: bool = False
) -> spb.CollectSharesResponse:
    """`require_budget`: refuse while the leader's ledger has no budget and no recorded
    opt-out (`serve --role leader` without --no-budget), before the helper releases anything;
    an opted-out release says in its claims that no budget limits it."""
    # One snapshot: a job committing between two reads would make `aggregated` stale.
    query, pending = await asyncio.to_thread(store.progress, query_id)
    if query.state == OPEN:
        raise FailedPrecondition(f"secure query {query_id!r} is open: close it first")
    if pending:
        raise Unavailable(
            f"{pending} reports are still being aggregated with the helper; retry shortly"
        )
    if query.aggregated < query.params["min_reports"]:
        raise FailedPrecondition(
            f"only {query.aggregated} reports were aggregated; the query needs "
            f"{query.params['min_reports']} (min_reports) to be released"
        )
    stored = StoredLedger.from_body(await asyncio.to_thread(store.ledger))
    claims = secure_claims(
        mechanism_of(query),
        len(query.params["targets"]),
        sigma_of(query.params),
        stored.reporting_delta,
        query.params["min_reports"],
    )
    if stored.ledger.mode == "none":
        if query.sealed_share is None and require_budget and not stored.ledger.no_budget:
            raise FailedPrecondition(NO_BUDGET_REFUSAL.format(query_id=query_id))
        claims = unbudgeted(claims)
    if query.sealed_share is None:
        try:  # the filter refuses before either aggregator releases anything
            stored.ledger.check(claims)
        except BudgetExceeded as error:
            raise refusal(query_id, error) from error
    helper_answer = await helper.aggregate_share(query_id, query.aggregated)

    def charge(body: str | None) -> str:
        ledger = StoredLedger.from_body(body)
        try:
            ledger.ledger.charge(query_id, claims, iso_time(time.time()))
        except BudgetExceeded as error:
            raise refusal(query_id, error) from error
        return ledger.to_body()

    sigma = sigma_of(query.params)
    mine = await asyncio.to_thread(
        store.release, query_id, lambda q: noised_sealed_share(q, ROLE_LEADER, sigma), charge
    )
    released = await asyncio.to_thread(store.query, query_id)
    return spb.CollectSharesResponse(
        query=query_message(released),
        leader_share=mine,
        helper_share=helper_answer.sealed_share,
        reports=released.aggregated,
        claims=[claim_to_proto(c.to_json()) for c in claims],
        leader_noise_sigma=sigma_text(sigma),
        helper_noise_sigma=helper_answer.noise_sigma,
    )
