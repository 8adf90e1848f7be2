"""Which failed calls the device SDK and the fleet runner send again."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

from client.retry import CLIENT_CORE_FAILURE, is_retryable


def failure(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details, None)


@pytest.mark.parametrize(
    ("code", "details", "retried"),
    [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many streams; retry", True),
        (grpc.StatusCode.UNAVAILABLE, "connection refused", True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True),
        # The client's own core failed the call: the server's verdict never arrived.
        (grpc.StatusCode.INTERNAL, CLIENT_CORE_FAILURE, True),
        # A verdict of the server is final, INTERNAL included.
        (grpc.StatusCode.INTERNAL, "storage failure, nothing of this request was stored", False),
        (grpc.StatusCode.INVALID_ARGUMENT, CLIENT_CORE_FAILURE, False),
        (grpc.StatusCode.ALREADY_EXISTS, "another report for this device and round", False),
        (grpc.StatusCode.FAILED_PRECONDITION, "query is closed", False),
    ],
)
def test_transient_statuses_and_the_clients_own_core_failures_are_retried(
    code: grpc.StatusCode, details: str, retried: bool
) -> None:
    assert is_retryable(failure(code, details)) is retried
