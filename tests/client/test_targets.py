"""`--server` with several addresses: one round_robin channel over all of them."""

from __future__ import annotations

import json

import pytest

from client.targets import ROUND_ROBIN, channel_target, split_addresses
from ldpcollect.errors import ParameterError


def test_one_address_stays_a_plain_target_with_round_robin() -> None:
    target, options = channel_target("collector.example:50051")
    assert target == "collector.example:50051"
    assert options == [("grpc.service_config", ROUND_ROBIN)]
    assert json.loads(ROUND_ROBIN) == {"loadBalancingConfig": [{"round_robin": {}}]}


def test_several_ipv4_addresses_become_one_ipv4_list() -> None:
    target, options = channel_target("127.0.0.1:1, 127.0.0.2:2,10.0.0.1:3")
    assert target == "ipv4:127.0.0.1:1,127.0.0.2:2,10.0.0.1:3"
    assert dict(options) == {"grpc.service_config": ROUND_ROBIN}


def test_host_names_are_resolved_and_the_first_is_the_tls_authority() -> None:
    target, options = channel_target("localhost:7001,127.0.0.1:7002")
    assert target.startswith("ipv4:")
    assert target.endswith(":7002")
    assert dict(options)["grpc.default_authority"] == "localhost:7001"


def test_ipv6_literals() -> None:
    assert channel_target("[::1]:1,[::1]:2")[0] == "ipv6:[::1]:1,[::1]:2"
    assert split_addresses("[::1]:5") == [("::1", 5)]


@pytest.mark.parametrize("bad", ["a:1,", "a:1,b", "a:1,b:0", "a:1,:2", "a:1,b:x"])
def test_a_malformed_list_names_the_parameter(bad: str) -> None:
    with pytest.raises(ParameterError, match="--server"):
        channel_target(bad)


def test_mixed_address_families_are_refused() -> None:
    with pytest.raises(ParameterError, match="one IP family"):
        channel_target("127.0.0.1:1,[::1]:2")


@pytest.mark.parametrize(
    ("given", "target"),
    [
        ("localhost", "localhost:50051"),
        ("collector.example", "collector.example:50051"),
        ("[::1]", "[::1]:50051"),
        ("127.0.0.1:7001", "127.0.0.1:7001"),
        ("dns:///collector.example:7001", "dns:///collector.example:7001"),
    ],
)
def test_a_lone_host_gets_the_aggregators_port_not_443(given: str, target: str) -> None:
    assert channel_target(given)[0] == target
