"""The load test against a leader of two aggregators: uploads of sealed reports.

As for the trusted path, everything that costs CPU happens before the clock starts: each
request is a whole `UploadSecureReportsRequest` (one report, or `batch_size` of them) built
from honest draws of the query's mechanism (devices at random targets, or outside them),
sharded and sealed to both aggregators (`client.secure_fleet.seal_chunk`, in worker processes
for many), and serialized. The run then only sends bytes. What the leader acknowledges is
durable there; the count check compares it with what the leader holds for the query
(aggregated, pending and refused after upload).
"""

from __future__ import annotations

import secrets

import grpc.aio
import numpy as np

from ldpcollect.secure.sealing import HpkeConfig
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc

UPLOAD_METHOD = "/ldpcollect.v1.SecureCollector/UploadSecureReports"
SECURE_MODES = ("unary", "batch")
PROBE_SECONDS = 10.0


async def fetch_secure_query(channel: grpc.aio.Channel, query_id: str) -> spb.SecureQuery:
    return await spb_grpc.SecureCollectorStub(channel).GetSecureQuery(
        spb.GetSecureQueryRequest(query_id=query_id), timeout=PROBE_SECONDS
    )


def build_secure_units(
    query: spb.SecureQuery,
    helper_config: HpkeConfig,
    requests: int,
    per_request: int,
    rng: np.random.Generator,
) -> list[bytes]:
    """`requests` serialized uploads of `per_request` sealed honest reports each."""
    from client.secure_device import SecureDevice
    from client.secure_fleet import SEAL_CHUNK, _pool, seal_chunk
    from ldpcollect.secure.upload import REPORT_ID_SIZE
    from ldpcollect.wire import mechanism_from_proto

    device = SecureDevice(query, helper_config)
    mechanism = mechanism_from_proto(query.mechanism)
    targets = np.asarray(list(query.targets), dtype=np.uint64)
    total = requests * per_request
    # A device at a random target, or (one in len + 1) at none: the answers are honest.
    outside = np.uint64(int(targets.max()) + 1)
    locations = rng.choice(np.append(targets, outside), size=total)
    answers = mechanism.fleet_answers(locations, targets, rng)
    ids = [secrets.token_bytes(REPORT_ID_SIZE) for _ in range(total)]
    query_bytes, helper = query.SerializeToString(), device.helper.encode()
    chunks = [range(k, min(k + SEAL_CHUNK, total)) for k in range(0, total, SEAL_CHUNK)]
    pool = _pool(total, 2)
    try:
        jobs = [
            (query_bytes, helper, [ids[i] for i in c], answers[:, c.start : c.stop]) for c in chunks
        ]
        if pool is None:
            parts = [seal_chunk(*job) for job in jobs]
        else:
            parts = list(pool.map(seal_chunk, *zip(*jobs, strict=True)))
    finally:
        if pool is not None:
            pool.shutdown()
    sealed = [body for part in parts for body in part]
    return [
        spb.UploadSecureReportsRequest(reports=sealed[k : k + per_request]).SerializeToString()
        for k in range(0, total, per_request)
    ]


def leader_count(query: spb.SecureQuery) -> int:
    """Every upload the leader acknowledged for the query: aggregated, still held, or refused
    after the acknowledgement (a bad proof)."""
    return int(query.aggregated_reports + query.pending_reports + query.refused_reports)
