"""Retrying transient gRPC failures with exponential backoff (the caller keeps the report id).

Only failures that say "try again" are retried: UNAVAILABLE (server down or restarting),
DEADLINE_EXCEEDED (no answer in time: the report may or may not be durable, so it is resent
with the SAME report id and the server acknowledges it once) and RESOURCE_EXHAUSTED (overload).
Everything else is permanent and surfaces to the caller.

A server that is overloaded says when to come back in the trailing metadata
`grpc-retry-pushback-ms` (gRPC's retry pushback): the next attempt then waits at least that
long (plus jitter, so refused clients do not return in lockstep); a negative or malformed hint
means "do not retry".
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc

from ldpcollect.errors import ParameterError

TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)

# Called before each retry with the attempt number just failed (1-based) and its error.
RetryHook = Callable[[int, grpc.RpcError], None]


def is_transient(code: grpc.StatusCode | None) -> bool:
    return code in TRANSIENT_CODES


# What the client's own gRPC core says when it failed a call itself, e.g. when the server
# ended a stream (refusing it with a pushback hint) while requests were still being written:
# the server's verdict never arrived. Our servers never send this text.
CLIENT_CORE_FAILURE = "Internal error from Core"


def is_retryable(err: grpc.RpcError) -> bool:
    """A transient status, or a call the client's core failed on its own. Resending is safe
    either way: a report keeps its id, and a report id is counted at most once."""
    code = error_code(err)
    if is_transient(code):
        return True
    return code == grpc.StatusCode.INTERNAL and error_details(err).startswith(CLIENT_CORE_FAILURE)


def error_code(err: grpc.RpcError) -> grpc.StatusCode | None:
    code = getattr(err, "code", None)
    return code() if callable(code) else None


def error_details(err: grpc.RpcError) -> str:
    details = getattr(err, "details", None)
    text = details() if callable(details) else None
    return str(text) if text else str(err)


PUSHBACK_METADATA_KEY = "grpc-retry-pushback-ms"
NO_RETRY = -1.0


def pushback_seconds(err: grpc.RpcError) -> float | None:
    """The server's retry hint in seconds; None without one, NO_RETRY when it forbids retrying."""
    trailing = getattr(err, "trailing_metadata", None)
    metadata = trailing() if callable(trailing) else None
    for key, value in metadata or ():
        if key == PUSHBACK_METADATA_KEY:
            text = value.decode() if isinstance(value, bytes) else str(value)
            try:
                millis = int(text)
            except ValueError:
                return NO_RETRY
            return NO_RETRY if millis < 0 else millis / 1000.0
    return None


def next_delay(
    policy_delay: float | None, err: grpc.RpcError, rng: random.Random, jitter: float = 0.2
) -> float | None:
    """The wait before the next attempt: the policy's backoff, stretched to the server's
    pushback hint (with jitter) when it gives one; None when there is to be no retry."""
    if policy_delay is None:
        return None
    hint = pushback_seconds(err)
    if hint is None:
        return policy_delay
    if hint == NO_RETRY:
        return None
    return max(policy_delay, hint * (1 + rng.uniform(0, jitter)))


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: delay_k = min(max_backoff, initial * multiplier**k)."""

    max_attempts: int = 8
    initial_backoff: float = 0.05
    max_backoff: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2
    rpc_timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ParameterError("max_attempts", self.max_attempts, "[1, inf)")
        if self.initial_backoff < 0 or self.max_backoff < self.initial_backoff:
            raise ParameterError(
                "initial_backoff/max_backoff",
                (self.initial_backoff, self.max_backoff),
                "0 <= initial_backoff <= max_backoff",
            )
        if self.multiplier < 1:
            raise ParameterError("multiplier", self.multiplier, "[1, inf)")
        if not 0 <= self.jitter <= 1:
            raise ParameterError("jitter", self.jitter, "[0, 1]")
        if self.rpc_timeout <= 0:
            raise ParameterError("rpc_timeout", self.rpc_timeout, "(0, inf) seconds")

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The sleep before retry 1, 2, ... (max_attempts - 1 of them)."""
        rng = rng or random.Random()
        delay = self.initial_backoff
        for _ in range(self.max_attempts - 1):
            spread = delay * self.jitter
            yield max(0.0, delay + rng.uniform(-spread, spread))
            delay = min(self.max_backoff, delay * self.multiplier)
