"""Checking a batch of tokens at redemption: decode, key, challenge, signature.

Replay is not checked here: a token that verifies may still have been spent before, and two
copies of one token in a batch both verify. The redeemer's durable nonce store decides that.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from ldpcollect.admission import blind_rsa
from ldpcollect.admission.errors import EncodingError
from ldpcollect.admission.token_key import TokenPublicKey
from ldpcollect.admission.tokens import VARIANT, Token

# One key, or several (the current epoch's and, across a rotation, the previous one's).
AcceptedKeys = TokenPublicKey | Iterable[TokenPublicKey]


class Verdict(enum.Enum):
    """Why a token was accepted or not, so a redeemer can give each its precise status."""

    VALID = "valid"
    MALFORMED = "not a type-2 token of the right length"
    UNKNOWN_KEY = "signed under a key this query does not accept (expired or foreign)"
    WRONG_CHALLENGE = "issued for another query, round, issuer or set of aggregators"
    BAD_SIGNATURE = "signature does not verify"


def _by_key_id(accepted: AcceptedKeys) -> dict[bytes, TokenPublicKey]:
    keys = [accepted] if isinstance(accepted, TokenPublicKey) else list(accepted)
    return {key.token_key_id: key for key in keys}


def _check(keys: dict[bytes, TokenPublicKey], token: bytes, challenge_digest: bytes) -> Verdict:
    try:
        decoded = Token.decode(token)
    except EncodingError:
        return Verdict.MALFORMED
    key = keys.get(decoded.token_key_id)
    if key is None:
        return Verdict.UNKNOWN_KEY
    if decoded.challenge_digest != challenge_digest:
        return Verdict.WRONG_CHALLENGE
    if not blind_rsa.verify(key.key, decoded.authenticator_input(), decoded.authenticator, VARIANT):
        return Verdict.BAD_SIGNATURE
    return Verdict.VALID


def check_tokens(
    public_key: AcceptedKeys, tokens: Sequence[bytes], challenge_digest: bytes
) -> list[Verdict]:
    """One verdict per token, in order; `public_key` may be several keys."""
    keys = _by_key_id(public_key)
    return [_check(keys, token, challenge_digest) for token in tokens]


def verify_tokens(
    public_key: AcceptedKeys, tokens: Sequence[bytes], challenge_digest: bytes
) -> list[bool]:
    """True for each token that is valid for the key (or one of the keys) and the challenge.

    Pure and CPU-bound (tens of microseconds a token, nearly all of it the RSA verification;
    `bench/tokens.py` measures it): call it off the event loop, through `asyncio.to_thread`
    or a process pool (the arguments pickle; a key as its SPKI).
    """
    return [v is Verdict.VALID for v in check_tokens(public_key, tokens, challenge_digest)]
