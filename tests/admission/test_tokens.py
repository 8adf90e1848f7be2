"""Privacy Pass type 2: the published issuance and challenge vectors, and the refusals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ldpcollect.admission.errors import BlindSignatureError, EncodingError, UnknownKeyError
from ldpcollect.admission.token_key import TokenPublicKey, TokenSigningKey
from ldpcollect.admission.tokens import (
    TOKEN_LENGTH,
    Token,
    TokenChallenge,
    TokenRequest,
    TokenResponse,
    authenticator_input,
    finalize_token,
    request_token,
    sign_token_request,
    verify_token,
)
from tests.admission.conftest import ISSUANCE_VECTORS, load_vectors

CHALLENGE_VECTORS = load_vectors("privacypass-auth-scheme-challenges.json")


@pytest.mark.parametrize("v", ISSUANCE_VECTORS, ids=[f"vector{i + 1}" for i in range(5)])
def test_every_type2_issuance_vector_is_reproduced_byte_for_byte(
    v: dict[str, Any], signing_key: TokenSigningKey
) -> None:
    token_key = TokenPublicKey(bytes.fromhex(v["pkS"]))
    challenge = TokenChallenge.decode(bytes.fromhex(v["token_challenge"]))
    assert challenge.encode().hex() == v["token_challenge"]

    request, pending = request_token(
        token_key,
        challenge,
        nonce=bytes.fromhex(v["nonce"]),
        salt=bytes.fromhex(v["salt"]),
        r=int(v["blind"], 16),
    )
    assert request.encode().hex() == v["token_request"]
    assert TokenRequest.decode(request.encode()) == request
    response = sign_token_request(signing_key, request)
    assert response.encode().hex() == v["token_response"]
    token = finalize_token(pending, TokenResponse.decode(response.encode()))
    assert token.encode().hex() == v["token"]
    assert Token.decode(token.encode()) == token
    assert verify_token(token_key, token)


@pytest.mark.parametrize("v", CHALLENGE_VECTORS[:5], ids=[f"vector{i + 1}" for i in range(5)])
def test_every_auth_scheme_challenge_vector_gives_its_authenticator_input(
    v: dict[str, Any],
) -> None:
    origins = bytes.fromhex(v["origin_info"]).decode()
    challenge = TokenChallenge(
        issuer_name=bytes.fromhex(v["issuer_name"]).decode(),
        redemption_context=bytes.fromhex(v["redemption_context"]),
        origin_info=tuple(origins.split(",")) if origins else (),
        token_type=int(v["token_type"], 16),
    )
    assert TokenChallenge.decode(challenge.encode()) == challenge
    expected = authenticator_input(
        bytes.fromhex(v["nonce"]), challenge.digest(), bytes.fromhex(v["token_key_id"])
    )
    assert expected.hex() == v["token_authenticator_input"]


def test_the_greasing_vector_is_refused_as_an_unsupported_token_type() -> None:
    grease = bytes.fromhex(CHALLENGE_VECTORS[5]["token_authenticator_input"])
    with pytest.raises(EncodingError, match=r"must be 0x0002 .* got 0x0000"):
        Token.decode(grease)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"issuer_name": ""}, "non-empty printable ASCII"),
        ({"issuer_name": "user@issuer.example"}, "host or host:port"),
        ({"issuer_name": "issuer.exämple"}, "ASCII"),
        ({"redemption_context": bytes(16)}, "0 or 32 bytes, got 16"),
        ({"origin_info": ("a.example", "")}, "origin_info name"),
        ({"origin_info": ("a.example,b.example",)}, "host or host:port"),
        ({"token_type": 0x10000}, "16 bits"),
    ],
)
def test_bad_challenges_are_refused_with_the_field_named(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(EncodingError, match=message):
        TokenChallenge(**{"issuer_name": "issuer.example", **fields})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x02\x00", "truncated in issuer_name length"),
        (b"\x00\x02\x00\x01a\x05abcde\x00\x00", "0 or 32 bytes, got 5"),
        (b"\x00\x02\x00\x01a\x00\x00\x00\x00", "trailing bytes"),
        (b"\x00\x02\x00\x01\xff\x00\x00\x00", "ASCII"),
    ],
)
def test_bad_challenge_bytes_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(EncodingError, match=message):
        TokenChallenge.decode(data)


def test_bad_requests_responses_and_tokens_are_refused() -> None:
    with pytest.raises(EncodingError, match="TokenRequest must be 259 bytes, got 258"):
        TokenRequest.decode(bytes(258))
    with pytest.raises(EncodingError, match="must be 0x0002"):
        TokenRequest.decode(b"\x00\x01" + bytes(257))
    with pytest.raises(EncodingError, match="blind_sig must be 256 bytes"):
        TokenResponse.decode(bytes(255))
    with pytest.raises(EncodingError, match=f"Token must be {TOKEN_LENGTH} bytes"):
        Token.decode(b"\x00\x02" + bytes(TOKEN_LENGTH - 3))


def test_issuer_refuses_a_request_for_another_key(
    signing_key: TokenSigningKey, other_key: TokenSigningKey
) -> None:
    if signing_key.public.truncated_token_key_id == other_key.public.truncated_token_key_id:
        pytest.skip("the fresh key's truncated id collides with the vector key's (1 in 256)")
    request, _ = request_token(other_key.public, TokenChallenge("issuer.example"))
    with pytest.raises(UnknownKeyError, match="truncated key id"):
        sign_token_request(signing_key, request)


def test_client_refuses_a_response_that_does_not_unblind_to_a_signature(
    signing_key: TokenSigningKey,
) -> None:
    request, pending = request_token(signing_key.public, TokenChallenge("issuer.example"))
    response = sign_token_request(signing_key, request)
    tampered = TokenResponse(bytes([response.blind_sig[0] ^ 1]) + response.blind_sig[1:])
    with pytest.raises(BlindSignatureError, match="invalid signature"):
        finalize_token(pending, tampered)


def test_a_token_verifies_only_under_its_key_and_unaltered(
    signing_key: TokenSigningKey, other_key: TokenSigningKey
) -> None:
    request, pending = request_token(signing_key.public, TokenChallenge("issuer.example"))
    token = finalize_token(pending, sign_token_request(signing_key, request))
    assert verify_token(signing_key.public, token)
    assert not verify_token(other_key.public, token)
    assert not verify_token(signing_key.public, replace(token, nonce=bytes(32)))
    assert not verify_token(signing_key.public, replace(token, challenge_digest=bytes(32)))
