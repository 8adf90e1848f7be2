"""Blind signing off the event loop: in a worker thread, or split across worker processes.

A call's requests are signed by OpenSSL in one call (`tokens.sign_token_requests`, about a
quarter of a millisecond a token, the interpreter lock released); `processes` > 0 spreads each
call's requests over that many spawned processes (each keeps the keys it was sent, parsed
once), scaling with the cores.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import TokenRequest, sign_token_requests

_PARSED: dict[bytes, TokenSigningKey] = {}  # in a worker process: keys by their PEM


def sign_encoded(pem: bytes, requests: list[bytes]) -> list[bytes]:
    """Encoded TokenResponses for encoded requests (the worker processes' entry point)."""
    if not requests:
        return []
    key = _PARSED.get(pem)
    if key is None:
        key = _PARSED[pem] = TokenSigningKey.from_pem(pem)
    return [
        r.encode() for r in sign_token_requests(key, [TokenRequest.decode(r) for r in requests])
    ]


def _sign(key: TokenSigningKey, requests: list[TokenRequest]) -> list[bytes]:
    return [response.encode() for response in sign_token_requests(key, requests)]


class Signer:
    def __init__(self, processes: int = 0) -> None:
        if processes < 0:
            raise ValueError(f"processes must be >= 0, got {processes}")
        self._processes = processes
        self._pool: ProcessPoolExecutor | None = None
        if processes > 0:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(processes, mp_context=context)

    async def start(self) -> None:
        """Spawn the worker processes now rather than on the first request."""
        if self._pool is not None:
            loop = asyncio.get_running_loop()
            work = (
                loop.run_in_executor(self._pool, sign_encoded, b"", [])
                for _ in range(self._processes)
            )
            await asyncio.gather(*work)

    async def sign(self, key: TokenSigningKey, requests: list[TokenRequest]) -> list[bytes]:
        """Encoded blind signatures, in the order of the requests; BlindSignatureError when a
        request is not a valid blinded message for the key."""
        pool = self._pool
        if pool is None or len(requests) == 1:
            return await asyncio.to_thread(_sign, key, requests)
        pem = key.to_pem()
        encoded = [r.encode() for r in requests]
        size = -(-len(encoded) // self._processes)
        loop = asyncio.get_running_loop()
        parts = await asyncio.gather(
            *(
                loop.run_in_executor(pool, sign_encoded, pem, encoded[i : i + size])
                for i in range(0, len(encoded), size)
            )
        )
        return [response for part in parts for response in part]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
