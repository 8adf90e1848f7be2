"""A token carries nothing from issuance but the key id.

The issuer sees, per issuance, who asked (the client's identity) and the TokenRequest: the
truncated key id and a blinded message B = m * r^e mod n. These tests show that nothing of that
view reaches the token: the token's fields are the client's own values, the challenge's digest
and the published key's id; and every issuance transcript is equally consistent with every
token, so even the issuer's private key cannot tell which issuance produced which token.
"""

from __future__ import annotations

import dataclasses

from ldpcollect.admission import blind_rsa
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import (
    VARIANT,
    Token,
    TokenResponse,
    authenticator_input,
    finalize_token,
    request_token,
    sign_token_request,
)

CHALLENGE = query_challenge("issuer.test", "eiffel-sp", 1, ["agg.test"])


def test_a_token_has_no_field_for_anything_the_issuer_saw() -> None:
    assert [f.name for f in dataclasses.fields(Token)] == [
        "nonce",
        "challenge_digest",
        "token_key_id",
        "authenticator",
        "token_type",
    ]


def test_tokens_of_two_clients_differ_only_in_their_nonce_and_signature(
    signing_key: TokenSigningKey,
) -> None:
    tokens = []
    for _client in ("device-a", "device-b"):
        request, pending = request_token(signing_key.public, CHALLENGE)
        tokens.append(finalize_token(pending, sign_token_request(signing_key, request)))
    a, b = tokens
    assert len(a.encode()) == len(b.encode())
    assert (a.token_type, a.challenge_digest, a.token_key_id) == (
        b.token_type,
        b.challenge_digest,
        b.token_key_id,
    )
    assert a.challenge_digest == CHALLENGE.digest()
    assert a.token_key_id == signing_key.public.token_key_id
    assert a.nonce != b.nonce and a.authenticator != b.authenticator


def test_token_bytes_are_a_function_of_nonce_digest_key_id_and_signature_only(
    signing_key: TokenSigningKey,
) -> None:
    """One client state blinded with two different factors: the issuer sees two unrelated
    requests, and the client ends with the same token bytes either way."""
    nonce, salt = bytes(range(32)), bytes(range(48))
    tokens = set()
    requests = set()
    for r in (2, 3):
        request, pending = request_token(signing_key.public, CHALLENGE, nonce=nonce, salt=salt, r=r)
        requests.add(request.encode())
        token = finalize_token(pending, sign_token_request(signing_key, request))
        tokens.add(token.encode())
        rebuilt = authenticator_input(nonce, CHALLENGE.digest(), signing_key.public.token_key_id)
        assert token.encode() == rebuilt + token.authenticator
    assert len(requests) == 2 and len(tokens) == 1


def test_every_issuance_is_equally_consistent_with_every_token(
    signing_key: TokenSigningKey,
) -> None:
    """Blindness, shown exactly: for each pair (issuance transcript, token), including the
    swapped pairs, there is a blinding factor r that explains the transcript and unblinds its
    blind signature to that token's signature. With r uniform, every pairing is equally likely
    whatever the issuer knows."""
    numbers = signing_key.private_key.private_numbers()
    n, e, d = numbers.public_numbers.n, numbers.public_numbers.e, numbers.d
    transcripts: list[tuple[bytes, TokenResponse]] = []
    tokens: list[Token] = []
    for _client in range(3):
        request, pending = request_token(signing_key.public, CHALLENGE)
        response = sign_token_request(signing_key, request)
        transcripts.append((request.blinded_msg, response))
        tokens.append(finalize_token(pending, response))

    for blinded_msg, response in transcripts:
        b, blind_sig = int.from_bytes(blinded_msg, "big"), int.from_bytes(response.blind_sig, "big")
        for token in tokens:
            s = int.from_bytes(token.authenticator, "big")
            m = pow(s, e, n)  # the token's encoded message, public from the signature alone
            r = pow(b * pow(m, -1, n), d, n)  # the factor that would pair them
            assert m * pow(r, e, n) % n == b
            unblinded = (blind_sig * pow(r, -1, n) % n).to_bytes(256, "big")
            assert unblinded == token.authenticator
            assert blind_rsa.verify(
                signing_key.public.key, token.authenticator_input(), unblinded, VARIANT
            )
