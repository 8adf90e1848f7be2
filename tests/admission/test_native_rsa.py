"""The compiled token kernels (ldpcollect/admission/_native_rsa.c, on OpenSSL) against the
Python reference: blind signatures equal `blind_rsa.blind_sign`'s on random blinded messages
and on the RFC 9578 vectors, and batched verdicts equal the one-token-at-a-time ones on
random tokens, corrupted or not. Hypothesis runs derandomized under CI=true."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.admission import _native_rsa, blind_rsa
from ldpcollect.admission.errors import BlindSignatureError
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import (
    TokenRequest,
    TokenResponse,
    finalize_token,
    request_token,
    sign_token_request,
    sign_token_requests,
)
from ldpcollect.admission.verification import check_tokens, check_tokens_python
from tests.admission.conftest import ISSUANCE_VECTORS

CHALLENGES = [query_challenge("issuer.test", "q", r, ["agg.test"]) for r in (1, 2)]


def test_issuance_and_verification_run_the_compiled_module(signing_key: TokenSigningKey) -> None:
    """CI must not pass on a Python fallback: the extension is built and the keys use it."""
    assert Path(_native_rsa.__file__ or "").suffix == ".so"
    assert isinstance(signing_key.native, _native_rsa.RsaKey)
    assert isinstance(signing_key.public.native, _native_rsa.RsaKey)
    assert _native_rsa.openssl_version().startswith("OpenSSL 3")


@pytest.mark.parametrize("vector", ISSUANCE_VECTORS, ids=range(len(ISSUANCE_VECTORS)))
def test_openssl_signs_the_rfc_9578_vectors(
    signing_key: TokenSigningKey, vector: dict[str, str]
) -> None:
    request = TokenRequest.decode(bytes.fromhex(vector["token_request"]))
    assert sign_token_request(signing_key, request).encode() == bytes.fromhex(
        vector["token_response"]
    )


@settings(max_examples=60, deadline=None)
@given(
    messages=st.lists(st.integers(0, 2**2048 - 1), min_size=1, max_size=6),
    mine=st.booleans(),
)
def test_blind_signatures_equal_the_python_reference(
    signing_key: TokenSigningKey, other_key: TokenSigningKey, messages: list[int], mine: bool
) -> None:
    key = signing_key if mine else other_key
    n = key.public.key.public_numbers().n
    blinded = [(m % n).to_bytes(256, "big") for m in messages]
    assert key.native.sign_raw(blinded) == [
        blind_rsa.blind_sign(key.private_key, b) for b in blinded
    ]


def test_a_blinded_message_not_below_the_modulus_is_refused(signing_key: TokenSigningKey) -> None:
    n = signing_key.public.key.public_numbers().n
    too_big = TokenRequest(signing_key.public.truncated_token_key_id, n.to_bytes(256, "big"))
    with pytest.raises(BlindSignatureError, match="not below n"):
        sign_token_requests(signing_key, [too_big])
    assert signing_key.native.sign_raw([n.to_bytes(256, "big"), b"short"]) == [None, None]
    with pytest.raises(ValueError, match="public key cannot sign"):
        signing_key.public.native.sign_raw([bytes(256)])


@pytest.fixture(scope="module")
def issued(signing_key: TokenSigningKey, other_key: TokenSigningKey) -> list[bytes]:
    tokens = []
    for key in (signing_key, other_key):
        for challenge in CHALLENGES:
            pairs = [request_token(key.public, challenge) for _ in range(3)]
            responses = sign_token_requests(key, [request for request, _ in pairs])
            tokens += [
                finalize_token(pending, TokenResponse(response.blind_sig)).encode()
                for (_, pending), response in zip(pairs, responses, strict=True)
            ]
    return tokens


@settings(max_examples=150, deadline=None)
@given(data=st.data(), both_keys=st.booleans())
def test_batched_verdicts_equal_the_one_token_reference(
    signing_key: TokenSigningKey,
    other_key: TokenSigningKey,
    issued: list[bytes],
    data: st.DataObject,
    both_keys: bool,
) -> None:
    tokens = data.draw(st.lists(st.sampled_from(issued), max_size=8))
    corrupted = []
    for token in tokens:
        change = data.draw(st.sampled_from(["none", "flip", "cut", "grow", "type"]))
        if change == "flip":
            at = data.draw(st.integers(0, len(token) - 1))
            token = (
                token[:at] + bytes([token[at] ^ data.draw(st.integers(1, 255))]) + token[at + 1 :]
            )
        elif change == "cut":
            token = token[: data.draw(st.integers(0, len(token) - 1))]
        elif change == "grow":
            token += b"\x00"
        elif change == "type":
            token = b"\x00\x01" + token[2:]
        corrupted.append(token)
    keys = [signing_key.public, other_key.public] if both_keys else signing_key.public
    digest = CHALLENGES[0].digest()
    assert check_tokens(keys, corrupted, digest) == check_tokens_python(keys, corrupted, digest)
