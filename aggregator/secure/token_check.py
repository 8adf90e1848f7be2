"""Admission tokens in secure mode, for either role (docs/admission.md, "Two aggregators").

A secure query created with `require_tokens` stores the issuer and the origin names (leader,
helper); every report then carries a Privacy Pass token whose challenge is
`secure_query_challenge(issuer, query id, vdaf kind, upload round, origins)`. The tokens are
publicly verifiable, so each aggregator checks them with its own copy of the issuer's
directory (`--token-directory`) and spends the nonces in its own store: the leader before it
acknowledges an upload, the helper in the aggregation job's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aggregator.errors import AlreadyExists, FailedPrecondition, Invalid, Unavailable
from aggregator.redemption import TokenKeys
from aggregator.secure.store import StoredQuery
from ldpcollect.admission.errors import AdmissionError
from ldpcollect.admission.query_challenge import secure_query_challenge
from ldpcollect.admission.tokens import TokenChallenge
from ldpcollect.admission.verification import Verdict, check_tokens

TOKEN_MISSING = "TOKEN_MISSING"
TOKEN_REPLAY = "TOKEN_REPLAY"


def requires_tokens(params: dict[str, Any]) -> bool:
    return bool(params.get("token_issuer"))


def challenge_of(params: dict[str, Any], query_id: str) -> TokenChallenge:
    """The challenge every report of the query answers (from its stored parameters)."""
    return secure_query_challenge(
        params["token_issuer"],
        query_id,
        params["vdaf"],
        params["upload_round"],
        params["token_origins"],
    )


def missing_token(query_id: str, issuer: str) -> str:
    return (
        f"secure query {query_id!r} requires an admission token with every report: get one "
        f"from the issuer {issuer} for this query (nothing counted)"
    )


def replayed_token() -> AlreadyExists:
    return AlreadyExists(
        "the admission token was already redeemed by another report of this query: a token "
        "is spent once (nothing counted)"
    )


class SecureTokens:
    """This aggregator's view of the issuer: `keys` None when it was started without
    --token-directory (it then accepts no token-requiring query)."""

    def __init__(self, keys: TokenKeys | None) -> None:
        self.keys = keys

    def issuer_name(self) -> str:
        """The issuer this aggregator accepts, or "" when none."""
        if self.keys is None:
            return ""
        self.keys.refresh()
        return self.keys.issuer_name

    def require_issuer(self, role: str) -> str:
        issuer = self.issuer_name()
        if not issuer:
            raise FailedPrecondition(
                f"the {role} accepts no tokens: start it with --token-directory (the issuer's "
                "directory file) to create secure queries that require them"
            )
        return issuer

    def check(self, query: StoredQuery, tokens: Sequence[bytes]) -> list[Verdict]:
        """One verdict per token (b"" is MALFORMED), one batch for the query's challenge.
        CPU-bound: callers run it in a worker thread."""
        if self.keys is None:
            raise Unavailable(
                f"secure query {query.query_id!r} requires tokens but this aggregator was "
                "started without --token-directory; nothing was counted: retry once the "
                "operator restarts it"
            )
        self.keys.refresh()
        try:
            digest = challenge_of(query.params, query.query_id).digest()
        except AdmissionError as error:
            raise Invalid(f"no token challenge for {query.query_id!r}: {error}") from None
        return check_tokens(self.keys.keys, tokens, digest)
