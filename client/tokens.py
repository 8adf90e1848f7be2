"""Getting admission tokens from the operator's issuer (docs/admission.md).

A device reads the issuer's public directory (the same key for every device: it never takes
a key from an issuance response), blinds one fresh nonce per token against the query's
challenge, asks the issuer to sign (authenticated as an enrolled device: its id and
enrollment secret) and unblinds. The issuer sees who asks and the blinded messages only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
import grpc.aio

from ldpcollect.admission.directory import IssuerDirectory
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenPublicKey
from ldpcollect.admission.tokens import (
    PendingToken,
    TokenChallenge,
    TokenResponse,
    finalize_token,
    request_token,
)
from ldpcollect.errors import ParameterError
from ldpcollect.v1 import issuer_pb2 as ipb
from ldpcollect.v1 import issuer_pb2_grpc as ipb_grpc
from ldpcollect.v1 import ldpcollect_pb2 as pb

DEVICE_METADATA = "ldpcollect-device"


@dataclass(frozen=True)
class Enrollment:
    """A device's credential at the issuer (`ldpcollect issuer enroll` printed the secret)."""

    device_id: str
    secret: str

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((DEVICE_METADATA, self.device_id), ("authorization", f"Bearer {self.secret}"))


# With mutual TLS at the issuer the channel's client certificate is the device's identity.
CERTIFICATE = Enrollment("", "")


@dataclass(frozen=True)
class IssuerKey:
    """What a device blinds against: the issuer's name and its current key."""

    issuer_name: str
    key: TokenPublicKey

    @classmethod
    def from_response(cls, response: ipb.IssuerDirectoryResponse, now: float) -> IssuerKey:
        directory = IssuerDirectory.from_json(response.directory_json)
        return cls(response.issuer_name, directory.key_at(int(now)))


def check_issuer(key: IssuerKey, query_issuer: str) -> None:
    """Refuse a query bound to another issuer than the one this device asks."""
    if query_issuer != key.issuer_name:
        raise ParameterError(
            "token issuer",
            query_issuer,
            f"the issuer this device is enrolled with ({key.issuer_name})",
            "tokens of another issuer would be refused",
        )


def report_challenge(key: IssuerKey, query: pb.Query, round_: int) -> TokenChallenge:
    """The challenge a report of `query` in `round_` must carry a token for; refuses a query
    bound to another issuer than the one this device asks."""
    check_issuer(key, query.token_issuer)
    return query_challenge(query.token_issuer, query.query_id, round_)


def blind_requests(
    key: IssuerKey, challenges: Sequence[TokenChallenge]
) -> tuple[ipb.IssueTokensRequest, list[PendingToken]]:
    pairs = [request_token(key.key, challenge) for challenge in challenges]
    request = ipb.IssueTokensRequest(token_requests=[r.encode() for r, _ in pairs])
    return request, [pending for _, pending in pairs]


def finish_tokens(pending: list[PendingToken], response: ipb.IssueTokensResponse) -> list[bytes]:
    if len(response.token_responses) != len(pending):
        raise ParameterError(
            "IssueTokens response", len(response.token_responses), f"{len(pending)} signatures"
        )
    return [
        finalize_token(p, TokenResponse.decode(r)).encode()
        for p, r in zip(pending, response.token_responses, strict=True)
    ]


class IssuerClient:
    """Blocking access to the issuer for one device (`client.device.Device`)."""

    def __init__(self, channel: grpc.Channel, enrollment: Enrollment, timeout: float = 30.0):
        self._stub = ipb_grpc.IssuerStub(channel)
        self.enrollment = enrollment
        self._timeout = timeout

    def key(self) -> IssuerKey:
        response = self._stub.GetDirectory(ipb.GetDirectoryRequest(), timeout=self._timeout)
        return IssuerKey.from_response(response, time.time())

    def tokens(self, key: IssuerKey, challenges: Sequence[TokenChallenge]) -> list[bytes]:
        """One finished token per challenge (all or none; the issuer counts them)."""
        request, pending = blind_requests(key, challenges)
        metadata = self.enrollment.metadata() if self.enrollment.device_id else ()
        response = self._stub.IssueTokens(request, metadata=metadata, timeout=self._timeout)
        return finish_tokens(pending, response)


class AsyncIssuerClient:
    """The same over grpc.aio, for the fleet runner (one enrollment per simulated device)."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float = 30.0) -> None:
        self._stub = ipb_grpc.IssuerStub(channel)
        self._timeout = timeout

    async def key(self) -> IssuerKey:
        response = await self._stub.GetDirectory(ipb.GetDirectoryRequest(), timeout=self._timeout)
        return IssuerKey.from_response(response, time.time())

    async def tokens(
        self, enrollment: Enrollment, key: IssuerKey, challenges: Sequence[TokenChallenge]
    ) -> list[bytes]:
        request, pending = blind_requests(key, challenges)
        response = await self._stub.IssueTokens(
            request, metadata=enrollment.metadata(), timeout=self._timeout
        )
        return finish_tokens(pending, response)
