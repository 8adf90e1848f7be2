"""Report log rows encrypted under a per-query key, so that a release can erase them in O(1).

Why: a release must leave no report byte readable in any file. Overwriting the reports
(`secure_delete`) costs time in proportion to the bytes held (about 0.5 s more per 20,000
reports of 65,536 targets). Instead each query gets a random 256-bit key, stored in its own
row of `report_keys`, and every log row is written AES-256-CTR encrypted under it with a
fresh random 128-bit initial counter block (the row's `nonce`). A release overwrites the
32-byte key (`secure_delete` on its row, then the write-ahead log is checkpointed and
truncated as before) and deletes the rows without overwriting them: what stays in free pages
is ciphertext under a key that no longer exists anywhere in the database's files.

What this does and does not protect: before the release the key sits in the same file as the
ciphertext, so the encryption hides nothing from whoever can read the file then; it only makes
the erasure cheap. After the release, reading the rows back needs the key, which was
overwritten in place, so the guarantee is the same as for `secure_delete`'s overwrite (neither
reaches copies the file system or the disk keeps of old blocks, or copies of the file). CTR
gives no integrity: whoever can write the file can change reports whether encrypted or not.

Each row is one keystream: its report ids, then its pseudonyms, then its answers, so any one
report can be decrypted alone (`ReportCipher.open_at`). Rows written before this existed
(`nonce` NULL, queries without a key) are stored in clear and overwritten at release as before.
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes

KEY_BYTES = 32
NONCE_BYTES = 16
_BLOCK = 16


class ReportCipher:
    """AES-256-CTR over a query's log rows (see the module docstring)."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a report key is {KEY_BYTES} bytes, got {len(key)}")
        self.key = key
        self._aes = algorithms.AES(key)

    @classmethod
    def new(cls) -> ReportCipher:
        return cls(os.urandom(KEY_BYTES))

    def _stream(self, nonce: bytes, offset: int = 0) -> CipherContext:
        """The row's keystream from byte `offset` on (whole blocks: skip `offset % 16` after)."""
        start = (int.from_bytes(nonce, "big") + offset // _BLOCK) % (1 << 128)
        return Cipher(self._aes, modes.CTR(start.to_bytes(_BLOCK, "big"))).encryptor()

    def seal(self, *columns: bytes) -> tuple[bytes, tuple[bytes, ...]]:
        """A fresh nonce and the columns encrypted as one stream, in order."""
        nonce = os.urandom(NONCE_BYTES)
        stream = self._stream(nonce)
        return nonce, tuple(stream.update(c) for c in columns)

    def open(self, nonce: bytes, *columns: bytes) -> tuple[bytes, ...]:
        """Columns sealed together (CTR decrypts as it encrypts)."""
        stream = self._stream(nonce)
        return tuple(stream.update(c) for c in columns)

    def apply_into(self, nonce: bytes, offset: int, data: bytes, out: bytearray) -> memoryview:
        """`data` sealed (CTR: or opened) as the bytes at `offset` of the row's stream, a
        whole number of blocks in, written into `out` (grown when short): a view of `out`.
        For the large answers column: reusing one buffer avoids a fresh allocation, whose
        first touch of every page cost more than the cipher."""
        if offset % _BLOCK:
            raise ValueError(f"offset {offset} is not a whole number of {_BLOCK}-byte blocks")
        if len(out) < len(data) + _BLOCK - 1:
            out.extend(bytes(len(data) + _BLOCK - 1 - len(out)))
        written = self._stream(nonce, offset).update_into(data, out)
        return memoryview(out)[:written]

    def open_at(self, nonce: bytes, offset: int, data: bytes) -> bytes:
        """`data`, which sits at byte `offset` of the row's stream, decrypted."""
        skip = offset % _BLOCK
        return self._stream(nonce, offset).update(bytes(skip) + data)[skip:]
