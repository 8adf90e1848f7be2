"""The whole secure path with real processes (bench/secure.py's second part): seal reports
beforehand, then time upload to the leader until both aggregators have durably aggregated
them; and the trusted path's clear-text batches until acknowledged, in the same run. Each
role's CPU time over the timed window is read from /proc, so the figures say where the time
went."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from math import isqrt
from pathlib import Path

import grpc
import numpy as np

from client.admin import AdminClient
from client.secure_collector import create_secure_query
from client.secure_device import fetch_query, upload
from client.secure_keys import fetch_helper_config
from ldpcollect import bits, geo
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from ldpcollect.vdaf.native import REFERENCE_SWITCH
from ldpcollect_cli.demo import aggregator_subprocess, block_targets
from ldpcollect_cli.secure_demo import seal_chunk
from ldpcollect_cli.secure_subprocess import secure_deployment

BATCH = 500
UPLOAD_BYTES = 6 << 20
"""An upload's reports in at most this many bytes (the leader takes 8 MiB per upload)."""


@dataclass(frozen=True)
class PathRun:
    """Reports per second from the first upload until all are aggregated at both, and each
    role's CPU seconds in that window."""

    per_second: float
    leader_cpu: float
    helper_cpu: float
    load_cpu: float = 0.0
    """This process (the devices' uploads, already sealed, and the progress polls)."""


def path_targets(count: int) -> list[int]:
    """`count` grid cells around the default centre (a square block, cut to `count`)."""
    side = isqrt(count - 1) + 1
    return block_targets(geo.DEFAULT_CENTER, side)[:count]


def _sealed(query: spb.SecureQuery, helper: str, targets: list[int], n: int) -> list[bytes]:
    """`n` devices' reports, the helper's key fetched from the helper at `helper`."""
    rng = np.random.default_rng(7)
    locations = [int(x) for x in rng.choice([*targets, 0], size=n)]
    chunks = [locations[i : i + 100] for i in range(0, n, 100)]
    data = query.SerializeToString()
    with grpc.insecure_channel(helper) as channel:
        key = fetch_helper_config(channel).encode()
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        parts = pool.map(seal_chunk, [data] * len(chunks), [key] * len(chunks), chunks)
        return [body for part in parts for body in part]


def wait_aggregated(
    channel: grpc.Channel, admin_token: str, query_id: str, n: int
) -> spb.SecureQuery:
    """Poll the leader (as its admin: progress is the operator's) until `n` reports are
    aggregated or refused; the query's last state."""
    admin = spb_grpc.SecureAdminStub(channel)
    auth = (("authorization", f"Bearer {admin_token}"),)
    while True:
        state = admin.GetSecureQuery(spb.GetSecureQueryRequest(query_id=query_id), metadata=auth)
        if state.aggregated_reports + state.refused_reports >= n:
            return state
        time.sleep(0.02)


def role_cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) of this process's children, by their `--role`."""
    tick = os.sysconf("SC_CLK_TCK")
    seconds: dict[str, float] = {}
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                stat = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if b"--role" not in command:
                continue
            role = command[command.index(b"--role") + 1].decode()
            seconds[role] = seconds.get(role, 0.0) + (int(stat[11]) + int(stat[12])) / tick
    return seconds


@contextlib.contextmanager
def reference_code(enabled: bool) -> Iterator[None]:
    """With `enabled`, this process and the roles it starts run the reference VDAF only."""
    before = os.environ.get(REFERENCE_SWITCH)
    if enabled:
        os.environ[REFERENCE_SWITCH] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(REFERENCE_SWITCH, None)
        else:
            os.environ[REFERENCE_SWITCH] = before


def secure_path_rate(
    mechanism: str, n: int, targets: int = 100, reference: bool = False, warmup: int = 0
) -> PathRun:
    """The whole secure path for `n` reports over `targets` cells (`reference`: the Python
    VDAF in every process, as on main before the compiled kernels), after `warmup` reports
    of another query through the same servers, untimed."""
    cells = path_targets(targets)
    mech = RandomizedResponse("0.85", "0.3") if mechanism == "rr" else SamplingPrivacy("0.5")
    with reference_code(reference), secure_deployment("bench-secure-", None) as run:
        channel = run.channel

        def sealed_query(count: int) -> tuple[str, list[bytes]]:
            created = create_secure_query(channel, run.admin_token, run.collector, mech, cells, 100)
            query = fetch_query(channel, created.query_id)
            return query.query_id, _sealed(query, run.helper, cells, count)

        def upload_all(query_id: str, bodies: list[bytes]) -> None:
            batch = max(1, min(BATCH, UPLOAD_BYTES // max(len(b) for b in bodies)))
            for i in range(0, len(bodies), batch):
                done = upload(channel, bodies[i : i + batch])
                assert not done.rejected, done.rejected[0].message
            wait_aggregated(channel, run.admin_token, query_id, len(bodies))

        if warmup:  # a query of its own, untimed: the servers' buffers and caches as they run
            upload_all(*sealed_query(warmup))
        query_id, bodies = sealed_query(n)
        cpu_before, own_before = role_cpu_seconds(), time.process_time()
        start = time.perf_counter()
        upload_all(query_id, bodies)
        seconds = time.perf_counter() - start
        cpu_after, own = role_cpu_seconds(), time.process_time() - own_before
    used = {role: cpu_after.get(role, 0.0) - cpu_before.get(role, 0.0) for role in cpu_after}
    return PathRun(n / seconds, used.get("leader", 0.0), used.get("helper", 0.0), own)


def trusted_path_rate(answers: list[list[int]]) -> float:
    """The same answers in clear text through SubmitBatch until acknowledged (durable)."""
    targets = path_targets(len(answers[0]))
    token = secrets.token_urlsafe(16)
    with (
        tempfile.TemporaryDirectory(prefix="bench-trusted-") as tmp,
        aggregator_subprocess(Path(tmp) / "trusted.db", token) as address,
        grpc.insecure_channel(address) as channel,
    ):
        query = AdminClient(channel, token).create_query(
            RandomizedResponse("0.85", "0.3"), "grid", targets
        )
        reports = [
            pb.Report(
                query_id=query.query_id,
                round=1,
                device_pseudonym=secrets.token_bytes(16),
                report_id=secrets.token_bytes(16),
                answers=bits.pack(np.asarray(a, dtype=np.uint8)),
            )
            for a in answers
        ]
        stub = pb_grpc.CollectorStub(channel)
        start = time.perf_counter()
        for i in range(0, len(reports), BATCH):
            stub.SubmitBatch(pb.SubmitBatchRequest(reports=reports[i : i + BATCH]))
        seconds = time.perf_counter() - start
    return len(answers) / seconds
