"""Held reports found in the SQL report log instead of memory (see `aggregator.held`).

Only a repeated report id needs its held report back, so the store keeps, per query, where
each log row's reports start (a few numbers per commit group, not per report) and reads the
one report's pseudonym and answers with `substr` when asked. Reports accepted since the last
flush are not in the log yet: they stay in memory until the store writes them and calls
`written`. Rows encrypted under the query's key (`report_cipher`) are decrypted here: the
report's bytes alone, at their place in the row's keystream. A row whose answers are in the
query's answer file (`answer_files`) has the report's answers read from there.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Callable

from aggregator.held import HeldReport, InMemoryHeld, run_report
from aggregator.store.answer_files import AnswerFiles
from aggregator.store.report_cipher import ReportCipher
from aggregator.store.rows import LogRow
from ldpcollect.wire import REPORT_KEY_BYTES

# Seals a row's answers into a buffer and returns a view of it (`LogHeld.sealed_apart`).
SealAnswers = Callable[[bytearray], memoryview]

_FETCH = (
    "SELECT round, n, nonce, answers_at, substr(pseudonyms, ?, ?), substr(answers, ?, ?) "
    "FROM reports WHERE seq = ?"
)


class LogHeld:
    """A query's held reports: log rows by `seq`, plus those not yet written."""

    def __init__(
        self,
        answer_bytes: int,
        connection: Callable[[], sqlite3.Connection],
        cipher: ReportCipher | None = None,
        files: tuple[AnswerFiles, str] | None = None,
    ) -> None:
        """`cipher`: the query's key, with which its new rows are written (None: in clear).
        `files`: the answer files and this query's id, where rows may keep their answers."""
        self._width = answer_bytes
        self._connection = connection
        self.cipher = cipher
        self._files = files
        self._firsts: list[int] = []  # ordinal of each written row's first report
        self._seqs: list[int] = []
        self._written = 0  # reports in written rows
        self._pending = InMemoryHeld(answer_bytes)  # ordinals from `_written` on

    def __len__(self) -> int:
        return self._written + len(self._pending)

    def hold(self, round_: int, n: int, pseudonyms: bytes, answers: bytes) -> None:
        self._pending.hold(round_, n, pseudonyms, answers)

    def sealed(self, row: LogRow) -> LogRow:
        """`row` as it is written in the log: encrypted when the query has a key."""
        if self.cipher is None:
            return row
        nonce, (ids, pseudonyms, answers) = self.cipher.seal(
            row.report_ids, row.pseudonyms, row.answers
        )
        return row._replace(report_ids=ids, pseudonyms=pseudonyms, answers=answers, nonce=nonce)

    def sealed_apart(self, row: LogRow) -> tuple[LogRow, SealAnswers]:
        """`row` encrypted as one stream (report ids, pseudonyms, then answers) under the
        query's key, without its answers (they go to the query's answer file), and what
        seals them: into a given buffer, returning a view of it (on any thread)."""
        cipher = self.cipher
        if cipher is None:
            raise RuntimeError("only a query with a key keeps its answers apart")
        nonce, (ids, pseudonyms) = cipher.seal(row.report_ids, row.pseudonyms)
        offset, answers = len(row.report_ids) + len(row.pseudonyms), row.answers

        def seal(buffer: bytearray) -> memoryview:
            return cipher.apply_into(nonce, offset, answers, buffer)

        return row._replace(report_ids=ids, pseudonyms=pseudonyms, answers=b"", nonce=nonce), seal

    def opened(self, row: LogRow, *, answers: bool = True) -> LogRow:
        """A row read back, in clear (`answers=False`: its answers were not read)."""
        if row.nonce is None:
            return row
        if self.cipher is None:
            raise RuntimeError("report log row is encrypted but its query has no key")
        if not answers:
            ids, pseudonyms = self.cipher.open(row.nonce, row.report_ids, row.pseudonyms)
            return row._replace(report_ids=ids, pseudonyms=pseudonyms)
        ids, pseudonyms, clear = self.cipher.open(
            row.nonce, row.report_ids, row.pseudonyms, row.answers
        )
        return row._replace(report_ids=ids, pseudonyms=pseudonyms, answers=clear)

    def written(self, seq: int) -> None:
        """The reports held since the last call are now the log row `seq` (one round)."""
        if len(self._pending):
            self.restored(seq, len(self._pending))
            self._pending.clear()

    def restored(self, seq: int, n: int) -> None:
        """A log row of `n` reports read at start (its entry was restored without holding)."""
        self._firsts.append(self._written)
        self._seqs.append(seq)
        self._written += n

    def fetch(self, ordinal: int) -> HeldReport:
        if ordinal >= self._written:
            return self._pending.fetch(ordinal - self._written)
        row = bisect.bisect_right(self._firsts, ordinal) - 1
        i = ordinal - self._firsts[row]
        k, w = REPORT_KEY_BYTES, self._width
        found = (
            self._connection()
            .execute(_FETCH, (i * k + 1, k, i * w + 1, w, self._seqs[row]))
            .fetchone()
        )
        if found is None:
            raise RuntimeError(f"report log row {self._seqs[row]} is indexed but missing")
        round_, n, nonce, answers_at, pseudonym, answers = found
        pseudonym = bytes(pseudonym)
        if answers_at is None:
            answers = bytes(answers)
        elif self._files is None:
            raise RuntimeError("report log row names an answer file but none is open")
        else:
            files, query_id = self._files
            answers = files.read(query_id, answers_at + i * w, w)
        if nonce is not None:
            if self.cipher is None:
                raise RuntimeError("report log row is encrypted but its query has no key")
            # The row's stream: n report ids, n pseudonyms, then n answers.
            pseudonym = self.cipher.open_at(nonce, (n + i) * k, pseudonym)
            answers = self.cipher.open_at(nonce, 2 * n * k + i * w, answers)
        return run_report(int(round_), pseudonym, answers, 0, w)

    def truncate(self, n: int) -> None:
        if n >= self._written:
            self._pending.truncate(n - self._written)
            return
        self._pending.clear()
        keep = bisect.bisect_left(self._firsts, n)
        del self._firsts[keep:]
        del self._seqs[keep:]
        self._written = n

    def clear(self) -> None:
        self.truncate(0)
