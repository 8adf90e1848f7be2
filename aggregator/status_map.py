"""The one table from the core's refusals to gRPC statuses (the service edge uses nothing else).

docs/design.md ("Statuses") lists what each status means to a caller.
"""

from __future__ import annotations

import grpc

from aggregator.errors import (
    AlreadyExists,
    Exhausted,
    FailedPrecondition,
    Invalid,
    NotFound,
    PermissionDenied,
    ServiceError,
    StorageFailure,
    Unauthenticated,
    Unavailable,
)
from aggregator.model import Outcome
from ldpcollect.errors import ParameterError

# Longest status message sent: gRPC carries it in a header, and a megabyte-long echo of an
# input would exceed the peer's metadata limit and arrive as a different error.
MAX_MESSAGE_CHARS = 1_000

STATUS_OF: dict[type[Exception], grpc.StatusCode] = {
    Invalid: grpc.StatusCode.INVALID_ARGUMENT,
    ParameterError: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    Exhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    StorageFailure: grpc.StatusCode.INTERNAL,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
}


def status_of(refusal: ServiceError | ParameterError) -> grpc.StatusCode:
    """The gRPC status of a refusal (of its nearest listed class)."""
    for cls in type(refusal).__mro__:
        code = STATUS_OF.get(cls)
        if code is not None:
            return code
    raise TypeError(f"no gRPC status is assigned to {type(refusal).__name__}")


def outcome_status(outcome: Outcome) -> grpc.StatusCode:
    """OK for an accepted or duplicate report, else its refusal's status."""
    return grpc.StatusCode.OK if outcome.refusal is None else status_of(outcome.refusal)


def bounded(message: str) -> str:
    """`message`, cut to MAX_MESSAGE_CHARS."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[: MAX_MESSAGE_CHARS - 24] + " ... (message truncated)"
