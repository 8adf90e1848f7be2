"""How many tokens each device obtained per epoch, durably (one SQLite file, mode 0600).

`reserve` counts tokens before they are signed, in one committed transaction, so a crash
after signing can never let a device exceed K; `give_back` returns a reservation whose signing
failed. Only the (epoch, device id, count) rows are kept: never what was signed.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from aggregator.store.sqlite_file import DatabaseUnusable, create_private
from ldpcollect.admission.errors import IssuanceRefused

_SCHEMA = """
CREATE TABLE IF NOT EXISTS issued (
    epoch     INTEGER NOT NULL,
    device_id TEXT NOT NULL,
    tokens    INTEGER NOT NULL,
    PRIMARY KEY (epoch, device_id)
) WITHOUT ROWID
"""


class QuotaLedger:
    def __init__(self, path: Path | str, tokens_per_epoch: int) -> None:
        if tokens_per_epoch < 1:
            raise ValueError(f"tokens_per_epoch must be >= 1, got {tokens_per_epoch}")
        self.tokens_per_epoch = tokens_per_epoch
        path = Path(path)
        self._lock = threading.Lock()
        try:
            create_private(str(path))
            self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise DatabaseUnusable(str(path), exc) from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def issued(self, epoch: int, device_id: str) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT tokens FROM issued WHERE epoch = ? AND device_id = ?", (epoch, device_id)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def reserve(self, epoch: int, device_id: str, n: int) -> int:
        """Count `n` more tokens for the device in `epoch` (committed before returning), or
        raise IssuanceRefused and count nothing. Returns the tokens it has left."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute(
                    "SELECT tokens FROM issued WHERE epoch = ? AND device_id = ?",
                    (epoch, device_id),
                ).fetchone()
                issued = 0 if row is None else int(row[0])
                if issued + n > self.tokens_per_epoch:
                    raise IssuanceRefused(
                        f"device {device_id!r} asked for {n} tokens with "
                        f"{self.tokens_per_epoch - issued} of {self.tokens_per_epoch} left in "
                        f"epoch {epoch}; ask again in the next epoch"
                    )
                self._conn.execute(
                    "INSERT INTO issued (epoch, device_id, tokens) VALUES (?, ?, ?) "
                    "ON CONFLICT (epoch, device_id) DO UPDATE SET tokens = excluded.tokens",
                    (epoch, device_id, issued + n),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return self.tokens_per_epoch - issued - n

    def give_back(self, epoch: int, device_id: str, n: int) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE issued SET tokens = MAX(tokens - ?, 0) WHERE epoch = ? AND device_id = ?",
                (n, epoch, device_id),
            )
