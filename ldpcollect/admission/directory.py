"""The issuer directory (RFC 9578 section 4): where to ask for tokens, and the keys in use.

Devices take the token key from this public document, the same for everyone, and never from
an issuance response: an issuer that handed each device its own key could recognise its
tokens by their key id. Keys are listed in order of preference; a key with "not-before" is
staged for a scheduled rotation.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from ldpcollect.admission.errors import EncodingError, UnknownKeyError
from ldpcollect.admission.token_key import TokenPublicKey
from ldpcollect.admission.tokens import TOKEN_TYPE


@dataclass(frozen=True)
class DirectoryKey:
    token_key: TokenPublicKey
    not_before: int | None = None  # UNIX seconds from which clients may use the key

    def usable_at(self, now: int) -> bool:
        return self.not_before is None or self.not_before <= now


def _decode_key(entry: Any, i: int) -> DirectoryKey | None:
    """One "token-keys" entry; None for a token type we do not support (clients skip those)."""
    if not isinstance(entry, dict):
        raise EncodingError(f"token-keys[{i}] must be a JSON object")
    token_type = entry.get("token-type")
    if not isinstance(token_type, int) or isinstance(token_type, bool):
        raise EncodingError(f"token-keys[{i}].token-type must be an integer")
    if token_type != TOKEN_TYPE:
        return None
    encoded, not_before = entry.get("token-key"), entry.get("not-before")
    if not isinstance(encoded, str) or "+" in encoded or "/" in encoded:
        raise EncodingError(f"token-keys[{i}].token-key must be a base64url string")
    try:
        spki = base64.b64decode(encoded.encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise EncodingError(f"token-keys[{i}].token-key must be base64url with padding") from None
    if not_before is not None and (not isinstance(not_before, int) or isinstance(not_before, bool)):
        raise EncodingError(f"token-keys[{i}].not-before must be an integer (UNIX seconds)")
    return DirectoryKey(TokenPublicKey(spki), not_before)


@dataclass(frozen=True)
class IssuerDirectory:
    issuer_request_uri: str
    token_keys: tuple[DirectoryKey, ...]

    def key_at(self, now: int) -> TokenPublicKey:
        """The key to request tokens for at UNIX time `now`: the first one usable then."""
        for entry in self.token_keys:
            if entry.usable_at(now):
                return entry.token_key
        raise UnknownKeyError(f"the issuer directory lists no token key usable at {now}")

    def to_json(self) -> str:
        keys: list[dict[str, object]] = []
        for entry in self.token_keys:
            key: dict[str, object] = {
                "token-type": TOKEN_TYPE,
                "token-key": base64.urlsafe_b64encode(entry.token_key.spki).decode("ascii"),
            }
            if entry.not_before is not None:
                key["not-before"] = entry.not_before
            keys.append(key)
        return json.dumps({"issuer-request-uri": self.issuer_request_uri, "token-keys": keys})

    @classmethod
    def from_json(cls, text: str | bytes) -> IssuerDirectory:
        """Parse a directory; keys of other token types are skipped, as clients must."""
        try:
            document = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise EncodingError(f"issuer directory is not JSON: {e}") from None
        if not isinstance(document, dict):
            raise EncodingError("issuer directory must be a JSON object")
        uri, entries = document.get("issuer-request-uri"), document.get("token-keys")
        if not isinstance(uri, str) or not uri:
            raise EncodingError("issuer directory needs an issuer-request-uri string")
        if not isinstance(entries, list):
            raise EncodingError("issuer directory needs a token-keys list")
        keys = (_decode_key(entry, i) for i, entry in enumerate(entries))
        return cls(uri, tuple(key for key in keys if key is not None))
