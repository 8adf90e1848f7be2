"""A version 1 SQLite secure store (the leader's reports, shares, jobs and outcomes in one
table) opens as version 2 with nothing acknowledged lost: pending reports stay pending,
an unfinished job keeps its id and its reports (the helper may have recorded it), finished
reports are still told apart as duplicates or conflicts."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from aggregator.secure.store import SecureStore, UploadOutcome
from aggregator.secure.store_core import PAGE_SIZE

# The leader's table of schema version 1 (aggregator/secure/schema/secure_v1.sql before
# version 2), with the queries table both versions share.
V1_LEADER = """
PRAGMA user_version = 1;
CREATE TABLE secure_queries (
    query_id TEXT PRIMARY KEY, body TEXT NOT NULL, verify_key BLOB NOT NULL,
    state INTEGER NOT NULL, aggregate BLOB NOT NULL, aggregated INTEGER NOT NULL DEFAULT 0,
    refused INTEGER NOT NULL DEFAULT 0, sealed_share BLOB);
CREATE TABLE secure_reports (
    query_id TEXT NOT NULL, report_id BLOB NOT NULL, digest BLOB NOT NULL, body BLOB,
    leader_share BLOB, job_id BLOB, outcome TEXT, {token}
    PRIMARY KEY (query_id, report_id)) WITHOUT ROWID;
CREATE INDEX secure_reports_pending ON secure_reports (query_id, job_id) WHERE outcome IS NULL;
"""


def rid(n: int) -> bytes:
    return n.to_bytes(16, "big")


def v1_file(path: Path, with_tokens: bool) -> None:
    """Two queries; of "q": reports 0-1 aggregated, 2 refused, 3-4 in unfinished job J
    (reports 3 and 4 sorted after report 5, which is pending in no job), 5-6 pending; of "r":
    report 0 pending."""
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(V1_LEADER.format(token="token BLOB," if with_tokens else ""))
    for query in ("q", "r"):
        db.execute(
            "INSERT INTO secure_queries (query_id, body, verify_key, state, aggregate, "
            "aggregated, refused) VALUES (?, '{}', ?, 1, ?, ?, ?)",
            (query, b"k" * 16, b"agg-" + query.encode(), *((2, 1) if query == "q" else (0, 0))),
        )

    def put(query: str, n: int, job: bytes | None, outcome: str | None) -> None:
        body = b"body-%d" % n
        pending = outcome is None
        db.execute(
            "INSERT INTO secure_reports (query_id, report_id, digest, body, leader_share, "
            "job_id, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                query,
                rid(n),
                hashlib.sha256(body).digest(),
                body if pending else None,
                b"share-%d" % n if pending else None,
                job,
                outcome,
            ),
        )

    put("q", 0, None, "")
    put("q", 1, None, "")
    put("q", 2, None, "BAD_PROOF")
    # job J's reports sort after an unassigned one: the migration still keeps J whole
    put("q", 9, b"J" * 16, None)
    put("q", 8, b"J" * 16, None)
    put("q", 5, None, None)
    put("q", 6, None, None)
    put("r", 0, None, None)
    db.close()


@pytest.mark.parametrize("with_tokens", [True, False])
def test_a_version_1_leader_store_is_migrated_with_its_jobs_and_reports(
    tmp_path: Path, with_tokens: bool
) -> None:
    path = tmp_path / "leader.db.secure"
    v1_file(path, with_tokens)
    store = SecureStore(path)
    store.open()
    try:
        assert store.pending() == {"q": 4, "r": 1}
        query, pending = store.progress("q")
        assert (query.aggregated, pending, query.aggregate) == (2, 4, b"agg-q")

        # the unfinished job first, the same id and reports as before the migration
        job = store.claim_job("q", 500, b"N" * 16)
        assert job is not None
        job_id, held = job
        assert job_id == b"J" * 16
        assert sorted(h.report_id for h in held) == [rid(8), rid(9)]
        assert {h.body for h in held} == {b"body-8", b"body-9"}
        assert {h.leader_share for h in held} == {b"share-8", b"share-9"}

        # then the rest, in a new job (J is busy)
        job = store.claim_job("q", 500, b"N" * 16, frozenset({b"J" * 16}))
        assert job is not None
        assert job[0] == b"N" * 16
        assert sorted(h.report_id for h in job[1]) == [rid(5), rid(6)]
        assert store.claim_job("q", 500, b"M" * 16, frozenset({b"J" * 16, b"N" * 16})) is None

        store.finish_job("q", b"J" * 16, [(rid(8), ""), (rid(9), "BAD_PROOF")], lambda a: a)
        query, pending = store.progress("q")
        assert (query.aggregated, query.refused, pending) == (3, 2, 2)

        # every report acknowledged before the migration is still known, finished or not
        again = store.hold_reports(
            "q",
            [
                (rid(0), b"body-0", b"s", b""),
                (rid(2), b"other", b"s", b""),
                (rid(8), b"body-8", b"s", b""),
                (rid(5), b"body-5", b"s", b""),
                (rid(7), b"body-7", b"s", b""),
            ],
        )
        assert again == [
            UploadOutcome.DUPLICATE,
            UploadOutcome.CONFLICT,
            UploadOutcome.DUPLICATE,
            UploadOutcome.DUPLICATE,
            UploadOutcome.NEW,
        ]
    finally:
        store.close()

    # reopened: version 2, nothing migrated twice
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone() == (2,)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "secure_reports_v1" not in tables
    db.close()
    store = SecureStore(path)
    store.open()
    try:
        assert store.pending() == {"q": 3, "r": 1}
    finally:
        store.close()


def test_jobs_are_ranges_that_never_take_a_report_twice(tmp_path: Path) -> None:
    """Jobs finished out of order, reports held between claims, a second query interleaved:
    every held report is in exactly one job, and a restart finds the unfinished ones."""
    path = tmp_path / "leader.db.secure"
    store = SecureStore(path)
    store.open()
    store.create_query("q", {}, b"k" * 16, b"")
    store.create_query("r", {}, b"k" * 16, b"")
    seen: list[bytes] = []
    try:
        for n in range(6):
            store.hold_reports("q", [(rid(10 * n + i), b"b", b"s", b"") for i in range(3)])
            store.hold_reports("r", [(rid(10 * n), b"b", b"s", b"")])
        first = store.claim_job("q", 4, b"1" * 16)
        second = store.claim_job("q", 4, b"2" * 16, frozenset({b"1" * 16}))
        assert first is not None and second is not None
        store.finish_job("q", b"2" * 16, [(h.report_id, "") for h in second[1]], lambda a: a)
        store.hold_reports("q", [(rid(99), b"b", b"s", b"")])
        third = store.claim_job("q", 100, b"3" * 16, frozenset({b"1" * 16}))
        assert third is not None
        for job in (first, second, third):
            seen += [h.report_id for h in job[1]]
        assert sorted(seen) == sorted(
            [rid(10 * n + i) for n in range(6) for i in range(3)] + [rid(99)]
        )
        assert len(first[1]) == len(second[1]) == 4
    finally:
        store.close()
    store = SecureStore(path)
    store.open()
    try:
        again = store.claim_job("q", 100, b"4" * 16)
        assert again is not None
        assert again[0] in (b"1" * 16, b"3" * 16)
        assert store.pending() == {"q": 19 - 4, "r": 6}
    finally:
        store.close()


def test_a_new_file_has_large_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    new = SecureStore(tmp_path / "new.secure")
    new.open()
    new.close()
    v1_file(tmp_path / "old.secure", with_tokens=True)
    old = SecureStore(tmp_path / "old.secure")
    old.open()
    assert old.pending() == {"q": 4, "r": 1}
    old.close()
    sizes = [
        sqlite3.connect(tmp_path / name).execute("PRAGMA page_size").fetchone()[0]
        for name in ("new.secure", "old.secure")
    ]
    assert sizes == [PAGE_SIZE, 4096]
