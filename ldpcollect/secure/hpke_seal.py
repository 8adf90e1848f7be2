"""HPKE base-mode Seal (RFC 9180, section 5.1.1) for DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
AES-128-GCM, with the ephemeral key derived from given key material.

`cryptography`'s HPKE draws its ephemeral key itself, so a sealed report cannot be
reproduced byte for byte. The conformance vectors (docs/device-protocol.md, "Sealing") state
the ephemeral input keying material `ikm_e` (32 bytes) instead, as RFC 9180's own test
vectors do: skE = DeriveKeyPair(ikm_e). Devices seal with fresh randomness through
`ldpcollect.secure.sealing`; this module exists so that a vector's bytes can be checked, and
what it seals opens with `cryptography` (tests/secure/test_hpke_seal.py).
"""

from __future__ import annotations

import hmac
from hashlib import sha256

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEM_ID = 0x0020
KDF_ID = 0x0001
AEAD_ID = 0x0001
IKM_SIZE = 32
_KEM_SUITE = b"KEM" + KEM_ID.to_bytes(2, "big")
_HPKE_SUITE = (
    b"HPKE" + KEM_ID.to_bytes(2, "big") + KDF_ID.to_bytes(2, "big") + AEAD_ID.to_bytes(2, "big")
)
_VERSION = b"HPKE-v1"
_MODE_BASE = 0x00


def _extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt or bytes(32), ikm, sha256).digest()


def _expand(prk: bytes, info: bytes, length: int) -> bytes:
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), sha256).digest()
        out += block
        counter += 1
    return out[:length]


def _labeled_extract(suite: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
    return _extract(salt, _VERSION + suite + label + ikm)


def _labeled_expand(suite: bytes, prk: bytes, label: bytes, info: bytes, length: int) -> bytes:
    labeled = length.to_bytes(2, "big") + _VERSION + suite + label + info
    return _expand(prk, labeled, length)


def derive_private_key(ikm: bytes) -> bytes:
    """DeriveKeyPair for X25519 (RFC 9180, section 7.1.3): the 32-byte private key."""
    prk = _labeled_extract(_KEM_SUITE, b"", b"dkp_prk", ikm)
    return _labeled_expand(_KEM_SUITE, prk, b"sk", b"", 32)


def seal_base(public_key: bytes, info: bytes, aad: bytes, plaintext: bytes, ikm_e: bytes) -> bytes:
    """enc (32 bytes) || AES-128-GCM ciphertext with tag, for recipient `public_key`."""
    if len(ikm_e) != IKM_SIZE:
        raise ValueError(f"ikm_e must be {IKM_SIZE} bytes, got {len(ikm_e)}")
    sk_e = X25519PrivateKey.from_private_bytes(derive_private_key(ikm_e))
    enc = sk_e.public_key().public_bytes_raw()
    dh = sk_e.exchange(X25519PublicKey.from_public_bytes(public_key))
    eae_prk = _labeled_extract(_KEM_SUITE, b"", b"eae_prk", dh)
    shared = _labeled_expand(_KEM_SUITE, eae_prk, b"shared_secret", enc + public_key, 32)
    psk_id_hash = _labeled_extract(_HPKE_SUITE, b"", b"psk_id_hash", b"")
    info_hash = _labeled_extract(_HPKE_SUITE, b"", b"info_hash", info)
    context = bytes([_MODE_BASE]) + psk_id_hash + info_hash
    secret = _labeled_extract(_HPKE_SUITE, shared, b"secret", b"")
    key = _labeled_expand(_HPKE_SUITE, secret, b"key", context, 16)
    nonce = _labeled_expand(_HPKE_SUITE, secret, b"base_nonce", context, 12)
    return enc + AESGCM(key).encrypt(nonce, plaintext, aad or None)
