"""The operator's token issuer, in memory: one key per epoch, at most K tokens per client.

The issuer knows who asks (the enrolled client's identity, authenticated by the transport
that calls it) and how many tokens it got this epoch; it sees only blinded messages, so it
cannot recognise the tokens later. No network here: a service wraps `issue`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ldpcollect.admission.directory import DirectoryKey, IssuerDirectory
from ldpcollect.admission.errors import IssuanceRefused, UnknownKeyError
from ldpcollect.admission.token_key import TokenPublicKey, TokenSigningKey
from ldpcollect.admission.tokens import TokenRequest, TokenResponse, sign_token_requests
from ldpcollect.errors import ParameterError


class Issuer:
    """Signs TokenRequests for enrolled clients, at most `tokens_per_epoch` each per epoch.

    Thread-safe: the quota is reserved under a lock and the (slow) signing runs outside it.
    A refused batch, or one with a bad request, changes no counter.
    """

    def __init__(
        self, tokens_per_epoch: int, epoch: int = 0, key: TokenSigningKey | None = None
    ) -> None:
        if tokens_per_epoch < 1:
            raise ParameterError("tokens_per_epoch", tokens_per_epoch, "[1, inf)")
        if epoch < 0:
            raise ParameterError("epoch", epoch, "[0, inf)")
        self.tokens_per_epoch = tokens_per_epoch
        self._lock = threading.Lock()
        self._epoch = epoch
        self._key = key or TokenSigningKey.generate()
        self._issued: dict[str, int] = {}

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def public_key(self) -> TokenPublicKey:
        """The key to publish for the current epoch (clients must check they get this one)."""
        return self._key.public

    def directory(self, issuer_request_uri: str) -> IssuerDirectory:
        """The public directory listing this epoch's key, for devices to fetch."""
        return IssuerDirectory(issuer_request_uri, (DirectoryKey(self.public_key),))

    def rotate(self, epoch: int, key: TokenSigningKey | None = None) -> TokenPublicKey:
        """Start `epoch` (later than the current one) with a new key; every client's quota is
        full again. A generated key's truncated id differs from the old one's, so requests
        still naming the old key are refused rather than signed under the new one."""
        if epoch <= self._epoch:
            raise ParameterError("epoch", epoch, f"({self._epoch}, inf)", "epochs only advance")
        if key is None:
            key = TokenSigningKey.generate()
            while key.public.truncated_token_key_id == self._key.public.truncated_token_key_id:
                key = TokenSigningKey.generate()
        with self._lock:
            self._epoch, self._key, self._issued = epoch, key, {}
        return key.public

    def remaining(self, client_id: str) -> int:
        with self._lock:
            return self.tokens_per_epoch - self._issued.get(client_id, 0)

    def issue(self, client_id: str, requests: Sequence[TokenRequest]) -> list[TokenResponse]:
        """Blind signatures for all of `requests`, or none: IssuanceRefused when they would take
        the client past its quota, UnknownKeyError when one names a key other than this
        epoch's, BlindSignatureError when one is not a valid blinded message."""
        if not client_id:
            raise ParameterError("client_id", client_id, "non-empty strings")
        with self._lock:
            key, epoch = self._key, self._epoch
            for i, request in enumerate(requests):
                if request.truncated_token_key_id != key.public.truncated_token_key_id:
                    raise UnknownKeyError(
                        f"request {i} names truncated key id "
                        f"0x{request.truncated_token_key_id:02x}, not epoch {epoch}'s key "
                        f"0x{key.public.truncated_token_key_id:02x}: fetch the current key"
                    )
            issued = self._issued.get(client_id, 0)
            if issued + len(requests) > self.tokens_per_epoch:
                raise IssuanceRefused(
                    f"client {client_id!r} asked for {len(requests)} tokens with "
                    f"{self.tokens_per_epoch - issued} of {self.tokens_per_epoch} left in "
                    f"epoch {epoch}"
                )
            self._issued[client_id] = issued + len(requests)
        try:
            return sign_token_requests(key, requests)
        except Exception:
            with self._lock:
                if self._epoch == epoch:
                    self._issued[client_id] -= len(requests)
            raise
