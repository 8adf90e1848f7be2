"""The one table from refusals to gRPC statuses covers every refusal the core can raise."""

from __future__ import annotations

import grpc

from aggregator import errors
from aggregator.model import Outcome
from aggregator.status_map import MAX_MESSAGE_CHARS, bounded, outcome_status, status_of
from ldpcollect.errors import ParameterError


def test_every_refusal_type_has_a_status() -> None:
    refusals = errors.ServiceError.__subclasses__()
    assert len(refusals) >= 7
    expected = {
        errors.Invalid: grpc.StatusCode.INVALID_ARGUMENT,
        errors.NotFound: grpc.StatusCode.NOT_FOUND,
        errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
        errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
        errors.Exhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
        errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
        errors.StorageFailure: grpc.StatusCode.INTERNAL,
        errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
        errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    }
    assert {cls: status_of(cls("x")) for cls in refusals} == expected
    assert status_of(ParameterError("flip1", "2", "(0, 1]")) == grpc.StatusCode.INVALID_ARGUMENT


def test_an_outcome_is_ok_unless_refused() -> None:
    assert outcome_status(Outcome()) == grpc.StatusCode.OK
    assert outcome_status(Outcome(duplicate=True)) == grpc.StatusCode.OK
    assert outcome_status(Outcome(errors.AlreadyExists("again"))) == grpc.StatusCode.ALREADY_EXISTS


def test_messages_and_echoed_ids_are_bounded() -> None:
    assert bounded("short") == "short"
    long = bounded("x" * 10 * MAX_MESSAGE_CHARS)
    assert len(long) == MAX_MESSAGE_CHARS and long.endswith("(message truncated)")
    assert errors.shown("q1") == "'q1'"
    huge = errors.shown("q" * 10**6)
    assert len(huge) < 100 and "1000000 characters" in huge
