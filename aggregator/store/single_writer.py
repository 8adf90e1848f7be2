"""One writer per database file: an exclusive lock held for as long as a store is open.

Two processes appending to one SQLite file each keep their own in-memory counts and
deduplication index, so each would acknowledge reports the other never counts. The store
therefore takes an exclusive `flock` on `<db>.lock` before it reads anything and keeps it
until it closes; a second `ldpcollect serve` on the same file fails at start with a one-line
error. The lock is released by the kernel when the process dies (SIGKILL included), so a
crash never leaves a stale lock behind. `flock` locks belong to the open file, so a second
store in the same process is refused as well.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class DatabaseInUse(OSError):
    """Another open store (in this or another process) holds the database's writer lock."""


class WriterLock:
    def __init__(self, db_path: str | Path) -> None:
        self.path = Path(f"{db_path}.lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            db = str(self.path)[: -len(".lock")]
            raise DatabaseInUse(
                f"the database {db} is in use by another aggregator (pid {holder}, lock "
                f"{self.path}): stop that one first, or give this one its own --db"
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
