"""A secure query's progress is one snapshot: aggregation jobs that commit while a client
polls never make aggregated + refused + pending drop below what the leader acknowledged
(issue 30: the read used to take the query row and the pending count under two locks)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import grpc

from aggregator.secure.store import SecureStore
from client.secure_collector import create_secure_query
from client.secure_device import upload
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from tests.secure.roles import ADMIN, aggregated, secure_pair

RR = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})
TARGETS = [1, 2, 3, 4]


def test_progress_read_while_jobs_commit_always_adds_up_to_every_held_report(
    tmp_path: Path,
) -> None:
    """Store level, one report a job so jobs commit as often as possible: every progress read
    sees each held report exactly once, pending or finished."""
    store = SecureStore(tmp_path / "leader.secure")
    store.open()
    try:
        store.create_query("q", {"min_reports": 1}, b"k" * 16, b"")
        held = 400
        outcomes = store.hold_reports(
            "q", [(i.to_bytes(16, "big"), b"body%d" % i, b"share", b"") for i in range(held)]
        )
        assert outcomes.count("new") == held

        read = threading.Event()

        def jobs() -> None:
            for n in range(held):
                job = store.claim_job("q", 1, n.to_bytes(16, "big"))
                assert job is not None
                job_id, [report] = job
                outcome = "" if n % 5 else "bad proof"
                store.finish_job("q", job_id, [(report.report_id, outcome)], lambda old: old)
                # Let the reader in between jobs (on a loaded machine this thread could
                # otherwise run every job before the reader's first turn); the next job
                # then commits while that reader reads again.
                read.wait(timeout=0.5)
                read.clear()

        worker = threading.Thread(target=jobs)
        worker.start()
        reads = []
        while worker.is_alive():
            query, pending = store.progress("q")
            reads.append((query.aggregated, query.refused, pending))
            read.set()
        worker.join()
        during = [r for r in reads if 0 < r[2] < held]
        assert len(during) > 100, len(during)  # the reads really raced the jobs
        assert {a + r + p for a, r, p in reads} == {held}
        assert store.progress("q")[0].aggregated == held - held // 5
    finally:
        store.close()


def test_progress_polled_through_a_real_leader_never_shows_fewer_than_acknowledged(
    tmp_path: Path,
) -> None:
    collector = load_or_create_key_pair(tmp_path / "collector.key")
    with secure_pair(tmp_path) as pair, pair.channel() as channel:
        query = create_secure_query(channel, ADMIN, collector, RR, TARGETS, 1)
        device = pair.device(channel, query.query_id)
        rng = random.Random(30)
        batches = [
            [device.seal_measurement([rng.randrange(2) for _ in TARGETS]) for _ in range(40)]
            for _ in range(15)
        ]
        acknowledged = 0
        lock = threading.Lock()
        done = threading.Event()
        seen: list[tuple[int, int]] = []  # (acknowledged before the read, total it showed)

        def poll() -> None:
            with grpc.insecure_channel(pair.leader.address) as own:
                stub = spb_grpc.SecureAdminStub(own)
                while not done.is_set():
                    with lock:
                        before = acknowledged
                    shown = stub.GetSecureQuery(
                        spb.GetSecureQueryRequest(query_id=query.query_id),
                        metadata=(("authorization", f"Bearer {ADMIN}"),),
                        timeout=30,
                    )
                    total = shown.aggregated_reports + shown.refused_reports
                    seen.append((before, total + shown.pending_reports))

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            for batch in batches:
                result = upload(channel, batch)
                assert result.accepted == len(batch)
                with lock:
                    acknowledged += result.accepted
            final = aggregated(channel, query.query_id)
        finally:
            done.set()
            poller.join()
    assert final.aggregated_reports + final.refused_reports == 600
    assert len(seen) > 20
    below = [(before, total) for before, total in seen if total < before]
    assert below == [], f"{len(below)} of {len(seen)} reads showed fewer than acknowledged"
