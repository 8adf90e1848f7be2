"""The `ldpcollect.v1.Issuer` gRPC service: the public key directory, and blind signing for
enrolled devices within their quota.

IssueTokens: authenticate (device id + enrollment secret), decode every TokenRequest, check
they all name this epoch's key, count them against the device's quota (committed first), then
sign blindly off the event loop. All or nothing: a refused call counts no token.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, NoReturn

import grpc

from aggregator.issuer.epoch_keys import EpochKeys
from aggregator.issuer.quota import QuotaLedger
from aggregator.issuer.signing import Signer
from ldpcollect.admission.enrollment import check_secret, valid_device_id
from ldpcollect.admission.errors import BlindSignatureError, EncodingError, IssuanceRefused
from ldpcollect.admission.tokens import TokenRequest
from ldpcollect.v1 import issuer_pb2 as ipb
from ldpcollect.v1 import issuer_pb2_grpc as ipb_grpc

Context = grpc.aio.ServicerContext[Any, Any]
DEVICE_METADATA = "ldpcollect-device"
# Most TokenRequests one call may carry (each costs the issuer milliseconds of signing).
MAX_REQUESTS_PER_CALL = 1_000


async def _abort(context: Context, code: grpc.StatusCode, message: str) -> NoReturn:
    await context.abort(code, message)
    raise AssertionError("unreachable: abort raises")


def certificate_identity(context: Context) -> str | None:
    """With mutual TLS, the device is its client certificate: "cert:" and the SHA-256 of the
    certificate's PEM (gRPC has verified it against the issuer's client CA). One certificate,
    one quota."""
    auth = context.auth_context() or {}
    pems = list(auth.get("x509_pem_cert") or [])
    if not pems:
        return None
    return "cert:" + hashlib.sha256(pems[0]).hexdigest()


class IssuerService(ipb_grpc.IssuerServicer):
    def __init__(
        self,
        keys: EpochKeys,
        quota: QuotaLedger,
        enrollment_key: bytes,
        issuer_name: str,
        signer: Signer | None = None,
    ) -> None:
        self._signer = signer or Signer()
        self._keys = keys
        self._quota = quota
        self._enrollment_key = enrollment_key
        self.issuer_name = issuer_name

    async def GetDirectory(
        self, request: ipb.GetDirectoryRequest, context: Context
    ) -> ipb.IssuerDirectoryResponse:
        epoch = self._keys.epoch_now()
        directory = await asyncio.to_thread(self._keys.directory, self.issuer_name, epoch)
        return ipb.IssuerDirectoryResponse(
            directory_json=directory.to_json(),
            issuer_name=self.issuer_name,
            epoch=epoch,
            epoch_ends_at=self._keys.epoch_ends_at(epoch),
            tokens_per_epoch=self._quota.tokens_per_epoch,
        )

    async def IssueTokens(
        self, request: ipb.IssueTokensRequest, context: Context
    ) -> ipb.IssueTokensResponse:
        device_id = await self.authenticate(context)
        n = len(request.token_requests)
        if not 1 <= n <= MAX_REQUESTS_PER_CALL:
            await _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"send 1 to {MAX_REQUESTS_PER_CALL} token_requests per call, got {n}",
            )
        requests: list[TokenRequest] = []
        for i, data in enumerate(request.token_requests):
            try:
                requests.append(TokenRequest.decode(data))
            except EncodingError as exc:
                await _abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"token_requests[{i}]: {exc}; no token was issued",
                )
        epoch = self._keys.epoch_now()
        key = await asyncio.to_thread(self._keys.key, epoch)
        truncated = key.public.truncated_token_key_id
        for i, req in enumerate(requests):
            if req.truncated_token_key_id != truncated:
                await _abort(
                    context,
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"token_requests[{i}] names truncated key id 0x{req.truncated_token_key_id:02x}"
                    f", not epoch {epoch}'s key 0x{truncated:02x}: fetch the directory again "
                    "(GetDirectory) and blind against its first key; no token was issued",
                )
        try:
            remaining = await asyncio.to_thread(self._quota.reserve, epoch, device_id, n)
        except IssuanceRefused as exc:
            await _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        try:
            responses = await self._signer.sign(key, requests)
        except BlindSignatureError as exc:
            await asyncio.to_thread(self._quota.give_back, epoch, device_id, n)
            await _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"a blinded message is not valid for the key ({exc}); no token was issued",
            )
        except BaseException:
            await asyncio.to_thread(self._quota.give_back, epoch, device_id, n)
            raise
        return ipb.IssueTokensResponse(token_responses=responses, epoch=epoch, remaining=remaining)

    async def authenticate(self, context: Context) -> str:
        """The device id whose enrollment secret the call presents, or else (with mutual TLS)
        the client certificate's identity; abort UNAUTHENTICATED (neither) / PERMISSION_DENIED
        (a wrong secret). The server's edge runs it before the request is read, too."""
        metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ())}
        device_id, authorization = metadata.get(DEVICE_METADATA), metadata.get("authorization")
        if device_id is None and authorization is None:
            certified = certificate_identity(context)
            if certified is not None:
                return certified
        if not isinstance(device_id, str) or not isinstance(authorization, str):
            await _abort(
                context,
                grpc.StatusCode.UNAUTHENTICATED,
                f"IssueTokens needs the metadata '{DEVICE_METADATA}: <device id>' and "
                "'authorization: Bearer <enrollment secret>' (ldpcollect issuer enroll)",
            )
        scheme, _, secret = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not valid_device_id(device_id):
            await _abort(
                context,
                grpc.StatusCode.UNAUTHENTICATED,
                "the authorization metadata must read 'Bearer <enrollment secret>' and the "
                "device id be 1 to 128 printable characters",
            )
        if not check_secret(self._enrollment_key, device_id, secret):
            await _abort(
                context,
                grpc.StatusCode.PERMISSION_DENIED,
                "the enrollment secret does not match this device id; enroll the device "
                "(ldpcollect issuer enroll) and use the secret it printed",
            )
        return device_id
