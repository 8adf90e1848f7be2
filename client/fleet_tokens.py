"""Admission tokens for a simulated fleet: each simulated device is enrolled at the issuer.

The fleet runner plays the operator enrolling its simulated devices: device i is
`<prefix>-<i>`, its secret derived from the issuer's enrollment key (as `ldpcollect issuer
enroll` derives it), so each gets at most K tokens per epoch like a real device. Each device
asks the issuer for its own token, in its own call: the issuer counts per device.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import numpy as np
import numpy.typing as npt

from client.channels import open_aio_channel
from client.tokens import AsyncIssuerClient, Enrollment, IssuerKey, report_challenge
from ldpcollect.admission.enrollment import device_secret
from ldpcollect.admission.tokens import TokenChallenge
from ldpcollect.v1 import ldpcollect_pb2 as pb


@dataclass(frozen=True)
class FleetTokens:
    issuer: str  # host:port of the issuer
    enrollment_key: bytes = b""
    device_prefix: str = "sim"
    tls_ca: Path | None = None
    concurrency: int = 16

    def enrollment(self, device: int) -> Enrollment:
        device_id = f"{self.device_prefix}-{device}"
        return Enrollment(device_id, device_secret(self.enrollment_key, device_id))

    async def fetch(
        self, query: pb.Query, round_: int, devices: npt.NDArray[np.intp]
    ) -> tuple[dict[int, bytes], Counter[tuple[str, str]]]:
        """A token for each device's report of `round_`: (tokens by device, failures by
        (code, message)). A device the issuer refuses (e.g. its quota is spent) sends nothing."""
        return await self.fetch_for(lambda key: report_challenge(key, query, round_), devices)

    async def fetch_for(
        self,
        challenge_of: Callable[[IssuerKey], TokenChallenge],
        devices: Sequence[int] | npt.NDArray[np.intp],
    ) -> tuple[dict[int, bytes], Counter[tuple[str, str]]]:
        """`fetch` for any challenge (given the issuer's key): a secure query's, say."""
        tokens: dict[int, bytes] = {}
        failures: Counter[tuple[str, str]] = Counter()
        async with open_aio_channel(self.issuer, self.tls_ca) as channel:
            client = AsyncIssuerClient(channel)
            key: IssuerKey = await client.key()
            challenge = challenge_of(key)
            limit = asyncio.Semaphore(self.concurrency)

            async def one(device: int) -> None:
                async with limit:
                    try:
                        [token] = await client.tokens(self.enrollment(device), key, [challenge])
                    except grpc.aio.AioRpcError as err:
                        failures[(err.code().name, f"token: {err.details()}")] += 1
                        return
                    tokens[device] = token

            await asyncio.gather(*(one(int(d)) for d in devices))
        return tokens, failures
