"""A device refuses a secure query without both aggregators' HPKE configs (or with one key
twice): it must never seal a share to a missing or single party."""

from __future__ import annotations

import pytest

from client.secure_device import MissingConfigs, SecureDevice, aggregator_configs
from ldpcollect.mechanisms import RandomizedResponse
from ldpcollect.secure.sealing import generate_key_pair
from ldpcollect.secure.upload import SecureReport
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.wire import mechanism_to_proto

LEADER, HELPER = generate_key_pair(1), generate_key_pair(2)


def query(leader: bytes, helper: bytes) -> spb.SecureQuery:
    return spb.SecureQuery(
        query_id="q",
        mechanism=mechanism_to_proto(RandomizedResponse("0.85", "0.3")),
        targets=[1, 2, 3],
        leader_hpke_config=leader,
        helper_hpke_config=helper,
        upload_round=1,
    )


@pytest.mark.parametrize(
    ("leader", "helper", "words"),
    [
        (b"", HELPER.config.encode(), "no leader HPKE config"),
        (LEADER.config.encode(), b"", "no helper HPKE config"),
        (LEADER.config.encode(), b"\x02short", "helper HPKE config is malformed"),
        (LEADER.config.encode(), LEADER.config.encode(), "share one key"),
    ],
)
def test_a_device_refuses_a_query_without_two_aggregators_configs(
    leader: bytes, helper: bytes, words: str
) -> None:
    with pytest.raises(MissingConfigs, match=words):
        aggregator_configs(query(leader, helper))


def test_a_device_seals_for_the_query_round_and_both_configs() -> None:
    device = SecureDevice(query(LEADER.config.encode(), HELPER.config.encode()))
    report = SecureReport.decode(device.seal(device.draw(2)))
    assert (report.query_id, report.round) == ("q", 1)
    assert (report.leader_ciphertext[0], report.helper_ciphertext[0]) == (1, 2)
