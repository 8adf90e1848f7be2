"""The edge's limits and in-flight gate (`aggregator.edge`), on their own; every role's use of
them through real processes is `tests/conformance/test_roles.py`."""

from __future__ import annotations

import pytest

from aggregator.edge import SMALL_REQUEST_BYTES, EdgeGate, RoleLimits, server_options
from aggregator.overload import Overloaded
from aggregator.role_limits import HELPER_LIMITS, ISSUER_LIMITS, LEADER_LIMITS, trusted_limits


def test_unlisted_methods_take_small_requests_and_the_server_limit_is_the_largest() -> None:
    limits = RoleLimits({"S/Big": 5 << 20}, max_inflight_bytes=1 << 20)
    assert limits.limit("S/Big") == 5 << 20
    assert limits.limit("S/Other") == SMALL_REQUEST_BYTES
    assert limits.largest_message == 5 << 20
    assert RoleLimits().largest_message == SMALL_REQUEST_BYTES
    options = dict(server_options(limits))
    assert options["grpc.max_receive_message_length"] == 5 << 20
    assert options["grpc.so_reuseport"] == 0


def test_the_gate_bounds_calls_with_a_hint() -> None:
    gate = EdgeGate(RoleLimits(max_concurrent_rpcs=2))
    gate.admit(10)
    gate.admit(10)
    with pytest.raises(Overloaded, match="handling 2 calls") as refused:
        gate.admit(0)
    assert refused.value.pushback_ms == 2_000  # full: the longest hint
    gate.release(10)
    gate.admit(0)
    assert (gate.rpcs, gate.bytes) == (2, 10)


def test_the_gate_bounds_bytes_but_never_starves_a_large_request() -> None:
    gate = EdgeGate(RoleLimits(max_inflight_bytes=100))
    gate.admit(60)
    with pytest.raises(Overloaded, match="60 bytes of requests") as refused:
        gate.admit(41)
    assert 50 <= refused.value.pushback_ms <= 2_000
    gate.admit(40)  # exactly up to the budget
    gate.release(60)
    gate.release(40)
    gate.admit(500)  # larger than the whole budget: admitted alone
    with pytest.raises(Overloaded):
        gate.admit(1)
    gate.release(500)
    assert (gate.rpcs, gate.bytes) == (0, 0)
    assert gate.pushback_ms() == 50  # empty: the shortest hint


@pytest.mark.parametrize("bad", [{"max_inflight_bytes": 0}, {"max_concurrent_rpcs": 0}])
def test_limits_are_validated(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        RoleLimits(**bad)  # type: ignore[arg-type]


def test_each_role_takes_what_its_rpcs_carry_and_no_more() -> None:
    """The documented table (docs/design.md): no role takes the old 64 MiB; a full secure
    upload of 1,000 reports at ~400 targets (18 bytes per target, ~8 KiB each) fits."""
    assert LEADER_LIMITS.limit("SecureCollector/UploadSecureReports") == 8 << 20
    assert 1_000 * (400 * 18 + 900) < 8 << 20
    for limits in (LEADER_LIMITS, HELPER_LIMITS, ISSUER_LIMITS, trusted_limits(4 << 20)):
        assert limits.largest_message <= 16 << 20
    assert ISSUER_LIMITS.limit("Issuer/IssueTokens") > 1_000 * (259 + 3)
    assert trusted_limits(4 << 20).limit("Collector/SubmitBatch") == 4 << 20
