"""HPKE sealing: a share opens only with its recipient's key and under exactly the metadata it
was sealed for; configs and keys survive their encodings; bad input gets a precise error."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ldpcollect.secure.sealing import (
    CONFIG_SIZE,
    ENC_SIZE,
    ROLE_HELPER,
    ROLE_LEADER,
    TAG_SIZE,
    HpkeConfig,
    HpkeKeyPair,
    SealingError,
    config_id_of,
    generate_key_pair,
    open_aggregate_share,
    open_input_share,
    seal_aggregate_share,
    seal_input_share,
)
from ldpcollect.secure.share_binding import ShareBinding

META = ("q1", 2, bytes(range(16)), b"public share")
SECRET = b"an input share"


@pytest.fixture(scope="module")
def leader() -> HpkeKeyPair:
    return generate_key_pair(7)


def test_an_input_share_round_trips_and_names_its_config(leader: HpkeKeyPair) -> None:
    sealed = seal_input_share(leader.config, ROLE_LEADER, *META, SECRET)
    assert len(sealed) == 1 + ENC_SIZE + len(SECRET) + TAG_SIZE
    assert config_id_of(sealed) == 7
    assert open_input_share(leader, ROLE_LEADER, *META, sealed) == SECRET


def test_sealing_is_randomised(leader: HpkeKeyPair) -> None:
    first = seal_input_share(leader.config, ROLE_LEADER, *META, SECRET)
    assert first != seal_input_share(leader.config, ROLE_LEADER, *META, SECRET)


@pytest.mark.parametrize(
    "other",
    [
        ("q2", 2, bytes(range(16)), b"public share"),
        ("q1", 1, bytes(range(16)), b"public share"),
        ("q1", 2, bytes(range(1, 17)), b"public share"),
        ("q1", 2, bytes(range(16)), b"public sharf"),
        # the length prefixes keep field boundaries: moving a byte between fields is a change
        ("q1", 2, bytes(range(16)) + b"p", b"ublic share"),
    ],
    ids=["query", "round", "report id", "public share", "field boundary"],
)
def test_a_share_does_not_open_under_other_metadata(
    leader: HpkeKeyPair, other: tuple[str, int, bytes, bytes]
) -> None:
    sealed = seal_input_share(leader.config, ROLE_LEADER, *META, SECRET)
    with pytest.raises(SealingError, match="does not open") as caught:
        open_input_share(leader, ROLE_LEADER, *other, sealed)
    # the message does not say which field differed
    assert "query," in str(caught.value) and "report or public share" in str(caught.value)


def test_a_share_sealed_for_the_helper_role_does_not_open_as_the_leader(
    leader: HpkeKeyPair,
) -> None:
    sealed = seal_input_share(leader.config, ROLE_HELPER, *META, SECRET)
    with pytest.raises(SealingError, match="does not open"):
        open_input_share(leader, ROLE_LEADER, *META, sealed)


def test_another_key_with_the_same_config_id_cannot_open(leader: HpkeKeyPair) -> None:
    sealed = seal_input_share(leader.config, ROLE_LEADER, *META, SECRET)
    with pytest.raises(SealingError, match="does not open"):
        open_input_share(generate_key_pair(7), ROLE_LEADER, *META, sealed)


@pytest.mark.parametrize("position", [1, 1 + ENC_SIZE, -1])
def test_a_flipped_byte_is_refused(leader: HpkeKeyPair, position: int) -> None:
    sealed = bytearray(seal_input_share(leader.config, ROLE_LEADER, *META, SECRET))
    sealed[position] ^= 0x01
    with pytest.raises(SealingError, match="does not open"):
        open_input_share(leader, ROLE_LEADER, *META, bytes(sealed))


def test_a_wrong_config_id_is_refused_by_name(leader: HpkeKeyPair) -> None:
    sealed = seal_input_share(generate_key_pair(8).config, ROLE_LEADER, *META, SECRET)
    with pytest.raises(SealingError, match="unknown HPKE config id 8 \\(this key's id is 7\\)"):
        open_input_share(leader, ROLE_LEADER, *META, sealed)


def test_a_truncated_ciphertext_is_refused_by_length(leader: HpkeKeyPair) -> None:
    with pytest.raises(SealingError, match="at least 49 bytes, got 48"):
        open_input_share(leader, ROLE_LEADER, *META, bytes(48))
    with pytest.raises(SealingError, match="empty ciphertext"):
        config_id_of(b"")


def test_roles_and_rounds_outside_their_ranges_are_refused(leader: HpkeKeyPair) -> None:
    with pytest.raises(SealingError, match="role must be one of"):
        seal_input_share(leader.config, 0x01, *META, SECRET)
    with pytest.raises(SealingError, match="round must be an integer"):
        seal_input_share(leader.config, ROLE_LEADER, "q1", -1, b"r", b"", SECRET)


BINDING = ShareBinding("q1", 2, "sampling_pair", 6, 100, 'sp {"sampling_rate": "1/2"}', 140, "2")


def test_an_aggregate_share_opens_only_for_its_role_and_everything_it_is_bound_to() -> None:
    collector = generate_key_pair(0)
    sealed = seal_aggregate_share(collector.config, ROLE_HELPER, BINDING, b"agg")
    assert open_aggregate_share(collector, ROLE_HELPER, BINDING, sealed) == b"agg"
    with pytest.raises(SealingError, match="does not open"):
        open_aggregate_share(collector, ROLE_LEADER, BINDING, sealed)
    others: dict[str, Any] = {
        "query_id": "q2",
        "round": 1,
        "vdaf": "round",
        "targets": 7,
        "min_reports": 1,
        "mechanism": 'sp {"sampling_rate": "1/4"}',
        "reports": 141,
        "noise_sigma": "",
    }
    for name, value in others.items():
        with pytest.raises(SealingError, match="does not open"):
            open_aggregate_share(collector, ROLE_HELPER, replace(BINDING, **{name: value}), sealed)


def test_no_two_different_bindings_encode_alike() -> None:
    shifted = replace(BINDING, query_id="q", vdaf="1sampling_pair")
    assert shifted.encode() != BINDING.encode()
    assert replace(BINDING, reports=0).encode() != replace(BINDING, min_reports=0).encode()


def test_an_input_share_does_not_open_as_an_aggregate_share(leader: HpkeKeyPair) -> None:
    sealed = seal_input_share(leader.config, ROLE_LEADER, "q1", 2, b"", b"", SECRET)
    with pytest.raises(SealingError, match="does not open"):
        open_aggregate_share(leader, ROLE_LEADER, BINDING, sealed)


def test_configs_and_keys_survive_their_encodings(leader: HpkeKeyPair) -> None:
    encoded = leader.config.encode()
    assert len(encoded) == CONFIG_SIZE and encoded[0] == 7
    assert HpkeConfig.decode(encoded) == leader.config
    raw = HpkeKeyPair.from_private_bytes(7, leader.private_bytes())
    pem = HpkeKeyPair.from_pem(7, leader.private_pem())
    sealed = seal_input_share(leader.config, ROLE_LEADER, *META, SECRET)
    for reloaded in (raw, pem):
        assert reloaded.config == leader.config
        assert open_input_share(reloaded, ROLE_LEADER, *META, sealed) == SECRET


def test_malformed_configs_and_keys_are_refused() -> None:
    with pytest.raises(SealingError, match="HPKE config is 33 bytes, got 32"):
        HpkeConfig.decode(bytes(32))
    with pytest.raises(SealingError, match="config id must be an integer in \\[0, 256\\)"):
        generate_key_pair(256)
    with pytest.raises(SealingError, match="private key is 32 bytes, got 31"):
        HpkeKeyPair.from_private_bytes(1, bytes(31))
    with pytest.raises(SealingError, match="not an unencrypted PEM private key"):
        HpkeKeyPair.from_pem(1, b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
