"""The TokenChallenge a report's token must answer: bound to the query and the round.

- issuer_name: the operator's issuer (host or host:port), whose published key tokens must
  verify under; tokens of any other issuer are for something else.
- redemption_context: SHA-256 of a labelled, length-prefixed (query id, round). A token is
  spendable in exactly one round of one query, so replay state is kept per (query, round)
  and dropped with it, and a token fetched for one query cannot be spent on another. It is
  computed from public values only: every device of a query answers the same challenge, so
  the challenge (and the challenge_digest in each token) cannot act as a per-device cookie.
- origin_info: the aggregators that accept the report: the one aggregator, or the leader and
  the helper in two-aggregator mode (both verify; the tokens are publicly verifiable). Order
  matters to the digest, so the query's public parameters fix it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ldpcollect.admission.errors import EncodingError
from ldpcollect.admission.tokens import TokenChallenge

CONTEXT_LABEL = b"ldpcollect report token v1"
MAX_QUERY_ID_BYTES = 255
MAX_ROUND = 2**32 - 1  # rounds are uint32 on the wire


def redemption_context(query_id: str, round_number: int) -> bytes:
    """SHA-256(label || len(query_id) || query_id || round), one value per (query, round)."""
    encoded = query_id.encode("utf-8")
    if not 1 <= len(encoded) <= MAX_QUERY_ID_BYTES:
        raise EncodingError(
            f"query_id must be 1 to {MAX_QUERY_ID_BYTES} bytes of UTF-8, got {len(encoded)}"
        )
    if not 1 <= round_number <= MAX_ROUND:
        raise EncodingError(f"round must be in [1, {MAX_ROUND}], got {round_number}")
    return hashlib.sha256(
        CONTEXT_LABEL + bytes([len(encoded)]) + encoded + round_number.to_bytes(4, "big")
    ).digest()


def query_challenge(
    issuer_name: str, query_id: str, round_number: int, origins: Sequence[str] = ()
) -> TokenChallenge:
    """The challenge for reports of `query_id` in round `round_number` (1-based)."""
    return TokenChallenge(
        issuer_name=issuer_name,
        redemption_context=redemption_context(query_id, round_number),
        origin_info=tuple(origins),
    )


SECURE_CONTEXT_LABEL = b"ldpcollect secure report token v1"


def secure_redemption_context(query_id: str, report_kind: str, upload_round: int) -> bytes:
    """SHA-256(label || len(query_id) || query_id || len(kind) || kind || round) for a secure
    (two-aggregator) query: its own label, so a token for a trusted query of the same id can
    never be spent on a secure one; the kind ("round" or "sampling_pair") and the upload round
    name what the report holds."""
    encoded = query_id.encode("utf-8")
    kind = report_kind.encode("ascii")
    if not 1 <= len(encoded) <= MAX_QUERY_ID_BYTES:
        raise EncodingError(
            f"query_id must be 1 to {MAX_QUERY_ID_BYTES} bytes of UTF-8, got {len(encoded)}"
        )
    if not 1 <= len(kind) <= 255:
        raise EncodingError(f"report kind must be 1 to 255 ASCII bytes, got {len(kind)}")
    if not 1 <= upload_round <= MAX_ROUND:
        raise EncodingError(f"round must be in [1, {MAX_ROUND}], got {upload_round}")
    return hashlib.sha256(
        SECURE_CONTEXT_LABEL
        + bytes([len(encoded)])
        + encoded
        + bytes([len(kind)])
        + kind
        + upload_round.to_bytes(4, "big")
    ).digest()


def secure_query_challenge(
    issuer_name: str, query_id: str, report_kind: str, upload_round: int, origins: Sequence[str]
) -> TokenChallenge:
    """The challenge of every report of a secure query: origin_info lists the leader and the
    helper (in that order), the two origins that redeem the same token (RFC 9577 2.1.1: a
    comma-separated list of server names, each origin's own name among them)."""
    names = tuple(origins)
    if len(names) != 2 or names[0].lower() == names[1].lower():
        raise EncodingError(f"origins must be two different names (leader, helper), got {names}")
    return TokenChallenge(
        issuer_name=issuer_name,
        redemption_context=secure_redemption_context(query_id, report_kind, upload_round),
        origin_info=names,
    )
