"""Refusals: what the aggregator's core raises for a request it does not carry out.

One exception per kind of refusal, free of any transport: the service edge maps each kind to
its gRPC status in one table (`aggregator.status_map`), so stores, rounds and the release
never need to know how a refusal travels. Every refusal is raised before anything changes,
and its message is written for the person who reads it.
"""

from __future__ import annotations

# Longest identifier a message repeats back (query ids are at most 64 characters when valid).
SHOWN_CHARS = 64


class ServiceError(Exception):
    """A refused request, with a message a person can act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class NotFound(ServiceError):
    """The request names a query (or release) that does not exist."""


class AlreadyExists(ServiceError):
    """The request would create something that exists (a query id, a device's report)."""


class FailedPrecondition(ServiceError):
    """The request is well formed but the query is not in a state that allows it."""


class Invalid(ServiceError):
    """The request itself is malformed (wrong lengths, bad parameters)."""


class Unauthenticated(ServiceError):
    """The request lacks the credential it needs (a report without its admission token)."""


class PermissionDenied(ServiceError):
    """The request's credential is not valid for it (a token that does not verify, or was
    issued for another query or round)."""


class Exhausted(ServiceError):
    """A limit is reached: the privacy budget, or a size the server accepts."""


class Unavailable(ServiceError):
    """The aggregator cannot take the request now; the same request may succeed later."""


class StorageFailure(ServiceError):
    """Durable storage failed; nothing of the request happened and a retry may succeed."""


def shown(identifier: str) -> str:
    """`identifier` quoted for a message, cut to SHOWN_CHARS characters (input may be huge)."""
    if len(identifier) <= SHOWN_CHARS:
        return repr(identifier)
    return f"{identifier[:SHOWN_CHARS]!r}... ({len(identifier)} characters)"
