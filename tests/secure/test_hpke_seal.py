"""The conformance vectors' HPKE seal with given ephemeral key material (RFC 9180 base mode)
opens with `cryptography`'s HPKE, and the same material gives the same bytes."""

from __future__ import annotations

import secrets

from ldpcollect.secure.hpke_seal import derive_private_key, seal_base
from ldpcollect.secure.sealing import SUITE, generate_key_pair


def test_a_seal_from_given_material_opens_with_cryptography() -> None:
    key = generate_key_pair(3)
    for size in (0, 1, 2448):
        ikm, info, plaintext = (
            secrets.token_bytes(32),
            secrets.token_bytes(40),
            secrets.token_bytes(size),
        )
        sealed = seal_base(key.config.public_key, info, b"", plaintext, ikm)
        assert sealed == seal_base(key.config.public_key, info, b"", plaintext, ikm)
        assert SUITE.decrypt(sealed, key.private_key, info=info) == plaintext
        assert len(sealed) == 32 + size + 16


def test_derive_key_pair_matches_rfc_9180_a_1_1() -> None:
    # RFC 9180, appendix A.1.1 (DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, base).
    ikm_e = bytes.fromhex("7268600d403fce431561aef583ee1613527cff655c1343f29812e66706df3234")
    sk_e = bytes.fromhex("52c4a758a802cd8b936eceea314432798d5baf2d7e9235dc084ab1b9cfa2f736")
    assert derive_private_key(ikm_e) == sk_e
