"""The secure leader's storage steps on SQLite and on PostgreSQL, in process, without gRPC:
holding uploads (batches of 50, report-sized bytes), then claiming and finishing jobs of 200.
Wall time per report, one thread (one replica), then two stores racing (two replicas) on
PostgreSQL. PostgreSQL at LDPCOLLECT_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432);
a database is created and dropped. `--known-ids N` first gives the query N earlier reports
(held and aggregated), so the duplicate check's index is as large as a long-running query's.

    .venv/bin/python -m bench.secure_stores --reports 4000 [--known-ids 1000000]
"""

from __future__ import annotations

import argparse
import os
import secrets
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from psycopg import sql

from aggregator.secure.pg_store import PostgresSecureStore
from aggregator.secure.store import SecureStore
from aggregator.secure.store_api import SecureStoreApi

SERVER = os.environ.get("LDPCOLLECT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")
BODY, SHARE = 2_707, 2_448  # a SecureReport and the leader's opened share at T = 100
UPLOAD, JOB = 50, 200


def reports(n: int) -> list[tuple[bytes, bytes, bytes, bytes]]:
    return [
        (secrets.token_bytes(16), secrets.token_bytes(BODY), secrets.token_bytes(SHARE), b"")
        for _ in range(n)
    ]


def hold(store: SecureStoreApi, rows: list[tuple[bytes, bytes, bytes, bytes]]) -> None:
    for i in range(0, len(rows), UPLOAD):
        store.hold_reports("q", rows[i : i + UPLOAD])


def drain(store: SecureStoreApi) -> int:
    done = 0
    while True:
        job = store.claim_job("q", JOB, secrets.token_bytes(16))
        if job is None:
            if not store.pending("q"):
                return done
            time.sleep(0.001)  # the other replica's last jobs
            continue
        job_id, held = job
        store.finish_job("q", job_id, [(h.report_id, "") for h in held], lambda old: old)
        done += len(held)


def timed(work: list[threading.Thread]) -> float:
    start = time.perf_counter()
    for thread in work:
        thread.start()
    for thread in work:
        thread.join()
    return time.perf_counter() - start


def know(store: SecureStoreApi, ids: int) -> None:
    """`ids` earlier reports of the query, held and aggregated (small bodies): their ids stay
    in the duplicate check's index, as in a query that has run for a while."""
    for start in range(0, ids, 1000):
        batch = [(secrets.token_bytes(16), b"b", b"s", b"") for _ in range(min(1000, ids - start))]
        store.hold_reports("q", batch)
        drain(store)


def run(stores: list[SecureStoreApi], n: int, known_ids: int = 0) -> tuple[float, float]:
    """us per report to hold n reports and to aggregate them, `len(stores)` replicas, in a
    query that already has `known_ids` report ids."""
    stores[0].create_query("q", {}, b"k" * 32, b"")
    know(stores[0], known_ids)
    rows = reports(n)
    share = n // len(stores)
    parts = [rows[i * share : (i + 1) * share] for i in range(len(stores))]
    held = timed(
        [threading.Thread(target=hold, args=(s, p)) for s, p in zip(stores, parts, strict=True)]
    )
    drained = timed([threading.Thread(target=drain, args=(s,)) for s in stores])
    total = share * len(stores)
    return held / total * 1e6, drained / total * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reports", type=int, default=4000)
    parser.add_argument(
        "--known-ids",
        type=int,
        default=0,
        help="report ids the query already has (its earlier reports), before the timed part",
    )
    args = parser.parse_args()
    n, known = args.reports, args.known_ids
    with tempfile.TemporaryDirectory() as tmp:
        lite = SecureStore(Path(tmp) / "bench.secure")
        lite.open()
        held, drained = run([lite], n, known)
        print(
            f"SQLite, one process, {known:,} ids known: hold {held:.0f} us/report, "
            f"aggregate {drained:.0f} us/report"
        )
        lite.close()
    name = f"ldpc_bench_{secrets.token_hex(4)}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        for replicas in (1, 2):
            url = f"{SERVER}/{name}"
            stores = [PostgresSecureStore(url, "leader") for _ in range(replicas)]
            for store in stores:
                store.open()
            held, drained = run(list(stores), n, known)
            print(
                f"PostgreSQL, {replicas} replica(s), {known:,} ids known: "
                f"hold {held:.0f} us/report, aggregate {drained:.0f} us/report"
            )
            for store in stores:
                store.close()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP SCHEMA ldpcollect_secure_leader CASCADE")
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


if __name__ == "__main__":
    main()
