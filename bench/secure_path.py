"""The whole secure path with real processes (bench/secure.py's second part): seal reports
beforehand, then time upload to the leader until both aggregators have durably aggregated
them; and the trusted path's clear-text batches until acknowledged, in the same run."""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
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
from ldpcollect_cli.demo import aggregator_subprocess, block_targets
from ldpcollect_cli.secure_demo import seal_chunk, secure_deployment

BATCH = 500


def _sealed(query: spb.SecureQuery, helper: str, targets: list[int], n: int) -> list[bytes]:
    """`n` devices' reports, the helper's key fetched from the helper at `helper`."""
    rng = np.random.default_rng(7)
    locations = [int(x) for x in rng.choice([*targets, 0], size=n)]
    chunks = [locations[i : i + 100] for i in range(0, n, 100)]
    data = query.SerializeToString()
    with grpc.insecure_channel(helper) as channel:
        key = fetch_helper_config(channel).encode()
    with ProcessPoolExecutor(min(2, os.cpu_count() or 1)) as pool:
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


def secure_path_rate(mechanism: str, n: int) -> float:
    """Reports per second from the first upload until all are aggregated at both."""
    targets = block_targets(geo.DEFAULT_CENTER)
    mech = RandomizedResponse("0.85", "0.3") if mechanism == "rr" else SamplingPrivacy("0.5")
    with secure_deployment("bench-secure-") as run:
        channel = run.channel
        created = create_secure_query(channel, run.admin_token, run.collector, mech, targets, 100)
        query = fetch_query(channel, created.query_id)
        bodies = _sealed(query, run.helper, targets, n)
        start = time.perf_counter()
        for i in range(0, n, BATCH):
            done = upload(channel, bodies[i : i + BATCH])
            assert not done.rejected, done.rejected[0].message
        wait_aggregated(channel, run.admin_token, query.query_id, n)
        seconds = time.perf_counter() - start
    return n / seconds


def trusted_path_rate(answers: list[list[int]]) -> float:
    """The same answers in clear text through SubmitBatch until acknowledged (durable)."""
    targets = block_targets(geo.DEFAULT_CENTER)
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
