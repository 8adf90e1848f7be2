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
from ldpcollect.admission.tokens import (
    AUTHENTICATOR_AT,
    DIGEST_AT,
    KEY_ID_AT,
    TOKEN_LENGTH,
    TOKEN_TYPE,
    VARIANT,
    Token,
)

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
    """One token checked in Python (`blind_rsa.verify`): the reference of `check_tokens`."""
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


def check_tokens_python(
    public_key: AcceptedKeys, tokens: Sequence[bytes], challenge_digest: bytes
) -> list[Verdict]:
    """`check_tokens` one token at a time through `cryptography` (the reference)."""
    keys = _by_key_id(public_key)
    return [_check(keys, token, challenge_digest) for token in tokens]


_TYPE = TOKEN_TYPE.to_bytes(2, "big")


def check_tokens(
    public_key: AcceptedKeys, tokens: Sequence[bytes], challenge_digest: bytes
) -> list[Verdict]:
    """One verdict per token, in order; `public_key` may be several keys.

    The fields are sliced out of each token, and the signatures under each key are checked in
    one call to OpenSSL (RSASSA-PSS with SHA-384, the interpreter lock released meanwhile):
    the same verdicts as `check_tokens_python`."""
    keys = _by_key_id(public_key)
    verdicts: list[Verdict] = []
    signed: dict[bytes, list[int]] = {}
    for i, token in enumerate(tokens):
        if len(token) != TOKEN_LENGTH or token[:2] != _TYPE:
            verdicts.append(Verdict.MALFORMED)
        elif token[KEY_ID_AT:AUTHENTICATOR_AT] not in keys:
            verdicts.append(Verdict.UNKNOWN_KEY)
        elif token[DIGEST_AT:KEY_ID_AT] != challenge_digest:
            verdicts.append(Verdict.WRONG_CHALLENGE)
        else:
            verdicts.append(Verdict.VALID)
            signed.setdefault(token[KEY_ID_AT:AUTHENTICATOR_AT], []).append(i)
    for key_id, positions in signed.items():
        picked = [tokens[i] for i in positions]
        valid = keys[key_id].native.verify_pss_sha384(
            [t[:AUTHENTICATOR_AT] for t in picked],
            [t[AUTHENTICATOR_AT:] for t in picked],
            VARIANT.salt_length,
        )
        for i, ok in zip(positions, valid, strict=True):
            if not ok:
                verdicts[i] = Verdict.BAD_SIGNATURE
    return verdicts


def verify_tokens(
    public_key: AcceptedKeys, tokens: Sequence[bytes], challenge_digest: bytes
) -> list[bool]:
    """True for each token that is valid for the key (or one of the keys) and the challenge.

    Pure and CPU-bound (tens of microseconds a token, nearly all of it the RSA verification;
    `bench/tokens.py` measures it): call it off the event loop, through `asyncio.to_thread`
    or a process pool (the arguments pickle; a key as its SPKI).
    """
    return [v is Verdict.VALID for v in check_tokens(public_key, tokens, challenge_digest)]
