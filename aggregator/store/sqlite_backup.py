"""A consistent copy of a live SQLite store: the database file and its answer files.

SQLite's online backup copies a consistent snapshot of the database while the aggregator goes
on writing. A wide query's answers are in its answer file (`answer_files`), which only grows
while the query is open and is only ever cut back to what had committed. So the first `end`
bytes of the live file, `end` being where the snapshot's rows for that query end, are exactly
the snapshot's answers, whatever was appended since. A query released after the snapshot has
lost its file: the copy is then taken again from a new snapshot, in which that query is
released and needs none.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from aggregator.store.answer_files import AnswerFiles, fsync_path
from aggregator.store.sqlite_file import create_private

# Where each query's rows end in its answer file; a query's answers take ceil(T / 8) bytes a
# report, T being its targets (8 bytes each in `queries.targets`).
_ENDS = (
    "SELECT r.query_id, max(r.answers_at + r.n * ((length(q.targets) / 8 + 7) / 8)) "
    "FROM reports r JOIN queries q ON q.query_id = r.query_id "
    "WHERE r.answers_at IS NOT NULL GROUP BY r.query_id"
)
_CHUNK = 1 << 20


class BackupFailed(OSError):
    """No consistent copy could be made (the message says why and what to do)."""


@dataclass(frozen=True)
class Backup:
    database: Path
    answer_files: int
    answer_bytes: int
    attempts: int


def backup(source: Path, destination: Path, attempts: int = 5) -> Backup:
    """Copy the store at `source` (running or not) to `destination`, which must not exist,
    with its answer files beside it (`<destination>.answers`), readable by this user only."""
    if not source.is_file():
        raise BackupFailed(f"{source} is not a database file")
    copies = AnswerFiles(str(destination)).directory
    for path in (destination, copies):
        if path.exists():
            raise BackupFailed(f"{path} exists already; name a new destination")
    live = AnswerFiles(str(source))
    for attempt in range(1, attempts + 1):
        _snapshot(source, destination)
        with closing(sqlite3.connect(destination)) as conn:
            ends = {str(q): int(end) for q, end in conn.execute(_ENDS)}
        copied = _copy_answers(live, AnswerFiles(str(destination)), ends)
        if copied is not None:
            fsync_path(destination.parent)
            return Backup(destination, len(ends), copied, attempt)
        # A query's file went away or fell short: it was released after the snapshot.
        destination.unlink()
        shutil.rmtree(copies, ignore_errors=True)
    raise BackupFailed(
        f"{attempts} snapshots of {source} each named answers that were gone by the time they "
        "were copied (queries released meanwhile); try again when no release is running"
    )


def _snapshot(source: Path, destination: Path) -> None:
    create_private(str(destination))
    with (
        closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as live,
        closing(sqlite3.connect(destination)) as copy,
    ):
        live.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
    fsync_path(destination)


def _copy_answers(live: AnswerFiles, copies: AnswerFiles, ends: dict[str, int]) -> int | None:
    """Copy the first `ends[q]` bytes of each query's answer file; None when one is missing
    or shorter."""
    if ends:
        copies.directory.mkdir(mode=0o700)
    total = 0
    for query_id, end in sorted(ends.items()):
        target = copies.path(query_id)
        try:
            with live.path(query_id).open("rb") as source:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    left = end
                    while left:
                        chunk = source.read(min(left, _CHUNK))
                        if not chunk:
                            return None
                        out.write(chunk)
                        left -= len(chunk)
                    out.flush()
                    os.fsync(out.fileno())
        except FileNotFoundError:
            return None
        total += end
    if ends:
        fsync_path(copies.directory)
    return total
