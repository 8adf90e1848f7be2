"""Token keys of type 2: the issuer's RSA-2048 key, published as an RSASSA-PSS SPKI, and its id.

The key id is SHA-256 of the DER SubjectPublicKeyInfo whose algorithm is id-RSASSA-PSS with
SHA-384, MGF1-SHA-384 and a 48-byte salt (RFC 9578 section 6.5). `cryptography` writes RSA
public keys only under the rsaEncryption OID, so the PSS wrapper is built here; the key inside
is `cryptography`'s PKCS#1 encoding.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ldpcollect.admission._native_rsa import RsaKey
from ldpcollect.admission.errors import EncodingError

MODULUS_BITS = 2048
PUBLIC_EXPONENT = 65537

# AlgorithmIdentifier { id-RSASSA-PSS, RSASSA-PSS-params {
#   [0] hashAlgorithm sha384, [1] maskGenAlgorithm mgf1(sha384), [2] saltLength 48 } }
PSS_SHA384_ALGORITHM = bytes.fromhex(
    "303d06092a864886f70d01010a3030"
    "a00d300b0609608648016503040202"
    "a11a301806092a864886f70d010108300b0609608648016503040202"
    "a203020130"
)
_SEQUENCE, _BIT_STRING = 0x30, 0x03


def _der(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        length = bytes([n])
    else:
        size = (n.bit_length() + 7) // 8
        length = bytes([0x80 | size]) + n.to_bytes(size, "big")
    return bytes([tag]) + length + content


def encode_spki(public_key: rsa.RSAPublicKey) -> bytes:
    """The DER SPKI of `public_key` under id-RSASSA-PSS (the published token-key encoding)."""
    pkcs1 = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.PKCS1)
    return _der(_SEQUENCE, PSS_SHA384_ALGORITHM + _der(_BIT_STRING, b"\x00" + pkcs1))


def _read_tlv(data: bytes, pos: int, tag: int) -> tuple[bytes, int]:
    """The content of the DER element of type `tag` at `pos`, and the position after it."""
    if pos + 2 > len(data) or data[pos] != tag:
        raise EncodingError(f"token key: expected DER tag 0x{tag:02x} at byte {pos}")
    length, pos = data[pos + 1], pos + 2
    if length & 0x80:
        size = length & 0x7F
        length, pos = int.from_bytes(data[pos : pos + size], "big"), pos + size
    if pos + length > len(data):
        raise EncodingError("token key: DER element runs past the end of the data")
    return data[pos : pos + length], pos + length


def decode_spki(data: bytes) -> rsa.RSAPublicKey:
    """The RSA-2048 key in an RSASSA-PSS SPKI; anything else is an EncodingError."""
    spki, end = _read_tlv(data, 0, _SEQUENCE)
    if end != len(data):
        raise EncodingError("token key: trailing bytes after the SubjectPublicKeyInfo")
    if not spki.startswith(PSS_SHA384_ALGORITHM):
        raise EncodingError(
            "token key must use the id-RSASSA-PSS algorithm with SHA-384, MGF1-SHA-384 and a "
            "48-byte salt"
        )
    bits, end = _read_tlv(spki, len(PSS_SHA384_ALGORITHM), _BIT_STRING)
    if end != len(spki) or not bits.startswith(b"\x00"):
        raise EncodingError("token key: malformed subjectPublicKey BIT STRING")
    try:
        key = serialization.load_der_public_key(bits[1:])
    except ValueError:
        raise EncodingError("token key: the subjectPublicKey is not an RSAPublicKey") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise EncodingError("token key: the subjectPublicKey is not an RSA key")
    if key.key_size != MODULUS_BITS:
        raise EncodingError(f"token key must be RSA-{MODULUS_BITS}, got RSA-{key.key_size}")
    if encode_spki(key) != data:  # e.g. a non-minimal length or integer encoding
        raise EncodingError("token key: not the canonical DER encoding")
    return key


@dataclass(frozen=True)
class TokenPublicKey:
    """A published token key: what clients blind against and redeemers verify with."""

    spki: bytes
    token_key_id: bytes = field(init=False)
    key: rsa.RSAPublicKey = field(init=False, repr=False, compare=False)
    # The same key held by OpenSSL for batched verification (`verification.check_tokens`).
    native: RsaKey = field(init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        return f"TokenPublicKey(token_key_id={self.token_key_id.hex()})"

    def __post_init__(self) -> None:
        key = decode_spki(self.spki)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "token_key_id", hashlib.sha256(self.spki).digest())
        der = key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        object.__setattr__(self, "native", RsaKey(der, private=False))

    @classmethod
    def from_public_key(cls, public_key: rsa.RSAPublicKey) -> TokenPublicKey:
        return cls(encode_spki(public_key))

    @property
    def truncated_token_key_id(self) -> int:
        """The last byte of the key id: all a TokenRequest carries (so it cannot tag a client)."""
        return self.token_key_id[-1]

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable as its SPKI bytes, so verification can run in a process pool.
        return (TokenPublicKey, (self.spki,))


@dataclass(frozen=True)
class TokenSigningKey:
    """The issuer's private token key with its published half."""

    private_key: rsa.RSAPrivateKey = field(repr=False)
    public: TokenPublicKey = field(init=False)
    # The same key held by OpenSSL, which signs (`tokens.sign_token_requests`).
    native: RsaKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.private_key.key_size != MODULUS_BITS:
            raise EncodingError(
                f"token key must be RSA-{MODULUS_BITS}, got RSA-{self.private_key.key_size}"
            )
        public = TokenPublicKey.from_public_key(self.private_key.public_key())
        object.__setattr__(self, "public", public)
        der = self.private_key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        object.__setattr__(self, "native", RsaKey(der, private=True))

    @classmethod
    def generate(cls) -> TokenSigningKey:
        return cls(rsa.generate_private_key(PUBLIC_EXPONENT, MODULUS_BITS))

    @classmethod
    def from_pem(cls, pem: bytes) -> TokenSigningKey:
        """Load a PKCS#8 (or PKCS#1) PEM private key, unencrypted."""
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise EncodingError("token signing key must be an RSA private key")
        return cls(key)

    def to_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
