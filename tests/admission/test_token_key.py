"""Token keys: the RSASSA-PSS SPKI encoding and the key id of RFC 9578 section 6.5."""

from __future__ import annotations

import hashlib
import pickle

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ldpcollect.admission.errors import EncodingError
from ldpcollect.admission.token_key import TokenPublicKey, TokenSigningKey
from tests.admission.conftest import ISSUANCE_VECTORS

VECTOR_SPKI = bytes.fromhex(ISSUANCE_VECTORS[0]["pkS"])


def test_our_spki_of_the_vector_key_is_the_published_pks(signing_key: TokenSigningKey) -> None:
    assert signing_key.public.spki == VECTOR_SPKI
    assert signing_key.public == TokenPublicKey(VECTOR_SPKI)


def test_key_id_is_sha256_of_the_spki_and_matches_the_vector_tokens(
    signing_key: TokenSigningKey,
) -> None:
    key_id = signing_key.public.token_key_id
    assert key_id == hashlib.sha256(VECTOR_SPKI).digest()
    for v in ISSUANCE_VECTORS:  # the key id sits after type, nonce and challenge digest
        assert bytes.fromhex(v["token"])[66:98] == key_id
    assert signing_key.public.truncated_token_key_id == key_id[-1]


def test_a_standard_rsa_encryption_spki_is_refused(signing_key: TokenSigningKey) -> None:
    plain = signing_key.private_key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(EncodingError, match="id-RSASSA-PSS"):
        TokenPublicKey(plain)


@pytest.mark.parametrize(
    ("spki", "message"),
    [
        (VECTOR_SPKI + b"\x00", "trailing bytes"),
        (VECTOR_SPKI[:-1], "runs past the end"),
        (b"", "expected DER tag 0x30"),
        (VECTOR_SPKI[:67] + b"\x04" + VECTOR_SPKI[68:], "expected DER tag 0x03"),
        (VECTOR_SPKI[:71] + b"\x01" + VECTOR_SPKI[72:], "malformed subjectPublicKey"),
    ],
    ids=["trailing", "truncated", "empty", "not-bit-string", "unused-bits"],
)
def test_malformed_spkis_are_refused_with_what_is_wrong(spki: bytes, message: str) -> None:
    with pytest.raises(EncodingError, match=message):
        TokenPublicKey(spki)


def test_keys_other_than_rsa_2048_are_refused() -> None:
    small = rsa.generate_private_key(65537, 1024)
    with pytest.raises(EncodingError, match="RSA-2048, got RSA-1024"):
        TokenSigningKey(small)
    with pytest.raises(EncodingError, match="RSA-2048, got RSA-1024"):
        TokenPublicKey.from_public_key(small.public_key())


def test_public_key_pickles_as_its_spki_for_process_pools(signing_key: TokenSigningKey) -> None:
    copy = pickle.loads(pickle.dumps(signing_key.public))
    assert copy == signing_key.public
    assert copy.key.public_numbers() == signing_key.public.key.public_numbers()


def test_signing_key_round_trips_through_pem_and_hides_its_secret(
    signing_key: TokenSigningKey,
) -> None:
    assert TokenSigningKey.from_pem(signing_key.to_pem()).public == signing_key.public
    assert "PRIVATE" not in repr(signing_key)
    assert signing_key.public.token_key_id.hex() in repr(signing_key)


def test_cryptography_reads_our_encoding_of_a_fresh_key(other_key: TokenSigningKey) -> None:
    """An independent parser (OpenSSL's, via `cryptography`) agrees on the key inside."""
    parsed = serialization.load_der_public_key(other_key.public.spki)
    assert isinstance(parsed, rsa.RSAPublicKey)
    assert parsed.public_numbers() == other_key.private_key.public_key().public_numbers()
