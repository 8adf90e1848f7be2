"""EMSA-PSS encoding and MGF1 (RFC 8017, sections 9.1.1 and B.2.1) with SHA-384.

Blind RSA (RFC 9474) encodes the message before blinding it, so the encoding has to be ours:
a signer holding only the private key never sees the message. Verification of the finished
signature is left to `cryptography` (an independent implementation of the same encoding).
"""

from __future__ import annotations

import hashlib
import secrets

from ldpcollect.admission.errors import BlindSignatureError

HASH_LENGTH = 48  # SHA-384 output, in bytes


def sha384(data: bytes) -> bytes:
    return hashlib.sha384(data).digest()


def mgf1_sha384(seed: bytes, length: int) -> bytes:
    """MGF1 with SHA-384: the first `length` bytes of H(seed || 0) || H(seed || 1) || ..."""
    blocks = -(-length // HASH_LENGTH)
    mask = b"".join(sha384(seed + counter.to_bytes(4, "big")) for counter in range(blocks))
    return mask[:length]


def emsa_pss_encode(message: bytes, em_bits: int, salt: bytes) -> bytes:
    """EM = maskedDB || H || 0xbc for `message`, `em_bits` long (RSASSA-PSS uses the modulus
    length in bits minus one), with the given salt (its length is the scheme's sLen)."""
    em_length = -(-em_bits // 8)
    if em_length < HASH_LENGTH + len(salt) + 2:
        raise BlindSignatureError(
            f"encoding error: {em_bits}-bit encoding cannot hold a {len(salt)}-byte salt"
        )
    m_hash = sha384(message)
    h = sha384(bytes(8) + m_hash + salt)
    db = bytes(em_length - len(salt) - HASH_LENGTH - 2) + b"\x01" + salt
    masked = bytearray(a ^ b for a, b in zip(db, mgf1_sha384(h, len(db)), strict=True))
    masked[0] &= 0xFF >> (8 * em_length - em_bits)
    return bytes(masked) + h + b"\xbc"


def random_salt(length: int) -> bytes:
    return secrets.token_bytes(length)
