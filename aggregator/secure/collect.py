"""Leader: the collect step. Once a query is closed and every held report is aggregated, the
leader asks the helper for its noised, sealed aggregate share (telling it how many reports it
aggregated, so disagreeing aggregators release nothing), then seals its own. Each share is
made once and kept: a retried collect returns the same bytes, never fresh noise."""

from __future__ import annotations

import asyncio

from aggregator.errors import FailedPrecondition, Unavailable
from aggregator.secure.helper_client import HelperClient
from aggregator.secure.queries import query_message
from aggregator.secure.release_share import noised_sealed_share
from aggregator.secure.store import OPEN, SecureStore
from ldpcollect.secure.sealing import ROLE_LEADER
from ldpcollect.v1 import secure_pb2 as spb


async def collect_shares(
    store: SecureStore, helper: HelperClient, query_id: str
) -> spb.CollectSharesResponse:
    query = await asyncio.to_thread(store.query, query_id)
    if query.state == OPEN:
        raise FailedPrecondition(f"secure query {query_id!r} is open: close it first")
    pending = (await asyncio.to_thread(store.pending, query_id)).get(query_id, 0)
    if pending:
        raise Unavailable(
            f"{pending} reports are still being aggregated with the helper; retry shortly"
        )
    if query.aggregated < query.params["min_reports"]:
        raise FailedPrecondition(
            f"only {query.aggregated} reports were aggregated; the query needs "
            f"{query.params['min_reports']} (min_reports) to be released"
        )
    helper_share = await helper.aggregate_share(query_id, query.aggregated)
    mine = await asyncio.to_thread(
        store.release, query_id, lambda q: noised_sealed_share(q, ROLE_LEADER)
    )
    released = await asyncio.to_thread(store.query, query_id)
    return spb.CollectSharesResponse(
        query=query_message(released),
        leader_share=mine,
        helper_share=helper_share,
        reports=released.aggregated,
    )
