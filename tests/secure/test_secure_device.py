"""A device refuses a secure query without both aggregators' HPKE configs (or with one key
twice), and one whose copy of the helper's key is not the key the helper publishes: it must
never seal a share to a missing or single party, or to a key the leader chose."""

from __future__ import annotations

import pytest

from client.secure_device import MissingConfigs, SecureDevice, aggregator_configs
from client.secure_keys import UntrustedAggregator
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
        (b"\x02short", HELPER.config.encode(), "leader HPKE config is malformed"),
    ],
)
def test_a_device_refuses_a_query_without_two_aggregators_configs(
    leader: bytes, helper: bytes, words: str
) -> None:
    with pytest.raises(MissingConfigs, match=words):
        aggregator_configs(query(leader, helper), HELPER.config)


def test_a_device_refuses_one_key_for_both_aggregators() -> None:
    same = LEADER.config.encode()
    with pytest.raises(MissingConfigs, match="share one key"):
        aggregator_configs(query(same, same), LEADER.config)


@pytest.mark.parametrize(
    ("leaders_copy", "shown"),
    [
        (generate_key_pair(2).config.encode(), "config id 2"),  # same id, another key
        (generate_key_pair(9).config.encode(), "config id 9"),
        (b"\x02short", "6 bytes that are no config"),
    ],
)
def test_a_device_refuses_when_the_leaders_copy_of_the_helper_key_is_not_the_helpers(
    leaders_copy: bytes, shown: str
) -> None:
    with pytest.raises(UntrustedAggregator) as refused:
        SecureDevice(query(LEADER.config.encode(), leaders_copy), HELPER.config)
    words = str(refused.value)
    assert f"helper's HPKE key ({shown}" in words
    assert "is not the key the helper publishes (config id 2" in words


def test_a_device_seals_for_the_query_round_and_both_configs() -> None:
    device = SecureDevice(query(LEADER.config.encode(), HELPER.config.encode()), HELPER.config)
    report = SecureReport.decode(device.seal(device.draw(2)))
    assert (report.query_id, report.round) == ("q", 1)
    assert (report.leader_ciphertext[0], report.helper_ciphertext[0]) == (1, 2)
