"""The issuer's token keys: one RSA-2048 key per epoch, kept as a 0600 PEM file per epoch.

Epoch e covers UNIX seconds [e * epoch_seconds, (e + 1) * epoch_seconds). The key of an epoch
is generated the first time it is needed and written before it signs anything, so a restart
signs with the same key (the one devices and aggregators hold). A new epoch's key never shares
the previous key's truncated id (its last byte), so a request naming the old key is refused
rather than signed under the new one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from ldpcollect.admission.directory import DirectoryKey, IssuerDirectory
from ldpcollect.admission.private_file import write_private
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.errors import ParameterError


class EpochKeys:
    def __init__(self, key_dir: Path | str, epoch_seconds: float, clock: Callable[[], float]):
        if epoch_seconds <= 0:
            raise ParameterError("epoch_seconds", epoch_seconds, "(0, inf)")
        self.key_dir = Path(key_dir)
        self.epoch_seconds = epoch_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[int, TokenSigningKey] = {}
        self.key_dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    def epoch_now(self) -> int:
        return int(self._clock() // self.epoch_seconds)

    def epoch_ends_at(self, epoch: int) -> float:
        return (epoch + 1) * self.epoch_seconds

    def _path(self, epoch: int) -> Path:
        return self.key_dir / f"token-key-epoch-{epoch}.pem"

    def _load(self, epoch: int) -> TokenSigningKey | None:
        path = self._path(epoch)
        if not path.exists():
            return None
        return TokenSigningKey.from_pem(path.read_bytes())

    def key(self, epoch: int) -> TokenSigningKey:
        """The epoch's signing key, loaded or (first time) generated and saved 0600."""
        with self._lock:
            key = self._keys.get(epoch) or self._load(epoch)
            if key is None:
                previous = self._keys.get(epoch - 1) or self._load(epoch - 1)
                key = TokenSigningKey.generate()
                while (
                    previous is not None
                    and key.public.truncated_token_key_id == previous.public.truncated_token_key_id
                ):
                    key = TokenSigningKey.generate()
                write_private(self._path(epoch), key.to_pem())
            self._keys[epoch] = key
            return key

    def directory(self, issuer_name: str, epoch: int) -> IssuerDirectory:
        """This epoch's key first, then the previous epoch's when it exists (aggregators keep
        accepting tokens issued late in the previous epoch; devices use the first)."""
        entries = [DirectoryKey(self.key(epoch).public)]
        previous = self._keys.get(epoch - 1) or self._load(epoch - 1)
        if previous is not None:
            entries.append(DirectoryKey(previous.public))
        return IssuerDirectory(issuer_request_uri(issuer_name), tuple(entries))


def issuer_request_uri(issuer_name: str) -> str:
    """The directory's issuer-request-uri; its authority is the challenge's issuer_name."""
    return f"grpc://{issuer_name}/ldpcollect.v1.Issuer/IssueTokens"
