"""Leader: the aggregation driver. It takes held reports in jobs of up to `batch` reports,
runs the leader's half of verification (its share was opened at upload), sends the job to the
helper, finishes with the helper's verifier messages and commits the outcomes and the new
aggregate share in one transaction.

Crash safety: a job's membership is durable before the helper is called, and verification is
deterministic, so after a leader restart the same job (same id, same verifier shares) is sent
again and the helper answers from its record. While the helper is down or answers garbage the
job stays held and is retried with backoff; nothing held is dropped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import Counter
from dataclasses import dataclass

from aggregator.errors import Unavailable
from aggregator.secure.helper_client import HelperClient
from aggregator.secure.metrics import SecureMetrics
from aggregator.secure.queries import vdaf_of
from aggregator.secure.store import RELEASED, HeldReport, StoredQuery
from aggregator.secure.store_api import SecureStoreApi
from aggregator.secure.upload import held_fields
from ldpcollect.secure.sealing import ROLE_LEADER
from ldpcollect.secure.upload import (
    Prepared,
    ReportRejected,
    finish_one,
    verify_opened,
)
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.vdaf.errors import VdafError

log = logging.getLogger(__name__)

HELPER_MISMATCH = "HELPER_MISMATCH"


class HelperGarbage(Exception):
    """The helper's answer does not match the job: nothing is committed, the job is retried."""


@dataclass
class LeaderHalf:
    """The leader's verification of one job: per report its state, or its refusal."""

    states: dict[bytes, Prepared]
    refusals: dict[bytes, str]
    request: apb.AggregationJobRequest


def leader_half(query: StoredQuery, job_id: bytes, held: list[HeldReport]) -> LeaderHalf:
    """Read the job's held reports, then the leader's `verify_init` over all of them in one
    call (its shares were opened at upload)."""
    vdaf = vdaf_of(query)
    half = LeaderHalf({}, {}, apb.AggregationJobRequest(query_id=query.query_id, job_id=job_id))
    reports = [held_fields(item.body) for item in held]
    outcomes = verify_opened(
        vdaf,
        ROLE_LEADER,
        query.verify_key,
        query.query_id,
        [(r[0], r[1], item.leader_share) for r, item in zip(reports, held, strict=True)],
    )
    for item, (report_id, public_share, helper), outcome in zip(
        held, reports, outcomes, strict=True
    ):
        if isinstance(outcome, ReportRejected):
            half.refusals[item.report_id] = "BAD_PROOF"
            continue
        half.states[item.report_id] = outcome
        half.request.reports.add(
            report_id=report_id,
            public_share=public_share,
            helper_ciphertext=helper,
            leader_verifier_share=outcome.share.verifier_share,
            token=item.token,
        )
    return half


def finish(
    query: StoredQuery, half: LeaderHalf, response: apb.AggregationJobResponse
) -> tuple[list[tuple[bytes, str]], list[int]]:
    """Outcomes per report ('' aggregated) and the sum of the leader's output shares."""
    vdaf = vdaf_of(query)
    sent = [r.report_id for r in half.request.reports]
    if [r.report_id for r in response.results] != sent:
        raise HelperGarbage(f"the helper answered {len(response.results)} results for {len(sent)}")
    outcomes = list(half.refusals.items())
    accepted: list[bytes] = []
    for result in response.results:
        if result.refusal:
            outcomes.append((result.report_id, result.refusal))
            continue
        try:
            message = vdaf.decode_verifier_message(result.verifier_message)
            out = finish_one(half.states[result.report_id], message)
        except (VdafError, ReportRejected):
            outcomes.append((result.report_id, HELPER_MISMATCH))
            continue
        accepted.append(out)
        outcomes.append((result.report_id, ""))
    return outcomes, vdaf.agg_encoded(accepted)


JOB_REPORTS = 500
"""A job's most reports: as many as a device upload's batch, so a job's two transactions (its
claim and its finish) and its helper call are shared by as many reports (200 cost the leader
about 20 us more per report in SQLite, bench.secure)."""


class AggregationDriver:
    """`workers` jobs in flight at once, so the leader's half of one job overlaps the
    helper's half of another (each side then keeps its own core busy)."""

    def __init__(
        self,
        store: SecureStoreApi,
        helper: HelperClient,
        metrics: SecureMetrics,
        batch: int = JOB_REPORTS,
        workers: int = 2,
    ) -> None:
        self.store, self.helper = store, helper
        self.metrics, self.batch, self.workers = metrics, batch, workers
        self.wake = asyncio.Event()
        self._busy: set[bytes] = set()
        self._claiming = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._tasks = [loop.create_task(self._worker()) for _ in range(self.workers)]
        self.wake.set()  # held reports from before a restart

    def held(self) -> None:
        """New reports are held: wake an idle worker. Called from the upload's worker thread,
        so the event is set on the driver's loop (an asyncio.Event is not thread-safe)."""
        if self._loop is not None:
            # a closed loop: the server is stopping; a restart finds the reports held
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self.wake.set)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _worker(self) -> None:
        backoff = 0.2
        while True:
            try:
                progressed = await self.run_once()
            except (Unavailable, HelperGarbage) as error:
                reason = "UNAVAILABLE" if isinstance(error, Unavailable) else "GARBAGE"
                self.metrics.helper_failures.labels(reason).inc()
                log.warning("helper did not finish a job (%s); retrying in %.1fs", error, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except Exception:
                log.exception("aggregation job failed; retrying in %.1fs", backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.2
            if not progressed:
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout=1.0)

    async def run_once(self) -> bool:
        """One job for the first query with held reports; False when none is free."""
        pending = await asyncio.to_thread(self.store.pending)
        for query_id in sorted(pending):
            query = await asyncio.to_thread(self.store.query, query_id)
            if query.state == RELEASED:
                continue
            async with self._claiming:  # claim and mark busy as one step
                job = await asyncio.to_thread(
                    self.store.claim_job,
                    query_id,
                    self.batch,
                    secrets.token_bytes(16),
                    frozenset(self._busy),
                )
                if job is None:
                    continue
                job_id, held = job
                self._busy.add(job_id)
            try:
                await self.run_job(query, job_id, held)
            except BaseException:
                # Another replica (on a shared store) may drive it meanwhile, say with a
                # helper this one cannot reach; it stays held, with the same id and reports.
                self.store.let_go(job_id)
                raise
            finally:
                self._busy.discard(job_id)
            return True
        return False

    async def run_job(self, query: StoredQuery, job_id: bytes, held: list[HeldReport]) -> None:
        half = await asyncio.to_thread(leader_half, query, job_id, held)
        response = apb.AggregationJobResponse()
        if half.request.reports:
            response = await self.helper.aggregate(half.request)
        outcomes, total = await asyncio.to_thread(finish, query, half, response)
        vdaf = vdaf_of(query)

        def merge(old: bytes) -> bytes:
            return vdaf.encode_agg_share(vdaf.merge([vdaf.decode_agg_share(old), total]))

        await asyncio.to_thread(self.store.finish_job, query.query_id, job_id, outcomes, merge)
        for outcome, count in Counter(o or "aggregated" for _, o in outcomes).items():
            self.metrics.reports.labels(outcome).inc(count)
        self.metrics.jobs.inc()
