"""The challenge binding: one challenge per (issuer, query, round, aggregators), the same for
every device."""

from __future__ import annotations

import itertools

import pytest

from ldpcollect.admission.errors import EncodingError
from ldpcollect.admission.query_challenge import query_challenge, redemption_context
from ldpcollect.admission.tokens import TokenChallenge

ISSUER = "issuer.ldpcollect.test:8443"


def test_every_device_derives_the_same_challenge_from_public_values() -> None:
    first = query_challenge(ISSUER, "eiffel-rr", 1, ["agg.example"])
    again = query_challenge(ISSUER, "eiffel-rr", 1, ["agg.example"])
    assert first.encode() == again.encode()
    assert TokenChallenge.decode(first.encode()) == first
    assert first.issuer_name == ISSUER and first.origin_info == ("agg.example",)
    assert len(first.redemption_context) == 32


def test_each_query_and_round_gets_its_own_context() -> None:
    """Length-prefixing keeps the encoding injective: ids that are prefixes of one another,
    or that end in bytes resembling a round, still differ."""
    ids = ["q", "q1", "q\x00", "q\x00\x00\x00\x00\x01", "eiffel-rr", "é"]
    pairs = list(itertools.product(ids, [1, 2, 256, 2**32 - 1]))
    contexts = {redemption_context(query_id, r) for query_id, r in pairs}
    assert len(contexts) == len(pairs)


def test_aggregators_and_issuer_are_part_of_the_challenge() -> None:
    digests = {
        query_challenge(ISSUER, "q", 1).digest(),
        query_challenge(ISSUER, "q", 1, ["leader.example"]).digest(),
        query_challenge(ISSUER, "q", 1, ["leader.example", "helper.example"]).digest(),
        query_challenge(ISSUER, "q", 1, ["helper.example", "leader.example"]).digest(),
        query_challenge("other-issuer.test", "q", 1).digest(),
    }
    assert len(digests) == 5


@pytest.mark.parametrize(
    ("query_id", "round_number", "message"),
    [
        ("", 1, "query_id must be 1 to 255 bytes"),
        ("x" * 256, 1, "got 256"),
        ("q", 0, r"round must be in \[1, 4294967295\], got 0"),
        ("q", 2**32, "got 4294967296"),
    ],
)
def test_out_of_range_queries_and_rounds_are_refused(
    query_id: str, round_number: int, message: str
) -> None:
    with pytest.raises(EncodingError, match=message):
        query_challenge(ISSUER, query_id, round_number)
