"""Which failures the CLI rewrites as connection advice: gRPC's own transport errors, never a
status an ldpcollect server sent (its sentence may quote another link's transport error)."""

from __future__ import annotations

from ldpcollect_cli.connection_errors import explain


def test_a_transport_failure_becomes_one_line_naming_the_fix() -> None:
    details = (
        "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:50051: "
        "Connection refused"
    )
    hint = explain("UNAVAILABLE", details)
    assert hint is not None and hint.startswith("no aggregator is listening at 127.0.0.1:50051")


def test_a_servers_own_message_is_kept_even_when_it_quotes_a_transport_error() -> None:
    details = (
        "the helper did not give its HPKE config (UNAVAILABLE: failed to connect to all "
        "addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:50061: Socket closed)"
    )
    assert explain("UNAVAILABLE", details) is None
