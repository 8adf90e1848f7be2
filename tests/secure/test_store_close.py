"""Closing the secure store while worker threads still read it (a server stopping with an
aggregation step's read in flight) waits for the read in progress; later reads are refused
in words. Closing the connection under a running read used to crash the process (SIGSEGV)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from aggregator.secure.store import SecureStore


def test_close_waits_for_the_read_in_progress_and_later_reads_are_refused(
    tmp_path: Path,
) -> None:
    store = SecureStore(tmp_path / "leader.secure")
    store.open()
    store.create_query("q", {"min_reports": 1}, b"k" * 16, b"")
    store.hold_reports("q", [(i.to_bytes(16, "big"), b"r", b"s", b"") for i in range(200)])
    outcomes: list[str] = []
    started = threading.Barrier(5)

    def reader() -> None:
        started.wait()
        try:
            while True:
                assert store.pending() == {"q": 200}
        except RuntimeError as error:
            outcomes.append(str(error))

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for thread in readers:
        thread.start()
    started.wait()
    store.close()
    for thread in readers:
        thread.join(timeout=30)
    assert outcomes == ["the secure store is not open"] * 4
    with pytest.raises(RuntimeError, match="not open"):
        store.query("q")
