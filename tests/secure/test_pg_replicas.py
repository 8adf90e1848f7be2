"""Leaders and helpers as several `ldpcollect serve --role ... --store postgresql://...`
replicas on one database (a database the test creates and drops): the same uploads sent to
two leaders at once are held once, both leaders' drivers aggregate with both helpers and
count each report once, a release through either leader is the same and charged once; a
leader SIGKILLed under upload load loses nothing it acknowledged (its unfinished job is
resumed by the other)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc

from client.secure_collector import create_secure_query, release_secure_query
from client.secure_device import SecureDevice, fetch_query
from client.secure_keys import fetch_helper_config
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from tests.secure.roles import ADMIN, ADMIN_AUTH, SMALL_BATCHES, Role, aggregated

TARGETS = [1, 2, 3, 4, 5]
BATCH = 25
RR = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})


@contextmanager
def replicas(
    tmp_path: Path, url: str, helpers: int, leaders: int
) -> Iterator[tuple[list[Role], list[Role]]]:
    """`helpers` helper replicas, then `leaders` leader replicas (leader i uses helper
    i mod helpers), all on `url`; those still running are stopped (SIGTERM, exit 0) after."""
    store = ("--store", url)
    started: list[Role] = []
    try:
        for i in range(helpers):
            role = Role("helper", tmp_path / f"h{i}.db", "127.0.0.1:0", extra=SMALL_BATCHES + store)
            role.start()
            started.append(role)
        for i in range(leaders):
            helper = started[i % helpers].address
            role = Role("leader", tmp_path / f"l{i}.db", "127.0.0.1:0", helper, extra=store)
            role.start()
            started.append(role)
        yield started[helpers:], started[:helpers]
    finally:
        for role in reversed(started):
            role.stop()


def device_for(leader: Role, helpers: list[Role], query_id: str) -> SecureDevice:
    """A device: the query from a leader, the helper's key from every helper replica (they
    hold one key pair, shared through the database)."""
    configs = []
    for helper in helpers:
        with grpc.insecure_channel(helper.address) as channel:
            configs.append(fetch_helper_config(channel))
    assert len({c.encode() for c in configs}) == 1
    with grpc.insecure_channel(leader.address) as channel:
        return SecureDevice(fetch_query(channel, query_id), configs[0])


def expected(answers: list[list[int]]) -> list[list[int]]:
    return [[sum(col) for col in zip(*answers, strict=True)]]


def test_two_leaders_and_two_helpers_count_every_report_once(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    collector = load_or_create_key_pair(tmp_path / "collector.key")
    rng = random.Random(25)
    answers = [[rng.randrange(2) for _ in TARGETS] for _ in range(BATCH * 16)]
    with replicas(tmp_path, fresh_postgres_url, helpers=2, leaders=2) as (leaders, helpers):
        first, second = (grpc.insecure_channel(r.address) for r in leaders)
        with first, second:
            query = create_secure_query(first, ADMIN, collector, RR, TARGETS, 1)
            device = device_for(leaders[1], helpers, query.query_id)
            bodies = [device.seal_measurement(a) for a in answers]
            batches = [bodies[i : i + BATCH] for i in range(0, len(bodies), BATCH)]
            stubs = [spb_grpc.SecureCollectorStub(c) for c in (first, second)]
            for batch in batches:  # every batch to both leaders at once
                calls = [
                    stub.UploadSecureReports.future(
                        spb.UploadSecureReportsRequest(reports=batch), timeout=30
                    )
                    for stub in stubs
                ]
                done = [call.result() for call in calls]
                assert [list(d.rejected) for d in done] == [[], []]
                assert sum(d.accepted for d in done) == BATCH  # held once, a duplicate once
                assert sum(d.duplicates for d in done) == BATCH
            final = aggregated(second, query.query_id)
            assert (final.aggregated_reports, final.refused_reports) == (len(answers), 0)
            released = release_secure_query(second, ADMIN, collector, query.query_id)
            again = release_secure_query(first, ADMIN, collector, query.query_id)
            ledger = spb_grpc.SecureAdminStub(first).GetSecureLedger(
                pb.GetLedgerRequest(), metadata=ADMIN_AUTH
            )
    assert released.round_counts == expected(answers)
    assert again.round_counts == released.round_counts  # the same sealed shares
    assert len(ledger.entries) == 1  # charged once, whichever leader released


def test_sigkill_of_a_leader_replica_under_load_loses_nothing_acknowledged(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    """Two device threads upload to both leaders; one leader is SIGKILLed part way; a batch
    it did not acknowledge is sent again to the other (same bytes). Every report is counted
    exactly once, in the release through the survivor."""
    collector = load_or_create_key_pair(tmp_path / "collector.key")
    rng = random.Random(26)
    answers = [[rng.randrange(2) for _ in TARGETS] for _ in range(BATCH * 24)]
    with replicas(tmp_path, fresh_postgres_url, helpers=1, leaders=2) as (leaders, helpers):
        victim, survivor = leaders
        with grpc.insecure_channel(survivor.address) as channel:
            query = create_secure_query(channel, ADMIN, collector, RR, TARGETS, 1)
        device = device_for(survivor, helpers, query.query_id)
        bodies = [device.seal_measurement(a) for a in answers]
        batches = [bodies[i : i + BATCH] for i in range(0, len(bodies), BATCH)]
        kill_after = len(batches) // 3
        sent = threading.Semaphore(0)
        acknowledged_by_victim: list[int] = []
        retried: list[int] = []
        lock = threading.Lock()

        def upload(indices: list[int]) -> None:
            with (
                grpc.insecure_channel(victim.address) as to_victim,
                grpc.insecure_channel(survivor.address) as to_survivor,
            ):
                stubs = [spb_grpc.SecureCollectorStub(c) for c in (to_victim, to_survivor)]
                for i in indices:
                    request = spb.UploadSecureReportsRequest(reports=batches[i])
                    try:
                        done = stubs[i % 2].UploadSecureReports(request, timeout=10)
                        assert list(done.rejected) == []
                        if i % 2 == 0:
                            with lock:
                                acknowledged_by_victim.append(i)
                    except grpc.RpcError:  # the victim is gone: the device retries elsewhere
                        with lock:
                            retried.append(i)
                        done = stubs[1].UploadSecureReports(request, timeout=30)
                        assert list(done.rejected) == []
                    sent.release()

        workers = [
            threading.Thread(target=upload, args=(list(range(k, len(batches), 2)),)) for k in (0, 1)
        ]
        for worker in workers:
            worker.start()
        for _ in range(kill_after):
            sent.acquire()
        victim.kill()
        for worker in workers:
            worker.join(timeout=120)
        assert acknowledged_by_victim  # the victim did acknowledge some before it died
        assert retried  # and refused others: sent again to the survivor
        with grpc.insecure_channel(survivor.address) as channel:
            final = aggregated(channel, query.query_id)
            assert (final.aggregated_reports, final.refused_reports) == (len(answers), 0)
            released = release_secure_query(channel, ADMIN, collector, query.query_id)
    assert released.round_counts == expected(answers)
