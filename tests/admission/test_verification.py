"""Batch verification at redemption: one verdict per token, in order, off the event loop."""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import pytest

from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import (
    Token,
    TokenChallenge,
    finalize_token,
    request_token,
    sign_token_request,
)
from ldpcollect.admission.verification import Verdict, check_tokens, verify_tokens

ROUND_1 = query_challenge("issuer.test", "q", 1, ["agg.test"])
ROUND_2 = query_challenge("issuer.test", "q", 2, ["agg.test"])


def issue(key: TokenSigningKey, challenge: TokenChallenge) -> Token:
    request, pending = request_token(key.public, challenge)
    return finalize_token(pending, sign_token_request(key, request))


@pytest.fixture(scope="module")
def batch(signing_key: TokenSigningKey, other_key: TokenSigningKey) -> list[bytes]:
    good = issue(signing_key, ROUND_1)
    flipped = bytes([good.authenticator[0] ^ 1]) + good.authenticator[1:]
    return [
        good.encode(),
        good.encode()[:-1],
        issue(other_key, ROUND_1).encode(),
        issue(signing_key, ROUND_2).encode(),
        replace(good, authenticator=flipped).encode(),
        replace(good, nonce=bytes(32)).encode(),
        b"\x00\x00" + good.encode()[2:],
        issue(signing_key, ROUND_1).encode(),
    ]


EXPECTED = [
    Verdict.VALID,
    Verdict.MALFORMED,
    Verdict.UNKNOWN_KEY,
    Verdict.WRONG_CHALLENGE,
    Verdict.BAD_SIGNATURE,
    Verdict.BAD_SIGNATURE,
    Verdict.MALFORMED,
    Verdict.VALID,
]


def test_each_token_gets_its_verdict_in_order(
    signing_key: TokenSigningKey, batch: list[bytes]
) -> None:
    assert check_tokens(signing_key.public, batch, ROUND_1.digest()) == EXPECTED
    assert verify_tokens(signing_key.public, batch, ROUND_1.digest()) == [
        v is Verdict.VALID for v in EXPECTED
    ]


def test_a_round_1_token_is_refused_in_round_2(
    signing_key: TokenSigningKey, batch: list[bytes]
) -> None:
    assert check_tokens(signing_key.public, batch[:1], ROUND_2.digest()) == [
        Verdict.WRONG_CHALLENGE
    ]


def test_replay_is_left_to_the_redeemer(signing_key: TokenSigningKey, batch: list[bytes]) -> None:
    """Verification is stateless: the same token twice verifies twice."""
    assert verify_tokens(signing_key.public, [batch[0], batch[0]], ROUND_1.digest()) == [
        True,
        True,
    ]


def test_an_empty_batch_has_no_verdicts(signing_key: TokenSigningKey) -> None:
    assert verify_tokens(signing_key.public, [], ROUND_1.digest()) == []


async def test_verification_runs_in_a_thread_off_the_event_loop(
    signing_key: TokenSigningKey, batch: list[bytes]
) -> None:
    verdicts = await asyncio.to_thread(verify_tokens, signing_key.public, batch, ROUND_1.digest())
    assert verdicts == [v is Verdict.VALID for v in EXPECTED]


async def test_verification_runs_in_a_process_pool(
    signing_key: TokenSigningKey, batch: list[bytes]
) -> None:
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        verdicts = await asyncio.get_running_loop().run_in_executor(
            pool, verify_tokens, signing_key.public, batch, ROUND_1.digest()
        )
    assert verdicts == [v is Verdict.VALID for v in EXPECTED]


def test_across_a_rotation_both_epochs_keys_can_be_accepted(
    signing_key: TokenSigningKey, other_key: TokenSigningKey
) -> None:
    old, new = issue(signing_key, ROUND_1).encode(), issue(other_key, ROUND_1).encode()
    both = [signing_key.public, other_key.public]
    assert check_tokens(both, [old, new], ROUND_1.digest()) == [Verdict.VALID, Verdict.VALID]
    assert check_tokens(other_key.public, [old, new], ROUND_1.digest()) == [
        Verdict.UNKNOWN_KEY,
        Verdict.VALID,
    ]
    assert verify_tokens(iter(both), [old, new], ROUND_1.digest()) == [True, True]
