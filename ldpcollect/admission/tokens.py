"""Privacy Pass token type 0x0002 (Blind RSA, 2048-bit): challenge, request, response, token.

Wire structures of RFC 9577 (TokenChallenge, Token) and RFC 9578 section 6 (TokenRequest,
TokenResponse), and the three issuance steps: the client's request, the issuer's blind
signature, the client's finalization; then verification, which needs only the public key.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from ldpcollect.admission import blind_rsa
from ldpcollect.admission.errors import BlindSignatureError, EncodingError, UnknownKeyError
from ldpcollect.admission.token_key import TokenPublicKey, TokenSigningKey

TOKEN_TYPE = 0x0002
VARIANT = blind_rsa.PSS_DETERMINISTIC
NONCE_LENGTH = 32
DIGEST_LENGTH = 32  # SHA-256 of the TokenChallenge
NID = 32  # token_key_id
NK = 256  # blinded message, blind signature and authenticator
REDEMPTION_CONTEXT_LENGTHS = (0, 32)
TOKEN_LENGTH = 2 + NONCE_LENGTH + DIGEST_LENGTH + NID + NK
# Where each Token field starts (the authenticator's input is everything before it).
NONCE_AT = 2
DIGEST_AT = NONCE_AT + NONCE_LENGTH
KEY_ID_AT = DIGEST_AT + DIGEST_LENGTH
AUTHENTICATOR_AT = KEY_ID_AT + NID


def _check_length(what: str, value: bytes, length: int) -> None:
    if len(value) != length:
        raise EncodingError(f"{what} must be {length} bytes, got {len(value)}")


def _check_token_type(what: str, token_type: int) -> None:
    if token_type != TOKEN_TYPE:
        raise EncodingError(
            f"{what} token_type must be 0x{TOKEN_TYPE:04x} (Blind RSA 2048), got 0x{token_type:04x}"
        )


def _check_server_name(what: str, name: str) -> None:
    """A URI authority without userinfo (host or host:port), as the auth scheme requires."""
    if not name or not name.isascii() or not name.isprintable():
        raise EncodingError(f"{what} must be a non-empty printable ASCII server name, got {name!r}")
    if any(c in name for c in "@, /"):
        raise EncodingError(f"{what} must be a host or host:port, got {name!r}")


@dataclass(frozen=True)
class TokenChallenge:
    """What a redeemer asks tokens to be bound to (RFC 9577 section 2.1.1)."""

    issuer_name: str
    redemption_context: bytes = b""
    origin_info: tuple[str, ...] = ()
    token_type: int = TOKEN_TYPE

    def __post_init__(self) -> None:
        if not 0 <= self.token_type <= 0xFFFF:
            raise EncodingError(f"token_type must fit in 16 bits, got {self.token_type}")
        _check_server_name("issuer_name", self.issuer_name)
        if len(self.issuer_name) > 0xFFFF:
            raise EncodingError("issuer_name must be at most 65535 bytes")
        if len(self.redemption_context) not in REDEMPTION_CONTEXT_LENGTHS:
            raise EncodingError(
                f"redemption_context must be 0 or 32 bytes, got {len(self.redemption_context)}"
            )
        for name in self.origin_info:
            _check_server_name("each origin_info name", name)
        if len(",".join(self.origin_info)) > 0xFFFF:
            raise EncodingError("origin_info must be at most 65535 bytes")

    def encode(self) -> bytes:
        issuer = self.issuer_name.encode("ascii")
        origins = ",".join(self.origin_info).encode("ascii")
        return (
            self.token_type.to_bytes(2, "big")
            + len(issuer).to_bytes(2, "big")
            + issuer
            + bytes([len(self.redemption_context)])
            + self.redemption_context
            + len(origins).to_bytes(2, "big")
            + origins
        )

    def digest(self) -> bytes:
        """SHA-256 of the encoding: the challenge_digest a token carries."""
        return hashlib.sha256(self.encode()).digest()

    @classmethod
    def decode(cls, data: bytes) -> TokenChallenge:
        def take(pos: int, n: int, what: str) -> bytes:
            if pos + n > len(data):
                raise EncodingError(f"TokenChallenge truncated in {what}")
            return data[pos : pos + n]

        token_type = int.from_bytes(take(0, 2, "token_type"), "big")
        n_issuer = int.from_bytes(take(2, 2, "issuer_name length"), "big")
        issuer = take(4, n_issuer, "issuer_name")
        pos = 4 + n_issuer
        n_context = take(pos, 1, "redemption_context length")[0]
        context = take(pos + 1, n_context, "redemption_context")
        pos += 1 + n_context
        n_origins = int.from_bytes(take(pos, 2, "origin_info length"), "big")
        origins = take(pos + 2, n_origins, "origin_info")
        if pos + 2 + n_origins != len(data):
            raise EncodingError("TokenChallenge has trailing bytes")
        try:
            issuer_name, origin_text = issuer.decode("ascii"), origins.decode("ascii")
        except UnicodeDecodeError:
            raise EncodingError("TokenChallenge names must be ASCII") from None
        return cls(
            issuer_name=issuer_name,
            redemption_context=context,
            origin_info=tuple(origin_text.split(",")) if origin_text else (),
            token_type=token_type,
        )


@dataclass(frozen=True)
class TokenRequest:
    """Client to issuer: a blinded token input and the last byte of the key id."""

    truncated_token_key_id: int
    blinded_msg: bytes
    token_type: int = TOKEN_TYPE

    def __post_init__(self) -> None:
        _check_token_type("TokenRequest", self.token_type)
        if not 0 <= self.truncated_token_key_id <= 0xFF:
            raise EncodingError("truncated_token_key_id must be one byte")
        _check_length("TokenRequest blinded_msg", self.blinded_msg, NK)

    def encode(self) -> bytes:
        return (
            self.token_type.to_bytes(2, "big")
            + bytes([self.truncated_token_key_id])
            + self.blinded_msg
        )

    @classmethod
    def decode(cls, data: bytes) -> TokenRequest:
        _check_length("TokenRequest", data, 3 + NK)
        return cls(
            token_type=int.from_bytes(data[:2], "big"),
            truncated_token_key_id=data[2],
            blinded_msg=data[3:],
        )


@dataclass(frozen=True)
class TokenResponse:
    """Issuer to client: the blind signature."""

    blind_sig: bytes

    def __post_init__(self) -> None:
        _check_length("TokenResponse blind_sig", self.blind_sig, NK)

    def encode(self) -> bytes:
        return self.blind_sig

    @classmethod
    def decode(cls, data: bytes) -> TokenResponse:
        return cls(data)


def authenticator_input(nonce: bytes, challenge_digest: bytes, token_key_id: bytes) -> bytes:
    """token_type || nonce || challenge_digest || token_key_id: the message the issuer signs."""
    return TOKEN_TYPE.to_bytes(2, "big") + nonce + challenge_digest + token_key_id


@dataclass(frozen=True)
class Token:
    """A finished token (RFC 9577 section 2.2): of issuance it keeps only the key id and a
    signature over the client's own fields."""

    nonce: bytes
    challenge_digest: bytes
    token_key_id: bytes
    authenticator: bytes
    token_type: int = TOKEN_TYPE

    def __post_init__(self) -> None:
        _check_token_type("Token", self.token_type)
        _check_length("Token nonce", self.nonce, NONCE_LENGTH)
        _check_length("Token challenge_digest", self.challenge_digest, DIGEST_LENGTH)
        _check_length("Token token_key_id", self.token_key_id, NID)
        _check_length("Token authenticator", self.authenticator, NK)

    def authenticator_input(self) -> bytes:
        return authenticator_input(self.nonce, self.challenge_digest, self.token_key_id)

    def encode(self) -> bytes:
        return self.authenticator_input() + self.authenticator

    @classmethod
    def decode(cls, data: bytes) -> Token:
        if len(data) >= 2:
            _check_token_type("Token", int.from_bytes(data[:2], "big"))
        _check_length("Token", data, TOKEN_LENGTH)
        return cls(
            nonce=data[NONCE_AT:DIGEST_AT],
            challenge_digest=data[DIGEST_AT:KEY_ID_AT],
            token_key_id=data[KEY_ID_AT:AUTHENTICATOR_AT],
            authenticator=data[AUTHENTICATOR_AT:],
        )


@dataclass(frozen=True)
class PendingToken:
    """What the client keeps between sending its TokenRequest and finalizing the response."""

    token_key: TokenPublicKey
    nonce: bytes
    challenge_digest: bytes
    inv: int = field(repr=False)

    def token_input(self) -> bytes:
        return authenticator_input(self.nonce, self.challenge_digest, self.token_key.token_key_id)


def request_token(
    token_key: TokenPublicKey,
    challenge: TokenChallenge,
    *,
    nonce: bytes | None = None,
    salt: bytes | None = None,
    r: int | None = None,
) -> tuple[TokenRequest, PendingToken]:
    """The client's first step: a fresh nonce, blinded. `nonce`, `salt` and the blinding
    factor `r` are drawn fresh unless given (test vectors give them)."""
    _check_token_type("TokenChallenge", challenge.token_type)
    if nonce is None:
        nonce = secrets.token_bytes(NONCE_LENGTH)
    _check_length("nonce", nonce, NONCE_LENGTH)
    digest = challenge.digest()
    message = authenticator_input(nonce, digest, token_key.token_key_id)
    blinded = blind_rsa.blind(token_key.key, message, VARIANT, salt=salt, r=r)
    request = TokenRequest(token_key.truncated_token_key_id, blinded.blinded_msg)
    return request, PendingToken(token_key, nonce, digest, blinded.inv)


def sign_token_request(signing_key: TokenSigningKey, request: TokenRequest) -> TokenResponse:
    """The issuer's step: checks the request names this key, then signs blindly."""
    return sign_token_requests(signing_key, [request])[0]


def sign_token_requests(
    signing_key: TokenSigningKey, requests: Sequence[TokenRequest]
) -> list[TokenResponse]:
    """`sign_token_request` for many requests, signed in one call to OpenSSL (RSA's private
    operation with the CRT, base blinding and a check of each result with the public key; the
    interpreter lock released meanwhile). `blind_rsa.blind_sign` is the Python reference."""
    expected = signing_key.public.truncated_token_key_id
    modulus = signing_key.public.key.public_numbers().n
    for request in requests:
        if request.truncated_token_key_id != expected:
            raise UnknownKeyError(
                f"TokenRequest names truncated key id 0x{request.truncated_token_key_id:02x}; "
                f"this issuer's key is 0x{expected:02x}"
            )
        if int.from_bytes(request.blinded_msg, "big") >= modulus:
            raise BlindSignatureError("message representative out of range: not below n")
    signed = signing_key.native.sign_raw([r.blinded_msg for r in requests])
    if any(s is None for s in signed):
        raise BlindSignatureError("signing failure: OpenSSL refused a blinded message")
    return [TokenResponse(s) for s in signed if s is not None]


def finalize_token(pending: PendingToken, response: TokenResponse) -> Token:
    """The client's last step: unblind and check; a bad response raises BlindSignatureError."""
    authenticator = blind_rsa.finalize(
        pending.token_key.key, pending.token_input(), response.blind_sig, pending.inv, VARIANT
    )
    return Token(
        pending.nonce, pending.challenge_digest, pending.token_key.token_key_id, authenticator
    )


def verify_token(token_key: TokenPublicKey, token: Token) -> bool:
    """True when the token is signed by `token_key` (it does not check which challenge)."""
    if token.token_key_id != token_key.token_key_id:
        return False
    return blind_rsa.verify(
        token_key.key, token.authenticator_input(), token.authenticator, VARIANT
    )
