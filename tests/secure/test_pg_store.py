"""The secure store on PostgreSQL (`aggregator.secure.pg_store`) against a real database the
test creates and drops: the SQLite store's semantics, and what several replicas on one
database must never do (two stores here, in threads, stand for two replica processes): hold
a report twice, spend a nonce twice, drive one job at once, count a job twice, record a
helper job twice, seal or charge a release twice."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
import pytest

from aggregator.errors import AlreadyExists, FailedPrecondition, NotFound, Unavailable
from aggregator.secure.pg_store import PostgresSecureStore
from aggregator.secure.store_core import CLOSED, OPEN, RELEASED, UploadOutcome
from aggregator.store.postgres import DatabaseUnreachable

T = TypeVar("T")
PARAMS: dict[str, Any] = {"targets": [1, 2], "min_reports": 1}
ZERO = (0).to_bytes(8, "big")


def add(n: int) -> Callable[[bytes], bytes]:
    """A stand-in aggregate: a big-endian counter, merged by adding."""
    return lambda old: (int.from_bytes(old, "big") + n).to_bytes(8, "big")


def count(aggregate: bytes) -> int:
    return int.from_bytes(aggregate, "big")


def token_with_nonce(nonce: bytes) -> bytes:
    return b"\x00\x02" + nonce + b"rest-of-token"


@pytest.fixture
def stores(fresh_postgres_url: str) -> Iterator[tuple[PostgresSecureStore, PostgresSecureStore]]:
    """Two leader stores on one fresh database (two replicas)."""
    a = PostgresSecureStore(fresh_postgres_url, "leader", pool_size=4)
    b = PostgresSecureStore(fresh_postgres_url, "leader", pool_size=4)
    a.open()
    b.open()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def race(*work: Callable[[], T]) -> list[T]:
    """Run every callable at once (a barrier first), each in its own thread."""
    barrier = threading.Barrier(len(work))

    def run(job: Callable[[], T]) -> T:
        barrier.wait()
        return job()

    with ThreadPoolExecutor(len(work)) as pool:
        return list(pool.map(run, work))


def test_unreachable_database_is_named() -> None:
    store = PostgresSecureStore("postgresql://someone:secret@127.0.0.1:1/nowhere", "leader")
    with pytest.raises(DatabaseUnreachable) as info:
        store.open()
    assert "postgresql://someone:***@127.0.0.1:1/nowhere" in str(info.value)
    assert "secret" not in str(info.value)
    with pytest.raises(ValueError, match="role must be one of"):
        PostgresSecureStore("postgresql://x/y", "trusted")


def test_queries_reports_jobs_and_release_as_in_sqlite(
    stores: tuple[PostgresSecureStore, PostgresSecureStore],
) -> None:
    a, b = stores
    created = a.create_query("q", PARAMS, b"k" * 32, ZERO)
    assert (created.state, created.params, b.has_query("q"), b.has_query("x")) == (
        OPEN,
        PARAMS,
        True,
        False,
    )
    with pytest.raises(AlreadyExists):
        b.create_query("q", PARAMS, b"k" * 32, ZERO)
    with pytest.raises(NotFound):
        a.query("nope")
    a.provision_query("q", PARAMS, b"k" * 32, ZERO)  # the same again: accepted
    with pytest.raises(AlreadyExists, match="provisioned differently"):
        a.provision_query("q", PARAMS, b"j" * 32, ZERO)
    r1, r2, r3 = (bytes([i]) * 16 for i in (1, 2, 3))
    nonce = b"n" * 32
    outcomes = a.hold_reports(
        "q",
        [
            (r1, b"one", b"s1", token_with_nonce(nonce)),
            (r1, b"one", b"s1", token_with_nonce(nonce)),
            (r2, b"two", b"s2", b""),
        ],
    )
    assert outcomes == [UploadOutcome.NEW, UploadOutcome.DUPLICATE, UploadOutcome.NEW]
    assert b.hold_reports(
        "q",
        [(r2, b"other", b"s2", b""), (r3, b"three", b"s3", token_with_nonce(nonce))],
    ) == [UploadOutcome.CONFLICT, UploadOutcome.TOKEN_SPENT]
    assert a.pending() == {"q": 2} and b.progress("q")[1] == 2
    job = a.claim_job("q", 10, b"J" * 16)
    assert job is not None and job[0] == b"J" * 16
    assert [(h.report_id, h.body, h.token) for h in job[1]] == [
        (r1, b"one", token_with_nonce(nonce)),
        (r2, b"two", b""),
    ]
    assert b.claim_job("q", 10, b"K" * 16) is None  # a holds the only job; nothing else
    a.finish_job("q", job[0], [(r1, ""), (r2, "BAD_PROOF")], add(1))
    a.finish_job("q", job[0], [(r1, ""), (r2, "BAD_PROOF")], add(1))  # idempotent
    query, pending = b.progress("q")
    assert (query.aggregated, query.refused, count(query.aggregate), pending) == (1, 1, 1, 0)
    assert a.close_query("q").state == CLOSED
    with pytest.raises(FailedPrecondition, match="not open"):
        a.hold_reports("q", [(r3, b"x", b"y", b"")])
    assert b.query("q").state == CLOSED
    sealed = a.release("q", lambda q: b"sealed", lambda body: "charged")
    assert b.release("q", lambda q: b"other", lambda body: "again") == sealed
    assert (b.query("q").state, b.ledger()) == (RELEASED, "charged")
    assert [q.query_id for q in b.queries()] == ["q"]
    assert [(q.query_id, n) for q, n in a.all_progress()] == [("q", 0)]
    assert b.update_ledger(lambda body: f"{body}+") == "charged+"


def test_every_replica_of_a_role_gets_one_key_pair(fresh_postgres_url: str) -> None:
    stores = [PostgresSecureStore(fresh_postgres_url, role) for role in ("leader",) * 3]
    helper = PostgresSecureStore(fresh_postgres_url, "helper")
    for store in [*stores, helper]:
        store.open()
    try:
        pairs = race(*(lambda s=s: s.load_key_pair("leader", "unused") for s in stores))
        assert len({p.private_bytes() for p in pairs}) == 1
        assert helper.load_key_pair("helper", "unused").private_bytes() != pairs[0].private_bytes()
    finally:
        for store in [*stores, helper]:
            store.close()


def test_racing_uploads_of_the_same_reports_hold_each_once(
    stores: tuple[PostgresSecureStore, PostgresSecureStore],
) -> None:
    """Both replicas receive the same 300 report ids in different orders, some with other
    bytes, and 100 other reports that share their nonces pairwise: each id is new at exactly
    one replica, each nonce is spent by exactly one report."""
    a, b = stores
    a.create_query("q", PARAMS, b"k" * 32, ZERO)
    ids = [secrets.token_bytes(16) for _ in range(300)]
    nonces = [secrets.token_bytes(32) for _ in range(50)]
    pairs = [secrets.token_bytes(16) for _ in range(100)]  # pairs[2i], pairs[2i+1]: one nonce

    def body(rid: bytes, replica: str) -> bytes:
        # Every 10th id carries other bytes at b: one replica's copy is then a conflict.
        return rid + (replica.encode() if ids.index(rid) % 10 == 0 else b"")

    def uploads(replica: str, order: list[bytes]) -> list[tuple[bytes, bytes, bytes, bytes]]:
        return [(rid, body(rid, replica), b"share", b"") for rid in order]

    def paired(offset: int) -> list[tuple[bytes, bytes, bytes, bytes]]:
        return [(pairs[2 * i + offset], b"p", b"s", token_with_nonce(nonces[i])) for i in range(50)]

    def run(store: PostgresSecureStore, replica: str, order: list[bytes], off: int) -> list[str]:
        outcomes: list[str] = []
        work = uploads(replica, order) + paired(off)
        for i in range(0, len(work), 25):
            outcomes += store.hold_reports("q", work[i : i + 25])
        return outcomes

    got_a, got_b = race(lambda: run(a, "a", ids, 0), lambda: run(b, "b", list(reversed(ids)), 1))
    by_id: dict[bytes, list[str]] = {}
    for order, outcomes in ((ids, got_a[:300]), (list(reversed(ids)), got_b[:300])):
        for rid, outcome in zip(order, outcomes, strict=True):
            by_id.setdefault(rid, []).append(outcome)
    for i, rid in enumerate(ids):
        assert by_id[rid].count(UploadOutcome.NEW) == 1
        other = UploadOutcome.CONFLICT if i % 10 == 0 else UploadOutcome.DUPLICATE
        assert by_id[rid].count(other) == 1
    for i in range(50):
        pair = sorted([got_a[300 + i], got_b[300 + i]])
        assert pair == sorted([UploadOutcome.NEW, UploadOutcome.TOKEN_SPENT])
    assert a.pending("q") == {"q": 350}


def test_jobs_are_single_flight_and_each_report_is_counted_once(
    stores: tuple[PostgresSecureStore, PostgresSecureStore],
) -> None:
    """Two replicas' drivers claim and finish jobs at once until nothing is left: no job is
    held by both at a time and every report is counted exactly once."""
    a, b = stores
    a.create_query("q", PARAMS, b"k" * 32, ZERO)
    ids = [secrets.token_bytes(16) for _ in range(400)]
    for i in range(0, 400, 50):
        a.hold_reports("q", [(rid, rid, b"s", b"") for rid in ids[i : i + 50]])
    driving: set[bytes] = set()
    guard = threading.Lock()
    finished: list[bytes] = []

    def drive(store: PostgresSecureStore) -> None:
        while True:
            job = store.claim_job("q", 30, secrets.token_bytes(16))
            if job is None:
                if not store.pending("q"):
                    return
                continue  # only the other replica's jobs are left: wait for them
            job_id, held = job
            with guard:
                assert job_id not in driving, "a job driven by two replicas at once"
                driving.add(job_id)
                finished.extend(h.report_id for h in held)
            time.sleep(0.002)  # the helper's half of the job
            with guard:
                driving.discard(job_id)
            store.finish_job("q", job_id, [(h.report_id, "") for h in held], add(len(held)))

    race(lambda: drive(a), lambda: drive(b))
    query = b.query("q")
    assert sorted(finished) == sorted(ids)
    assert (query.aggregated, count(query.aggregate), a.pending("q")) == (400, 400, {})


def test_a_dead_replicas_job_is_resumed_with_the_same_id_and_reports(
    fresh_postgres_url: str,
) -> None:
    a = PostgresSecureStore(fresh_postgres_url, "leader")
    b = PostgresSecureStore(fresh_postgres_url, "leader")
    a.open()
    b.open()
    try:
        a.create_query("q", PARAMS, b"k" * 32, ZERO)
        ids = [secrets.token_bytes(16) for _ in range(30)]
        a.hold_reports("q", [(rid, rid, b"s", b"") for rid in ids])
        job = a.claim_job("q", 20, b"J" * 16)
        assert job is not None
        # a is alive: b takes the other reports, never a's job
        other = b.claim_job("q", 20, b"K" * 16)
        assert other is not None and other[0] == b"K" * 16 and len(other[1]) == 10
        assert b.claim_job("q", 20, b"L" * 16, busy=frozenset({b"K" * 16})) is None
        # a's own driver gets its job back after a failed attempt (not busy any more)
        again = a.claim_job("q", 20, b"M" * 16)
        assert again is not None and again[0] == b"J" * 16
        assert a._locks is not None  # its claims' session ends within ~25 s if its host dies
        assert a._locks.execute("SHOW tcp_keepalives_idle").fetchone() == ("10",)
        a.close()  # its session ends, as when the process is SIGKILLed
        resumed = None
        for _ in range(200):  # the server ends the session (and its locks) a moment later
            resumed = b.claim_job("q", 20, b"N" * 16, busy=frozenset({b"K" * 16}))
            if resumed is not None:
                break
            time.sleep(0.01)
        assert resumed is not None and resumed == job
        b.finish_job("q", resumed[0], [(h.report_id, "") for h in resumed[1]], add(20))
        b.finish_job("q", other[0], [(h.report_id, "") for h in other[1]], add(10))
        assert (b.query("q").aggregated, count(b.query("q").aggregate)) == (30, 30)
    finally:
        a.close()
        b.close()


def test_racing_releases_seal_once_and_charge_once(
    stores: tuple[PostgresSecureStore, PostgresSecureStore],
) -> None:
    a, b = stores
    a.create_query("q", PARAMS, b"k" * 32, ZERO)
    a.close_query("q")
    charges: list[str] = []

    def release(store: PostgresSecureStore) -> bytes:
        def charge(body: str | None) -> str:
            charges.append("x")
            return json.dumps({"charged": [*json.loads(body or "[]"), "q"]})

        return store.release("q", lambda q: secrets.token_bytes(32), charge)

    results = race(*(lambda s=s: release(s) for s in (a, b, a, b)))
    assert len(set(results)) == 1
    assert json.loads(a.ledger() or "") == {"charged": ["q"]}
    assert len(charges) == 1


def test_helper_replicas_record_a_job_once(fresh_postgres_url: str) -> None:
    h1 = PostgresSecureStore(fresh_postgres_url, "helper")
    h2 = PostgresSecureStore(fresh_postgres_url, "helper")
    h1.open()
    h2.open()
    try:
        h1.provision_query("q", PARAMS, b"k" * 32, ZERO)
        ids = [secrets.token_bytes(16) for _ in range(20)]
        nonces = [(hashlib.sha256(rid).digest(), rid) for rid in ids]

        def record(store: PostgresSecureStore, answer: bytes) -> bytes:
            return store.record_job("q", b"J" * 16, answer, ids, 20, 0, add(20), nonces)

        kept = race(lambda: record(h1, b"first"), lambda: record(h2, b"second"))
        assert kept[0] == kept[1] and kept[0] in (b"first", b"second")
        assert h2.job_response(b"J" * 16) == kept[0]
        assert count(h1.query("q").aggregate) == 20 and h1.query("q").aggregated == 20
        assert h2.seen_reports("q", [*ids[:3], b"x" * 16]) == set(ids[:3])
        assert h2.spent_nonces("q", [n for n, _ in nonces[:2]]) == {n for n, _ in nonces[:2]}
        # Another job with one of these ids, not known as seen when it was verified: refused
        # so it is retried (and its ids refused as REPLAY then), never counted twice.
        with pytest.raises(Unavailable, match="retry"):
            h2.record_job("q", b"K" * 16, b"k", [ids[0], b"y" * 16], 2, 0, add(2))
        # The same, with that id known as seen (refused as REPLAY): recorded.
        assert (
            h2.record_job("q", b"K" * 16, b"k", [ids[0], b"y" * 16], 1, 1, add(1), (), {ids[0]})
            == b"k"
        )
        assert h1.query("q").aggregated == 21
    finally:
        h1.close()
        h2.close()


def test_a_schema_from_a_newer_ldpcollect_is_refused(fresh_postgres_url: str) -> None:
    store = PostgresSecureStore(fresh_postgres_url, "helper")
    store.open()
    store.close()
    with psycopg.connect(fresh_postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO ldpcollect_secure_helper.secure_migrations VALUES (99)")
    with pytest.raises(DatabaseUnreachable, match="secure schema version 99, newer than"):
        PostgresSecureStore(fresh_postgres_url, "helper").open()
    other = PostgresSecureStore(fresh_postgres_url, "leader")
    other.open()  # another role's schema: fine
    other.close()


def test_a_job_let_go_after_a_failed_attempt_is_taken_by_another_replica(
    stores: tuple[PostgresSecureStore, PostgresSecureStore],
) -> None:
    a, b = stores
    a.create_query("q", PARAMS, b"k" * 32, ZERO)
    a.hold_reports("q", [(bytes([i]) * 16, b"r", b"s", b"") for i in range(5)])
    job = a.claim_job("q", 10, b"J" * 16)
    assert job is not None and b.claim_job("q", 10, b"K" * 16) is None
    a.let_go(job[0])  # e.g. it reached no helper
    assert b.claim_job("q", 10, b"K" * 16) == job
    assert a.claim_job("q", 10, b"L" * 16) is None  # b holds it now
