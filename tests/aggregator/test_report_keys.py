"""Report log rows encrypted under a per-query key; a release erases the key (and, for a query
whose rows are in clear, overwrites the rows), so no report byte stays readable in the file."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from contextlib import closing
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from aggregator.model import ReportIn
from aggregator.release import release_function
from aggregator.rounds import ReportColumns
from aggregator.store.report_cipher import ReportCipher
from aggregator.store.sqlite import SqliteStore
from tests.aggregator.store_contract import RR, rr_run, spec


@settings(max_examples=50, deadline=None)
@given(
    st.binary(min_size=1, max_size=300), st.integers(0, 299), st.binary(min_size=16, max_size=16)
)
def test_any_slice_of_a_row_decrypts_alone(data: bytes, start: int, nonce: bytes) -> None:
    cipher = ReportCipher(bytes(range(32)))
    start = min(start, len(data) - 1)
    (sealed,) = cipher.open(nonce, data)  # CTR: the same operation both ways
    assert sealed != data or len(data) < 4
    assert cipher.open_at(nonce, start, sealed[start:]) == data[start:]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.binary(max_size=70), min_size=1, max_size=3),
    st.binary(max_size=300),
    st.integers(0, 400),
    st.binary(min_size=16, max_size=16),
)
def test_a_column_sealed_into_a_buffer_continues_the_rows_stream(
    head: list[bytes], tail: bytes, spare: int, nonce: bytes
) -> None:
    """The answers, sealed apart into a reused buffer (of any length) at the block where the
    other columns end, are the bytes one stream over all the columns gives."""
    cipher = ReportCipher(bytes(range(32)))
    head = [c + bytes(-len(c) % 16) for c in head]  # the other columns: whole blocks
    *_, whole = cipher.open(nonce, *head, tail)
    buffer = bytearray(b"\xff" * spare)
    apart = cipher.apply_into(nonce, sum(map(len, head)), tail, buffer)
    assert bytes(apart) == whole
    assert cipher.open_at(nonce, sum(map(len, head)), bytes(apart)) == tail


def _random_keyed(seed: int) -> list[ReportIn]:
    """300 valid reports with random report ids and pseudonyms (findable in a file's bytes)."""
    rng = random.Random(seed)
    return [
        r._replace(pseudonym=rng.randbytes(16), report_id=rng.randbytes(16))
        for r in rr_run(0, 300, seed)
    ]


def _file_bytes(db: Path) -> bytes:
    """Every byte of the database's files: the file, its -wal and -shm, its answer files."""
    files = sorted(p for p in db.parent.rglob("*") if p.is_file() and p.name != "writer.lock")
    return b"".join(p.read_bytes() for p in files if str(p).startswith(str(db)))


async def _fill_and_release(db: Path, reports: list[ReportIn], *, drop_key: bool) -> None:
    store = SqliteStore(db)
    await store.open()
    await store.create_query(spec("q", RR), 0.0)
    await store.close()
    if drop_key:  # as in a file written before rows were encrypted: the query has no key
        with closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("DELETE FROM report_keys")
    store = SqliteStore(db, answer_file_bytes=1)  # answers in the answer file when encrypted
    await store.open()
    assert (await store.submit(ReportColumns.of(reports[:150]))).accepted == 150
    await store.close()
    store = SqliteStore(db)  # restart: the rows are read back (decrypted when encrypted)
    await store.open()
    again = await store.submit(ReportColumns.of(reports))
    assert (again.duplicates, again.accepted) == (150, len(reports) - 150)
    await store.close_query("q")
    await store.release("q", release_function())
    await store.close()


def test_encrypted_rows_hold_no_clear_report_bytes_and_the_release_erases_the_key(
    tmp_path: Path,
) -> None:
    db = tmp_path / "enc.db"
    reports = _random_keyed(1)
    store = SqliteStore(db, answer_file_bytes=1)

    async def fill() -> bytes:
        await store.open()
        await store.create_query(spec("q", RR), 0.0)
        assert (await store.submit(ReportColumns.of(reports))).accepted == 300
        await store.close()
        with closing(sqlite3.connect(db)) as conn:
            (key,) = conn.execute("SELECT key FROM report_keys").fetchone()
            (clear,) = conn.execute("SELECT COUNT(*) FROM reports WHERE nonce IS NULL").fetchone()
        assert clear == 0
        return bytes(key)

    key = asyncio.run(fill())
    contents = _file_bytes(db)
    assert not [r for r in reports if r.pseudonym in contents or r.report_id in contents]
    assert b"".join(r.answers for r in reports) not in contents  # the answer file is sealed
    assert len(list((tmp_path / "enc.db.answers").iterdir())) == 1
    asyncio.run(_released(db))
    assert key not in _file_bytes(db)
    assert list((tmp_path / "enc.db.answers").iterdir()) == []  # deleted with the release


async def _released(db: Path) -> None:
    store = SqliteStore(db)
    await store.open()
    await store.close_query("q")
    record = await store.release("q", release_function())
    assert record.participants == 300
    await store.close()
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM reports").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM report_keys").fetchone() == (0,)


def test_rows_in_clear_of_a_query_without_a_key_are_overwritten_at_release(
    tmp_path: Path,
) -> None:
    db = tmp_path / "clear.db"
    reports = _random_keyed(2)
    asyncio.run(_fill_and_release(db, reports, drop_key=True))
    contents = _file_bytes(db)
    assert not [r for r in reports if r.pseudonym in contents or r.report_id in contents]


def test_encrypted_rows_are_read_back_after_a_restart(tmp_path: Path) -> None:
    asyncio.run(_fill_and_release(tmp_path / "enc.db", _random_keyed(3), drop_key=False))
