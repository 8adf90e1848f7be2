"""The one exception the aggregator's core raises for a request it refuses."""

from __future__ import annotations

import grpc


class ServiceError(Exception):
    """A refusal with its precise gRPC status and a message a person can act on.

    Raised before anything changes; the service layer turns it into the RPC's status.
    """

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ServiceError({self.code.name}, {self.message!r})"
