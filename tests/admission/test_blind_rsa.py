"""RFC 9474 blind RSA: the published vectors byte for byte, and the refusals."""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.admission import blind_rsa
from ldpcollect.admission.errors import BlindSignatureError
from ldpcollect.admission.pss import HASH_LENGTH, emsa_pss_encode, mgf1_sha384
from ldpcollect.admission.token_key import TokenSigningKey
from tests.admission.conftest import load_vectors

RFC9474 = load_vectors("rfc9474.json")


@functools.cache
def vector_key(p_hex: str) -> rsa.RSAPrivateKey:
    """The RSA-4096 key of the RFC 9474 vectors (all four share it; built once: checking the
    key's primes takes about a second)."""
    v = next(v for v in RFC9474 if v["p"] == p_hex)
    p, q, d = (int(v[k], 16) for k in ("p", "q", "d"))
    public = rsa.RSAPublicNumbers(int(v["e"], 16), int(v["n"], 16))
    return rsa.RSAPrivateNumbers(
        p,
        q,
        d,
        rsa.rsa_crt_dmp1(d, p),
        rsa.rsa_crt_dmq1(d, q),
        rsa.rsa_crt_iqmp(p, q),
        public,
    ).private_key()


VECTOR_KEY = vector_key(RFC9474[0]["p"])


@pytest.mark.parametrize("v", RFC9474, ids=[v["name"] for v in RFC9474])
def test_every_rfc9474_vector_is_reproduced_byte_for_byte(v: dict[str, Any]) -> None:
    key = vector_key(v["p"])
    public = key.public_key()
    n = public.public_numbers().n
    variant = blind_rsa.VARIANTS[v["name"]]
    assert variant.salt_length == int(v["sLen"], 16)
    prefix = bytes.fromhex(v["msg_prefix"]) if v["msg_prefix"] else None

    prepared = blind_rsa.prepare(variant, bytes.fromhex(v["msg"]), prefix=prefix)
    assert prepared.hex() == v["input_msg"]
    salt = bytes.fromhex(v["salt"])
    if "encoded_msg" in v:
        assert emsa_pss_encode(prepared, n.bit_length() - 1, salt).hex() == v["encoded_msg"]
    inv = int(v["inv"], 16)
    blinded = blind_rsa.blind(public, prepared, variant, salt=salt, r=pow(inv, -1, n))
    assert blinded.blinded_msg.hex() == v["blinded_msg"]
    assert blinded.inv == inv
    blind_sig = blind_rsa.blind_sign(key, blinded.blinded_msg)
    assert blind_sig.hex() == v["blind_sig"]
    sig = blind_rsa.finalize(public, prepared, blind_sig, blinded.inv, variant)
    assert sig.hex() == v["sig"]
    assert blind_rsa.verify(public, prepared, sig, variant)


@pytest.mark.parametrize("variant", blind_rsa.VARIANTS.values(), ids=list(blind_rsa.VARIANTS))
def test_fresh_key_round_trips_in_every_variant(
    variant: blind_rsa.Variant, other_key: TokenSigningKey
) -> None:
    key = other_key.private_key
    prepared = blind_rsa.prepare(variant, b"are you in cell 28?")
    blinded = blind_rsa.blind(key.public_key(), prepared, variant)
    sig = blind_rsa.finalize(
        key.public_key(),
        prepared,
        blind_rsa.blind_sign(key, blinded.blinded_msg),
        blinded.inv,
        variant,
    )
    assert blind_rsa.verify(key.public_key(), prepared, sig, variant)
    assert not blind_rsa.verify(key.public_key(), prepared + b"!", sig, variant)


def test_the_signer_sees_unrelated_blinded_messages_for_one_signature(
    signing_key: TokenSigningKey,
) -> None:
    """Two blindings of one message (same salt) look unrelated to the signer, yet unblind to
    the same signature: the signer's view carries nothing that survives into the signature."""
    key, variant = signing_key.private_key, blind_rsa.PSS_DETERMINISTIC
    salt = bytes(48)
    first = blind_rsa.blind(key.public_key(), b"token input", variant, salt=salt)
    second = blind_rsa.blind(key.public_key(), b"token input", variant, salt=salt)
    assert first.blinded_msg != second.blinded_msg
    sigs = {
        blind_rsa.finalize(
            key.public_key(),
            b"token input",
            blind_rsa.blind_sign(key, b.blinded_msg),
            b.inv,
            variant,
        )
        for b in (first, second)
    }
    assert len(sigs) == 1


def test_blind_sign_is_textbook_rsa_despite_crt_and_base_blinding(
    signing_key: TokenSigningKey,
) -> None:
    numbers = signing_key.private_key.private_numbers()
    n, d = numbers.public_numbers.n, numbers.d
    rng = random.Random(13)
    for _ in range(5):
        m = rng.randrange(2, n)
        s = blind_rsa.blind_sign(signing_key.private_key, m.to_bytes(256, "big"))
        assert int.from_bytes(s, "big") == pow(m, d, n)


def test_blind_sign_refuses_wrong_size_and_out_of_range_messages(
    signing_key: TokenSigningKey,
) -> None:
    key = signing_key.private_key
    with pytest.raises(BlindSignatureError, match="must be 256 bytes, got 255"):
        blind_rsa.blind_sign(key, bytes(255))
    with pytest.raises(BlindSignatureError, match="out of range"):
        blind_rsa.blind_sign(key, b"\xff" * 256)


def test_finalize_refuses_a_signature_from_another_key(
    signing_key: TokenSigningKey, other_key: TokenSigningKey
) -> None:
    # The keys are fresh each run: sign with the larger modulus, so that the blinded message
    # (below the smaller one) is always in range for the wrong key (else BlindSign itself
    # refuses it, in about half the runs, before finalize is reached).
    mine, theirs = sorted(
        (signing_key.private_key, other_key.private_key),
        key=lambda k: k.public_key().public_numbers().n,
    )
    variant, public = blind_rsa.PSS_DETERMINISTIC, mine.public_key()
    blinded = blind_rsa.blind(public, b"msg", variant)
    wrong = blind_rsa.blind_sign(theirs, blinded.blinded_msg)
    # Its signature is below the larger modulus only: above this n about half the time.
    with pytest.raises(BlindSignatureError, match=r"invalid signature|not below n"):
        blind_rsa.finalize(public, b"msg", wrong, blinded.inv, variant)
    with pytest.raises(BlindSignatureError, match="must be 256 bytes"):
        blind_rsa.finalize(public, b"msg", wrong[1:], blinded.inv, variant)
    with pytest.raises(BlindSignatureError, match="not below n"):
        blind_rsa.finalize(public, b"msg", b"\xff" * 256, blinded.inv, variant)


def test_a_pss_signature_is_not_a_psszero_signature(signing_key: TokenSigningKey) -> None:
    key = signing_key.private_key
    pss, zero = blind_rsa.PSS_DETERMINISTIC, blind_rsa.PSSZERO_DETERMINISTIC
    blinded = blind_rsa.blind(key.public_key(), b"msg", pss)
    sig = blind_rsa.finalize(
        key.public_key(), b"msg", blind_rsa.blind_sign(key, blinded.blinded_msg), blinded.inv, pss
    )
    assert not blind_rsa.verify(key.public_key(), b"msg", sig, zero)


def test_prepare_and_blind_refuse_bad_prefixes_and_salts(signing_key: TokenSigningKey) -> None:
    public = signing_key.private_key.public_key()
    with pytest.raises(BlindSignatureError, match="takes no message prefix"):
        blind_rsa.prepare(blind_rsa.PSS_DETERMINISTIC, b"m", prefix=bytes(32))
    with pytest.raises(BlindSignatureError, match="must be 32 bytes, got 31"):
        blind_rsa.prepare(blind_rsa.PSS_RANDOMIZED, b"m", prefix=bytes(31))
    assert len(blind_rsa.prepare(blind_rsa.PSS_RANDOMIZED, b"m")) == 33
    with pytest.raises(BlindSignatureError, match="needs a 48-byte salt, got 47"):
        blind_rsa.blind(public, b"m", blind_rsa.PSS_DETERMINISTIC, salt=bytes(47))
    factor = signing_key.private_key.private_numbers().p
    with pytest.raises(BlindSignatureError, match="not invertible"):
        blind_rsa.blind(public, b"m", blind_rsa.PSS_DETERMINISTIC, r=factor)


def test_the_blinding_inverse_stays_out_of_reprs(signing_key: TokenSigningKey) -> None:
    blinded = blind_rsa.blind(
        signing_key.private_key.public_key(), b"m", blind_rsa.PSS_DETERMINISTIC
    )
    assert str(blinded.inv) not in repr(blinded)


@settings(max_examples=20, deadline=None)
@given(message=st.binary(max_size=200))
def test_our_pss_encoding_is_openssls_for_the_salt_it_chose(message: bytes) -> None:
    """OpenSSL signs with a salt of its choosing; opening its signature with the public key
    gives its encoded message, from which the salt can be read back. Encoding the message
    ourselves with that salt must give the same bytes."""
    key = VECTOR_KEY
    numbers = key.private_numbers().public_numbers
    sig = key.sign(message, blind_rsa.pss_padding(blind_rsa.PSS_DETERMINISTIC), hashes.SHA384())
    k = len(sig)
    em = pow(int.from_bytes(sig, "big"), numbers.e, numbers.n).to_bytes(k, "big")
    masked_db, h = em[: k - HASH_LENGTH - 1], em[k - HASH_LENGTH - 1 : -1]
    db = bytes(a ^ b for a, b in zip(masked_db, mgf1_sha384(h, len(masked_db)), strict=True))
    salt = db[-48:]
    assert emsa_pss_encode(message, numbers.n.bit_length() - 1, salt) == em
