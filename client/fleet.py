"""Drive a simulated fleet of devices through the real gRPC service.

Randomness: the fleet uses the mechanisms' vectorized FLEET half (`mech.fleet_answers` with a
seeded numpy Generator), not one CSPRNG draw per device: it is a simulation, and 10^5 devices
draw in milliseconds. Pseudonyms and report ids come from the OS CSPRNG, so two fleets never
collide, except for a fleet of named devices (`FleetState.names`, e.g. a CSV's rows): it is the
same devices every run, deriving its answers, pseudonyms and report ids from each device's name,
the operator's fleet key and the query (`client.fleet_identity`), so a second run is
deduplicated by the aggregator rather than counted again. The per-device
`client.device.Device` uses the device half (CSPRNG, exact rationals).

Everything a real device would keep is kept for every simulated device (`FleetState`): answers
drawn once per query, one report id per round, acks; a rerun or a retry resends with the same
report ids (the server acknowledges them once). Each device has its own budget: a device whose
ledger cannot afford a query declines it, and the result counts those devices.

Three paths (one gRPC call per device, client streams, batches) with bounded concurrency:
`concurrency` calls in flight at once.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, TypeVar

import grpc
import grpc.aio
import numpy as np
import numpy.typing as npt

from client import fleet_identity
from client.fleet_state import FleetQuery, FleetState
from client.fleet_tokens import FleetTokens
from client.leakage import DeviceBudget, query_cost
from client.query_info import QueryInfo
from client.retry import RetryPolicy, is_retryable, is_transient, next_delay
from ldpcollect import geo
from ldpcollect.errors import ParameterError
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc

_R = TypeVar("_R")
Mode = Literal["unary", "stream", "batch"]
MODES: tuple[Mode, ...] = ("unary", "stream", "batch")
KEY_BYTES = 16
_CODES = {code.value[0]: code for code in grpc.StatusCode}

# progress(advance_by) after each acknowledged or failed report(s)
ProgressHook = Callable[[int], None]


@dataclass(frozen=True)
class FleetConfig:
    mode: Mode = "batch"
    concurrency: int = 8
    batch_size: int = 500
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Called with the gRPC status code before each retry of a call (tests, logging).
    on_retry: Callable[[grpc.StatusCode], None] | None = None
    # Where the simulated devices get admission tokens, for queries that require them.
    tokens: FleetTokens | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ParameterError("mode", self.mode, "unary, stream or batch")
        if not 1 <= self.concurrency <= 10_000:
            raise ParameterError("concurrency", self.concurrency, "[1, 10000]")
        if not 1 <= self.batch_size <= 100_000:
            raise ParameterError("batch_size", self.batch_size, "[1, 100000]")


@dataclass
class RoundResult:
    """What happened when the fleet answered one round of one query."""

    query_id: str
    round: int
    mode: str
    sent: int = 0  # reports that left the fleet this run (first attempts)
    accepted: int = 0
    duplicates: int = 0
    already_acknowledged: int = 0
    failed: int = 0
    retries: int = 0
    seconds: float = 0.0
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def reports_per_second(self) -> float:
        done = self.accepted + self.duplicates
        return done / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "query_id": self.query_id,
            "round": self.round,
            "mode": self.mode,
            "sent": self.sent,
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "already_acknowledged": self.already_acknowledged,
            "failed": self.failed,
            "retries": self.retries,
            "seconds": round(self.seconds, 4),
            "reports_per_second": round(self.reports_per_second, 1),
            "failures": [
                {"code": code, "message": message, "count": count}
                for (code, message), count in self.failures.most_common(10)
            ],
        }


@dataclass
class FleetResult:
    """One fleet run over a query: rounds answered, declines, and the ground truth used."""

    query_id: str
    mechanism: str
    params: dict[str, str]
    devices: int
    answering: int
    declined: int
    charge_epsilon: float
    charge_delta: float
    scheme: geo.LocationScheme
    targets: tuple[int, ...]
    ground_truth: npt.NDArray[np.int64]  # devices at each target among those that completed
    completed: int  # devices whose every round so far was acknowledged
    outside_targets: int  # completed devices in no target
    rounds_total: int = 1  # the query's rounds (SP: 2)
    rounds: list[RoundResult] = field(default_factory=list)

    def truth_by_location(self) -> dict[int, int]:
        return {t: int(c) for t, c in zip(self.targets, self.ground_truth, strict=True)}

    def to_json(self) -> dict[str, object]:
        return {
            "query_id": self.query_id,
            "mechanism": self.mechanism,
            "params": self.params,
            "devices": self.devices,
            "answering": self.answering,
            "declined": self.declined,
            "charge_per_device": {"epsilon": self.charge_epsilon, "delta": self.charge_delta},
            "completed": self.completed,
            "outside_targets": self.outside_targets,
            "rounds": [r.to_json() for r in self.rounds],
            "scheme": self.scheme.describe(),
            "ground_truth": [
                {"location_id": self.scheme.cell_json(t), "true_count": int(c)}
                for t, c in zip(self.targets, self.ground_truth, strict=True)
            ],
        }


class FleetError(Exception):
    """The fleet cannot answer this query (e.g. it joined after round 1)."""


def new_fleet(
    lats: npt.ArrayLike,
    lons: npt.ArrayLike,
    budget_epsilon: float | None = None,
    budget_delta: float = 0.0,
) -> FleetState:
    """A fleet at these locations; with a budget, every device keeps its own DeviceBudget."""
    return FleetState(
        lats=np.asarray(lats, dtype=np.float64),
        lons=np.asarray(lons, dtype=np.float64),
        budget_epsilon=budget_epsilon,
        budget_delta=budget_delta,
    )


def decide(fleet: FleetState, info: QueryInfo, rng: np.random.Generator) -> FleetQuery:
    """Every device decides once: declines if its own budget can't afford it, else draws."""
    existing = fleet.queries.get(info.query_id)
    if existing is not None:
        if existing.fingerprint != info.fingerprint:
            raise FleetError(
                f"query {info.query_id}'s public parameters changed since this fleet drew its "
                "answers; the fleet will not draw again for the same query id"
            )
        return existing
    if info.current_round > 1 and fleet.names is None:
        raise FleetError(
            f"query {info.query_id} is in round {info.current_round} and this fleet never "
            "answered round 1: pass the fleet state file of the run that did (--state), or run "
            "every round in one go (--advance)"
        )
    n = fleet.size
    cost = query_cost(info.mechanism, len(info.targets))
    answering = _can_answer(fleet, cost.epsilon, cost.delta)
    location_ids = info.locate_many(fleet.lats, fleet.lons)
    targets = np.asarray(info.targets, dtype=np.uint64)
    if fleet.names is None:
        answers = info.mechanism.fleet_answers(location_ids, targets, rng)
        key_bytes = os.urandom(n * KEY_BYTES * (1 + info.rounds))
        keys = np.frombuffer(key_bytes, dtype=np.uint8).reshape(1 + info.rounds, n, KEY_BYTES)
    else:
        answers, keys = _named_draws(fleet, info, location_ids, targets)
    acked = np.zeros((info.rounds, n), dtype=bool)
    # A fixed fleet joining after round 1 (a second run after `query advance`) sent its earlier
    # rounds' reports in a previous run, the same ones it would send now; any the aggregator
    # did not get makes it refuse that device's later round, so such a device is not counted.
    acked[: info.current_round - 1] = True
    record = FleetQuery(
        fingerprint=info.fingerprint,
        charge_epsilon=cost.epsilon,
        charge_delta=cost.delta,
        location_ids=location_ids,
        answering=answering,
        pseudonyms=keys[0].copy(),
        report_ids=keys[1:].copy(),
        answers=answers,
        acked=acked,
    )
    fleet.add_query(info.query_id, record)
    return record


def _named_draws(
    fleet: FleetState,
    info: QueryInfo,
    location_ids: npt.NDArray[np.uint64],
    targets: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Answers and (pseudonym, report ids) of named devices: the same device draws the same
    ones every time it meets the same query (`client.fleet_identity`)."""
    assert fleet.names is not None
    if fleet.fleet_key is None:
        raise FleetError("a fleet of named devices needs the operator's fleet key")
    secret = fleet_identity.query_secret(fleet.fleet_key, info.query_id)
    names = fleet.names
    n = names.shape[0]
    keys = np.empty((1 + info.rounds, n, KEY_BYTES), dtype=np.uint8)
    keys[0] = fleet_identity.keyed(secret, names, b"pseudonym", KEY_BYTES)
    for r in range(info.rounds):
        keys[1 + r] = fleet_identity.keyed(secret, names, b"report %d" % (r + 1), KEY_BYTES)
    answers: npt.NDArray[np.uint8] | None = None
    for members, material in fleet_identity.answer_buckets(secret, names):
        drawn = info.mechanism.fleet_answers(
            location_ids[members], targets, fleet_identity.derived_rng(material)
        )
        if answers is None:
            answers = np.empty((drawn.shape[0], n, drawn.shape[2]), dtype=np.uint8)
        answers[:, members] = drawn
    assert answers is not None
    return answers, keys


def _can_answer(fleet: FleetState, epsilon: float, delta: float) -> npt.NDArray[np.bool_]:
    """Each device asks its own DeviceBudget; devices with the same history decide alike."""
    n = fleet.size
    if fleet.budget_epsilon is None:
        return np.ones(n, dtype=bool)
    if not fleet.order:
        patterns = np.zeros((n, 0), dtype=bool)
    else:
        patterns = np.stack([fleet.queries[q].answering for q in fleet.order], axis=1)
    unique, inverse = np.unique(patterns, axis=0, return_inverse=True)
    decisions = np.empty(len(unique), dtype=bool)
    for k, pattern in enumerate(unique):
        budget = DeviceBudget(fleet.budget_epsilon, fleet.budget_delta)
        for qid, answered in zip(fleet.order, pattern, strict=True):
            if answered:
                record = fleet.queries[qid]
                budget.record(qid, record.charge_epsilon, record.charge_delta)
        decisions[k] = budget.can_answer(epsilon, delta)
    return decisions[np.asarray(inverse).reshape(-1)]


def ground_truth(
    record: FleetQuery, targets: tuple[int, ...], upto_round: int
) -> tuple[npt.NDArray[np.int64], int, int]:
    """(true count per target, completed devices, completed devices in no target).

    Completed = answering devices whose rounds 1..upto_round were all acknowledged: exactly the
    devices the aggregator counts.
    """
    completed = record.answering & record.acked[:upto_round].all(axis=0)
    locations = record.location_ids[completed]
    order = np.argsort(np.asarray(targets, dtype=np.uint64), kind="stable")
    sorted_targets = np.asarray(targets, dtype=np.uint64)[order]
    pos = np.searchsorted(sorted_targets, locations)
    pos_clipped = np.minimum(pos, len(targets) - 1)
    hit = sorted_targets[pos_clipped] == locations
    counts = np.bincount(order[pos_clipped[hit]], minlength=len(targets)).astype(np.int64)
    return counts, int(completed.sum()), int((~hit).sum())


async def answer_round(
    channel: grpc.aio.Channel,
    fleet: FleetState,
    query: pb.Query,
    config: FleetConfig,
    rng: np.random.Generator,
    progress: Callable[[int, int], ProgressHook] | None = None,
) -> tuple[FleetQuery, RoundResult]:
    """Every answering device sends its report for the query's current round (once acked,
    never again). `progress(round, total)` returns a hook advanced as reports complete."""
    info = QueryInfo.from_proto(query)
    if not info.is_open:
        raise FleetError(f"query {info.query_id} is not open")
    record = decide(fleet, info, rng)
    round_ = info.current_round
    previous_done = record.acked[: round_ - 1].all(axis=0)
    # A device that missed an earlier round stays out: answering later rounds alone would
    # leak without being counted.
    eligible = record.answering & previous_done
    todo = np.flatnonzero(eligible & ~record.acked[round_ - 1])
    result = RoundResult(info.query_id, round_, config.mode)
    result.already_acknowledged = int((eligible & record.acked[round_ - 1]).sum())
    hook = progress(round_, int(todo.size)) if progress is not None else None
    stub = pb_grpc.CollectorStub(channel)
    sender = _Sender(stub, record, info.query_id, round_, config, result, hook)
    start = time.perf_counter()
    if query.require_tokens:
        todo = await _with_tokens(sender, query, todo)
    await sender.run(todo)
    result.seconds = time.perf_counter() - start
    return record, result


async def _with_tokens(
    sender: _Sender, query: pb.Query, todo: npt.NDArray[np.intp]
) -> npt.NDArray[np.intp]:
    """Fetch each device's token for this round; the devices that got one."""
    tokens = sender.config.tokens
    if tokens is None:
        raise FleetError(
            f"query {query.query_id} requires admission tokens from {query.token_issuer}: "
            "give the fleet the issuer and its enrollment key (fleet run --issuer "
            "--enrollment-key)"
        )
    sender.tokens, failures = await tokens.fetch(query, sender.round, todo)
    for (code, message), count in failures.items():
        sender.result.sent += count  # counted as sent and failed, like a refused report
        sender.fail(count, code, message)
    return np.asarray([d for d in todo.tolist() if d in sender.tokens], dtype=np.intp)


def sort_rejections(
    rejected: Iterable[pb.ReportRejection],
    pending: Sequence[int],
    fail: Callable[[int, str, str], None],
) -> tuple[list[int], set[int]]:
    """A bulk answer's refusals: (devices to send again, for a transient reason; positions
    refused), each permanent one counted through `fail`."""
    again: list[int] = []
    refused: set[int] = set()
    for rejection in rejected:
        position = int(rejection.index)
        refused.add(position)
        code = _CODES.get(rejection.code, grpc.StatusCode.UNKNOWN)
        if is_transient(code):
            again.append(pending[position])
        else:
            fail(1, code.name, rejection.message)
    return again, refused


async def back_off(
    delays: Iterator[float],
    result: RoundResult,
    fail: Callable[[int, str, str], None],
    count: int,
) -> bool:
    """Before sending again the `count` reports a bulk answer refused for now: wait the next
    backoff delay and count the retry; False, with the reports counted through `fail`, once
    the retries are spent."""
    delay = next(delays, None)
    if delay is None:
        fail(count, "RESOURCE_EXHAUSTED", "retries exhausted")
        return False
    result.retries += 1
    await asyncio.sleep(delay)
    return True


async def _stream_call(
    stub: pb_grpc.CollectorAsyncStub, requests: list[pb.SubmitReportRequest], timeout: float
) -> pb.SubmitReportsResponse:
    """One client stream carrying `requests` (a fresh iterator per attempt)."""
    return await stub.StreamReports(iter(requests), timeout=timeout)


class _Sender:
    """Sends reports of one round with bounded concurrency, retrying transient failures."""

    def __init__(
        self,
        stub: pb_grpc.CollectorAsyncStub,
        record: FleetQuery,
        query_id: str,
        round_: int,
        config: FleetConfig,
        result: RoundResult,
        hook: ProgressHook | None,
    ) -> None:
        self.stub = stub
        self.record = record
        self.query_id = query_id
        self.round = round_
        self.config = config
        self.result = result
        self.hook = hook
        self.rng = random.Random()
        self.tokens: dict[int, bytes] = {}  # admission tokens by device, when required

    def report(self, i: int) -> pb.Report:
        r = self.round - 1
        return pb.Report(
            query_id=self.query_id,
            round=self.round,
            device_pseudonym=self.record.pseudonyms[i].tobytes(),
            report_id=self.record.report_ids[r, i].tobytes(),
            answers=self.record.answers[r, i].tobytes(),
            token=self.tokens.get(i, b""),
        )

    async def run(self, todo: npt.NDArray[np.intp]) -> None:
        self.result.sent += int(todo.size)
        size = 1 if self.config.mode == "unary" else self.config.batch_size
        units: Iterator[list[int]] = (
            todo[k : k + size].tolist() for k in range(0, int(todo.size), size)
        )
        send = self._unary if self.config.mode == "unary" else self._bulk

        async def worker() -> None:
            for unit in units:  # one shared iterator: each unit goes to exactly one worker
                await send(unit)

        workers = min(self.config.concurrency, max(1, -(-int(todo.size) // size)))
        await asyncio.gather(*(worker() for _ in range(workers)))

    def _acked(self, devices: list[int]) -> None:
        self.record.acked[self.round - 1, devices] = True

    def fail(self, count: int, code: str, message: str) -> None:
        self.result.failed += count
        self.result.failures[(code, message)] += count
        if self.hook is not None:
            self.hook(count)

    async def _retrying(self, call: Callable[[], Awaitable[_R]], count: int) -> _R | None:
        """Run `call` until it succeeds, fails permanently, or retries run out (None)."""
        delays = self.config.retry.delays(self.rng)
        while True:
            try:
                return await call()
            except grpc.aio.AioRpcError as err:
                backoff = next(delays, None) if is_retryable(err) else None
                delay = next_delay(backoff, err, self.rng)
                if delay is None:
                    self.fail(count, err.code().name, err.details() or "")
                    return None
                self.result.retries += 1
                if self.config.on_retry is not None:
                    self.config.on_retry(err.code())
                await asyncio.sleep(delay)

    async def _unary(self, unit: list[int]) -> None:
        request = pb.SubmitReportRequest(report=self.report(unit[0]))
        timeout = self.config.retry.rpc_timeout
        response = await self._retrying(
            partial(self.stub.SubmitReport, request, timeout=timeout), 1
        )
        if response is None:
            return
        if response.ack.duplicate:
            self.result.duplicates += 1
        else:
            self.result.accepted += 1
        self._acked(unit)
        if self.hook is not None:
            self.hook(1)

    async def _bulk(self, unit: list[int]) -> None:
        pending = unit
        delays = self.config.retry.delays(self.rng)
        timeout = self.config.retry.rpc_timeout
        while pending:
            reports = [self.report(i) for i in pending]
            call: Callable[[], Awaitable[pb.SubmitReportsResponse]]
            if self.config.mode == "batch":
                call = partial(
                    self.stub.SubmitBatch, pb.SubmitBatchRequest(reports=reports), timeout=timeout
                )
            else:
                requests = [pb.SubmitReportRequest(report=r) for r in reports]
                call = partial(_stream_call, self.stub, requests, timeout)
            response = await self._retrying(call, len(pending))
            if response is None:
                return
            self.result.accepted += int(response.accepted)
            self.result.duplicates += int(response.duplicates)
            retry_again, rejected_positions = sort_rejections(response.rejected, pending, self.fail)
            done = [d for k, d in enumerate(pending) if k not in rejected_positions]
            self._acked(done)
            if self.hook is not None and done:
                self.hook(len(done))
            pending = retry_again
            if pending and not await back_off(delays, self.result, self.fail, len(pending)):
                return


async def run_query(
    channel: grpc.aio.Channel,
    fleet: FleetState,
    query_id: str,
    config: FleetConfig,
    rng: np.random.Generator,
    *,
    advance: Callable[[str], Awaitable[pb.Query]] | None = None,
    progress: Callable[[int, int], ProgressHook] | None = None,
) -> FleetResult:
    """Answer the query's current round; with `advance` (an operator's AdvanceRound), keep
    advancing and answering until the last round has been answered."""
    stub = pb_grpc.CollectorStub(channel)
    query: pb.Query = await stub.GetQuery(
        pb.GetQueryRequest(query_id=query_id), timeout=config.retry.rpc_timeout
    )
    info = QueryInfo.from_proto(query)
    rounds: list[RoundResult] = []
    while True:
        record, round_result = await answer_round(channel, fleet, query, config, rng, progress)
        rounds.append(round_result)
        if advance is None or query.current_round >= info.rounds:
            break
        query = await advance(query_id)
    truth, completed, outside = ground_truth(record, info.targets, rounds[-1].round)
    return FleetResult(
        query_id=query_id,
        mechanism=info.mechanism.name,
        params=info.mechanism.params(),
        devices=fleet.size,
        answering=int(record.answering.sum()),
        declined=int((~record.answering).sum()),
        charge_epsilon=record.charge_epsilon,
        charge_delta=record.charge_delta,
        scheme=info.scheme,
        targets=info.targets,
        ground_truth=truth,
        completed=completed,
        outside_targets=outside,
        rounds_total=info.rounds,
        rounds=rounds,
    )
