"""The in-memory issuer: K tokens per client per epoch, one key per epoch, refusals change
nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ldpcollect.admission.errors import BlindSignatureError, IssuanceRefused, UnknownKeyError
from ldpcollect.admission.issuer import Issuer
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenPublicKey, TokenSigningKey
from ldpcollect.admission.tokens import (
    PendingToken,
    TokenRequest,
    finalize_token,
    request_token,
)
from ldpcollect.admission.verification import Verdict, check_tokens
from ldpcollect.errors import ParameterError

CHALLENGE = query_challenge("issuer.test", "q", 1, ["agg.test"])


def requests_for(key: TokenPublicKey, n: int) -> tuple[list[TokenRequest], list[PendingToken]]:
    pairs = [request_token(key, CHALLENGE) for _ in range(n)]
    return [r for r, _ in pairs], [p for _, p in pairs]


@pytest.fixture
def issuer(signing_key: TokenSigningKey) -> Issuer:
    return Issuer(tokens_per_epoch=3, epoch=7, key=signing_key)


def test_issued_tokens_verify_under_the_published_key(issuer: Issuer) -> None:
    requests, pending = requests_for(issuer.public_key, 2)
    responses = issuer.issue("device-1", requests)
    tokens = [finalize_token(p, r).encode() for p, r in zip(pending, responses, strict=True)]
    assert check_tokens(issuer.public_key, tokens, CHALLENGE.digest()) == [Verdict.VALID] * 2
    assert issuer.remaining("device-1") == 1


def test_a_client_gets_at_most_k_per_epoch_and_a_refusal_changes_nothing(issuer: Issuer) -> None:
    issuer.issue("device-1", requests_for(issuer.public_key, 2)[0])
    with pytest.raises(IssuanceRefused, match="asked for 2 tokens with 1 of 3 left in epoch 7"):
        issuer.issue("device-1", requests_for(issuer.public_key, 2)[0])
    assert issuer.remaining("device-1") == 1
    issuer.issue("device-1", requests_for(issuer.public_key, 1)[0])
    with pytest.raises(IssuanceRefused, match="0 of 3 left"):
        issuer.issue("device-1", requests_for(issuer.public_key, 1)[0])
    assert issuer.remaining("device-2") == 3


def test_a_bad_request_in_a_batch_refuses_the_batch_and_spends_nothing(issuer: Issuer) -> None:
    requests, _ = requests_for(issuer.public_key, 1)
    out_of_range = TokenRequest(issuer.public_key.truncated_token_key_id, b"\xff" * 256)
    with pytest.raises(BlindSignatureError, match="out of range"):
        issuer.issue("device-1", [*requests, out_of_range])
    assert issuer.remaining("device-1") == 3


def test_a_new_epoch_has_a_new_key_and_full_quotas(
    issuer: Issuer, other_key: TokenSigningKey
) -> None:
    old_key = issuer.public_key
    old_requests, old_pending = requests_for(old_key, 3)
    old_tokens = [
        finalize_token(p, r).encode()
        for p, r in zip(old_pending, issuer.issue("device-1", old_requests), strict=True)
    ]
    if other_key.public.truncated_token_key_id == old_key.truncated_token_key_id:
        pytest.skip("the fresh key's truncated id collides with the vector key's (1 in 256)")
    new_key = issuer.rotate(8, other_key)
    assert issuer.epoch == 8 and new_key != old_key
    assert issuer.remaining("device-1") == 3
    with pytest.raises(UnknownKeyError, match="not epoch 8's key"):
        issuer.issue("device-1", requests_for(old_key, 1)[0])
    assert issuer.remaining("device-1") == 3
    assert check_tokens(new_key, old_tokens, CHALLENGE.digest()) == [Verdict.UNKNOWN_KEY] * 3


def test_a_generated_key_never_shares_the_old_truncated_id(issuer: Issuer) -> None:
    old = issuer.public_key
    new = issuer.rotate(8)
    assert new.truncated_token_key_id != old.truncated_token_key_id


def test_quota_holds_under_concurrent_requests(signing_key: TokenSigningKey) -> None:
    issuer = Issuer(tokens_per_epoch=4, key=signing_key)
    requests, _ = requests_for(signing_key.public, 10)

    def one(request: TokenRequest) -> bool:
        try:
            issuer.issue("device-1", [request])
        except IssuanceRefused:
            return False
        return True

    with ThreadPoolExecutor(4) as pool:
        granted = list(pool.map(one, requests))
    assert sum(granted) == 4
    assert issuer.remaining("device-1") == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tokens_per_epoch": 0}, r"tokens_per_epoch must be in \[1, inf\), got 0"),
        ({"tokens_per_epoch": 1, "epoch": -1}, r"epoch must be in \[0, inf\), got -1"),
    ],
)
def test_bad_settings_are_refused(
    kwargs: dict[str, int], message: str, signing_key: TokenSigningKey
) -> None:
    with pytest.raises(ParameterError, match=message):
        Issuer(key=signing_key, **kwargs)


def test_epochs_only_advance_and_clients_need_an_identity(issuer: Issuer) -> None:
    with pytest.raises(ParameterError, match=r"epoch must be in \(7, inf\), got 7"):
        issuer.rotate(7)
    with pytest.raises(ParameterError, match="client_id"):
        issuer.issue("", [])
