"""A simulated fleet answering a secure query at a leader: the same fleet, state file, draws
and ground truth as the trusted runner (`client.fleet`), with the secure device's upload.

Each answering device draws once (`client.fleet.decide`, every round's answers), then seals
its whole measurement (RR: its answers; SP: both rounds, the pair) with the query's VDAF into
shares for the leader and the helper, and uploads once; an acknowledged upload marks every
round answered. Sealing is the costly part (the proof and two HPKE seals a device; a chunk's
seals go in two compiled calls, `SecureDevice.seal_measurements`), so it runs in worker
processes, chunk by chunk, while earlier chunks upload.

Retries: a chunk refused as a whole for a transient reason (overload, unavailable) is sent
again with the same bytes, so the leader acknowledges a report it already holds as a
duplicate. A device whose upload was never acknowledged (the run stopped) seals again on the
next run with the SAME report id and the same draw; if the leader did hold the earlier upload
it answers REPLAY (same id, other bytes), which for a device's own 16 random id bytes can only
mean its earlier upload arrived: it counts as a duplicate, never twice.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import replace
from functools import partial

import grpc
import grpc.aio
import numpy as np
import numpy.typing as npt

from client.fleet import (
    FleetConfig,
    FleetError,
    FleetResult,
    ProgressHook,
    RoundResult,
    back_off,
    decide,
    ground_truth,
    sort_rejections,
)
from client.fleet_state import FleetQuery, FleetState
from client.query_info import QueryInfo
from client.retry import is_retryable, next_delay
from client.secure_admin import as_query
from client.secure_device import SecureDevice, report_challenge
from ldpcollect.secure.query_vdaf import measurement
from ldpcollect.secure.sealing import HpkeConfig
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc

_CODES = {code.value[0]: code for code in grpc.StatusCode}
SEAL_CHUNK = 250
# Below this many devices sealing stays in this process (starting workers costs more).
POOL_THRESHOLD = 600


def seal_chunk(
    query_bytes: bytes, helper: bytes, report_ids: list[bytes], answers: npt.NDArray[np.uint8]
) -> list[bytes]:
    """Worker: each device's measurement from its packed answers (rounds, k, bytes), sharded
    and sealed under its report id."""
    device = SecureDevice(spb.SecureQuery.FromString(query_bytes), HpkeConfig.decode(helper))
    targets = len(device.query.targets)
    measurements = []
    for k, report_id in enumerate(report_ids):
        rounds = [np.unpackbits(answers[r, k])[:targets].tolist() for r in range(answers.shape[0])]
        measurements.append((measurement(device.kind, rounds), report_id))
    return device.seal_measurements(measurements)


def _pool(devices: int, workers: int) -> Executor | None:
    if devices < POOL_THRESHOLD or workers < 1:
        return None
    # spawn: a forked child would inherit the parent's gRPC threads and channels.
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def _own_replay(rejection: pb.ReportRejection) -> bool:
    """REPLAY: the leader holds this report id with other bytes (see the module doc)."""
    code = _CODES.get(rejection.code, grpc.StatusCode.UNKNOWN)
    return code == grpc.StatusCode.ALREADY_EXISTS and rejection.message.startswith("REPLAY")


class _Uploader:
    """Uploads sealed chunks with the retries the trusted fleet uses."""

    def __init__(
        self,
        stub: spb_grpc.SecureCollectorAsyncStub,
        record: FleetQuery,
        config: FleetConfig,
        result: RoundResult,
        hook: ProgressHook | None,
        tokens: dict[int, bytes],
    ) -> None:
        self.stub, self.record, self.config = stub, record, config
        self.result, self.hook, self.tokens = result, hook, tokens
        self.rng = random.Random()

    def fail(self, count: int, code: str, message: str) -> None:
        self.result.failed += count
        self.result.failures[(code, message)] += count
        if self.hook is not None:
            self.hook(count)

    def _acked(self, devices: list[int]) -> None:
        self.record.acked[:, devices] = True
        if self.hook is not None and devices:
            self.hook(len(devices))

    async def send(self, devices: list[int], bodies: list[bytes]) -> None:
        pending = list(range(len(devices)))
        delays = self.config.retry.delays(self.rng)
        while pending:
            request = spb.UploadSecureReportsRequest(
                reports=[bodies[k] for k in pending],
                tokens=[self.tokens[devices[k]] for k in pending] if self.tokens else [],
            )
            try:
                response = await self.stub.UploadSecureReports(
                    request, timeout=self.config.retry.rpc_timeout
                )
            except grpc.aio.AioRpcError as err:
                backoff = next(delays, None) if is_retryable(err) else None
                delay = next_delay(backoff, err, self.rng)
                if delay is None:
                    self.fail(len(pending), err.code().name, err.details() or "")
                    return
                self.result.retries += 1
                await asyncio.sleep(delay)
                continue
            self.result.accepted += int(response.accepted)
            self.result.duplicates += int(response.duplicates)
            replays = [r for r in response.rejected if _own_replay(r)]
            self.result.duplicates += len(replays)  # an earlier run's upload of the device
            others = [r for r in response.rejected if not _own_replay(r)]
            again, refused = sort_rejections(others, pending, self.fail)
            self._acked([devices[k] for i, k in enumerate(pending) if i not in refused])
            pending = again
            if pending and not await back_off(delays, self.result, self.fail, len(pending)):
                return


async def run_secure_query(
    channel: grpc.aio.Channel,
    fleet: FleetState,
    query: spb.SecureQuery,
    helper: HpkeConfig,
    config: FleetConfig,
    rng: np.random.Generator,
    *,
    progress: Callable[[int, int], ProgressHook] | None = None,
    workers: int = 2,
) -> FleetResult:
    """Every answering device that has not been acknowledged seals and uploads its one report
    (`helper`: the helper's HPKE config, an input of its own). The result has one row, at the
    query's upload round, and the ground truth of the devices the release will count."""
    if query.state != spb.SECURE_QUERY_STATE_OPEN:
        raise FleetError(f"secure query {query.query_id} is not open")
    SecureDevice(query, helper)  # refuses missing or equal aggregator keys before any draw
    # One upload answers every round: the fleet decides as a device joining at round 1.
    info = replace(QueryInfo.from_proto(as_query(query)), current_round=1)
    record = decide(fleet, info, rng)
    done = record.acked.all(axis=0)
    todo = np.flatnonzero(record.answering & ~done)
    result = RoundResult(query.query_id, int(query.upload_round), f"sealed {config.mode}")
    result.already_acknowledged = int((record.answering & done).sum())
    hook = progress(int(query.upload_round), int(todo.size)) if progress is not None else None
    tokens: dict[int, bytes] = {}
    start = time.perf_counter()
    if query.require_tokens:
        todo = await _with_tokens(query, config, todo, result, hook, tokens)
    result.sent = int(todo.size)
    uploader = _Uploader(
        spb_grpc.SecureCollectorStub(channel), record, config, result, hook, tokens
    )
    await _seal_and_send(query, helper, record, todo, config, uploader, workers)
    result.seconds = time.perf_counter() - start
    truth, completed, outside = ground_truth(record, info.targets, info.rounds)
    return FleetResult(
        query_id=query.query_id,
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
        rounds=[result],
    )


async def _with_tokens(
    query: spb.SecureQuery,
    config: FleetConfig,
    todo: npt.NDArray[np.intp],
    result: RoundResult,
    hook: ProgressHook | None,
    tokens: dict[int, bytes],
) -> npt.NDArray[np.intp]:
    """Each device's token for its upload; the devices that got one."""
    if config.tokens is None:
        raise FleetError(
            f"secure query {query.query_id} requires admission tokens from "
            f"{query.token_issuer}: give the fleet the issuer and its enrollment key "
            "(fleet run --issuer --enrollment-key)"
        )
    got, failures = await config.tokens.fetch_for(
        lambda key: report_challenge(key, query), todo.tolist()
    )
    tokens.update(got)
    for (code, message), count in failures.items():
        result.sent += count  # counted as sent and failed, like a refused report
        result.failed += count
        result.failures[(code, message)] += count
        if hook is not None:
            hook(count)
    return np.asarray([d for d in todo.tolist() if d in got], dtype=np.intp)


async def _seal_and_send(
    query: spb.SecureQuery,
    helper: HpkeConfig,
    record: FleetQuery,
    todo: npt.NDArray[np.intp],
    config: FleetConfig,
    uploader: _Uploader,
    workers: int,
) -> None:
    """Seal chunk by chunk (in worker processes for a large fleet) and upload each chunk as it
    is sealed, with at most `config.concurrency` uploads in flight."""
    query_bytes, helper_bytes = query.SerializeToString(), helper.encode()
    chunks = [todo[k : k + SEAL_CHUNK].tolist() for k in range(0, int(todo.size), SEAL_CHUNK)]
    loop = asyncio.get_running_loop()
    limit = asyncio.Semaphore(config.concurrency)
    pool = _pool(int(todo.size), workers)
    try:

        def job(devices: list[int]) -> Callable[[], list[bytes]]:
            ids = [record.report_ids[0, d].tobytes() for d in devices]
            return partial(seal_chunk, query_bytes, helper_bytes, ids, record.answers[:, devices])

        async def one(devices: list[int]) -> None:
            if pool is None:
                bodies = job(devices)()
            else:
                bodies = await loop.run_in_executor(pool, job(devices))
            async with limit:
                await uploader.send(devices, bodies)

        await asyncio.gather(*(one(devices) for devices in chunks))
    finally:
        if pool is not None:
            pool.shutdown()
