"""Report answers outside SQLite: one append-only file per query beside the database.

Why: in WAL mode SQLite writes every page twice (into the log at COMMIT, into the file at the
checkpoint) and lays a long blob out as a chain of overflow pages. A wide query's answers
(T/8 bytes a report: 1,250 at 10,000 targets) made that the writer's largest cost. An
encrypted query's answers now go to its own file, `<db>.answers/<sha256 of the query id>`,
appended as the writer sealed them (`report_cipher`) and flushed to disk (`fdatasync`) before
the transaction that records where they lie commits. The log row keeps the report ids and
pseudonyms and, in place of the answers, their offset in that file (`answers_at`).

Crash consistency: what a transaction appended before it failed, or before the process
died, lies past the end of the last committed row; `recover` cuts each file back there when
the store opens. A file shorter than its committed rows has lost acknowledged reports: the
store refuses to open rather than count reports it cannot read back.

Release: the query's file is deleted once the release has committed. The transaction erased
the query's key, so what freed disk blocks still hold is ciphertext nobody can read (the same
limit as for SQLite's freed pages, `report_keys`). Queries kept in clear (made before rows were
encrypted) never use a file: their release overwrites their rows in place.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path


def write_at(fd: int, offset: int, data: bytes | memoryview) -> None:
    """All of `data` at `offset` (pwrite may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset + len(data) - len(view))
        view = view[written:]


def fsync_path(path: Path) -> None:
    """fsync a file, or a directory (which makes the names in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class AnswerFileShort(RuntimeError):
    """A query's answer file ends before its committed rows do."""


class AnswerFiles:
    """The answer files of one database, owned by its writer thread."""

    def __init__(self, db_path: str) -> None:
        self.directory = Path(f"{db_path}.answers")
        self._fds: dict[str, int] = {}
        self._committed: dict[str, int] = {}  # query id -> committed length
        self._length: dict[str, int] = {}  # query id -> length including this transaction
        self._new_files = False

    def path(self, query_id: str) -> Path:
        return self.directory / hashlib.sha256(query_id.encode("utf-8")).hexdigest()

    def reserve(self, query_id: str, n: int) -> tuple[int, int]:
        """The query's file descriptor and the offset of the next `n` bytes, for a caller that
        writes them (`write_at`, on any thread) and makes them durable (`os.fdatasync`)
        before the COMMIT. Counted at once: what a failed write leaves, `rollback` cuts off."""
        fd = self._open(query_id)
        offset = self._length[query_id]
        self._length[query_id] = offset + n
        return fd, offset

    def sync_names(self) -> None:
        """Make the names of files created since the last call durable (before COMMIT)."""
        if self._new_files:
            fsync_path(self.directory)
            self._new_files = False

    def committed(self) -> None:
        """The transaction that recorded every append so far has committed."""
        self._committed.update(self._length)

    def rollback(self) -> None:
        """Forget what the failed transaction appended: cut the files back."""
        for query_id, length in self._length.items():
            committed = self._committed.get(query_id, 0)
            if length != committed:
                os.ftruncate(self._fds[query_id], committed)
                self._length[query_id] = committed

    def read(self, query_id: str, offset: int, length: int) -> bytes:
        data = os.pread(self._open(query_id), length, offset)
        if len(data) != length:
            raise AnswerFileShort(
                f"answer file {self.path(query_id)} ends at byte {offset + len(data)}, "
                f"before the {length} bytes at {offset} that the report log names"
            )
        return data

    def recover(self, query_id: str, end: int) -> None:
        """At open: the query's committed rows end at byte `end` of its file. Cut off what a
        transaction that never committed appended; refuse a file that is too short."""
        path = self.path(query_id)
        size = path.stat().st_size if path.exists() else 0
        if size < end:
            raise AnswerFileShort(
                f"answer file {path} holds {size} bytes but its query's committed reports end "
                f"at byte {end}: acknowledged answers are missing"
            )
        if not path.exists():
            return
        fd = self._open(query_id)
        if size > end:
            os.ftruncate(fd, end)
            os.fsync(fd)
        self._committed[query_id] = self._length[query_id] = end

    def delete(self, query_id: str) -> None:
        """Remove the query's file (its release has committed)."""
        self._forget(query_id)
        with contextlib.suppress(FileNotFoundError):
            self.path(query_id).unlink()
            fsync_path(self.directory)

    def keep_only(self, query_ids: set[str]) -> None:
        """At open: delete the files of queries not in `query_ids` (released, or never
        committed), left by a process that stopped before it could."""
        if not self.directory.exists():
            return
        wanted = {self.path(q).name for q in query_ids}
        stray = [p for p in self.directory.iterdir() if p.name not in wanted]
        for query_id in [q for q in self._fds if self.path(q).name not in wanted]:
            self._forget(query_id)
        for path in stray:
            path.unlink()
        if stray:
            fsync_path(self.directory)

    def close(self) -> None:
        for query_id in list(self._fds):
            self._forget(query_id)

    def _open(self, query_id: str) -> int:
        fd = self._fds.get(query_id)
        if fd is not None:
            return fd
        if not self.directory.exists():
            self.directory.mkdir(mode=0o700, exist_ok=True)
            fsync_path(self.directory.parent)
        path = self.path(query_id)
        self._new_files |= not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._fds[query_id] = fd
        size = os.fstat(fd).st_size
        self._length.setdefault(query_id, size)
        self._committed.setdefault(query_id, size)
        return fd

    def _forget(self, query_id: str) -> None:
        fd = self._fds.pop(query_id, None)
        if fd is not None:
            os.close(fd)
        self._committed.pop(query_id, None)
        self._length.pop(query_id, None)
