"""The one device entry point against a real leader and helper (processes): `participate`
finds the secure queries, the device draws once and saves its sealed upload before sending
it; a lost acknowledgement is resent byte for byte and counted once; a declined query sends
nothing; the helper's config is an input of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from client.device import Device
from client.secure_admin import SecureAdminClient
from ldpcollect import geo
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.secure.sealing import HpkeConfig, generate_key_pair
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.wire import scheme_from_text
from tests.secure.roles import ADMIN, Pair, aggregated, secure_pair

LAT, LON = geo.DEFAULT_CENTER
HOME = geo.GridScheme().locate(LAT, LON)
TARGETS = [HOME - 1, HOME, HOME + 1]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with secure_pair(tmp_path_factory.mktemp("pair")) as running:
        yield running


def _create(channel: grpc.Channel, tmp_path: Path, query_id: str, sp: bool) -> spb.SecureQuery:
    client = SecureAdminClient(channel, ADMIN)
    mechanism = SamplingPrivacy("1/2") if sp else RandomizedResponse("0.85", "0.3")
    collector = load_or_create_key_pair(tmp_path / "collector.key")
    return client.create_query(
        collector, mechanism, scheme_from_text("grid"), TARGETS, query_id=query_id
    )


def test_a_device_answers_a_secure_pair_once_and_a_lost_ack_is_resent_byte_for_byte(
    pair: Pair, tmp_path: Path
) -> None:
    state_path = tmp_path / "device.json"
    with pair.channel() as channel:
        _create(channel, tmp_path, "dev-sp", sp=True)
        device = Device(state_path, LAT, LON, helper_config=lambda q: pair.helper_config())
        [outcome] = device.participate(channel, query_ids=["dev-sp"])
        assert (outcome.status, outcome.round) == ("accepted", 2)
        saved = json.loads(state_path.read_text())["queries"]["dev-sp"]
        assert saved["acked"] == [True, True] and len(saved["sealed"]) > 200

        # The acknowledgement was "lost": a restarted device resends the saved bytes.
        saved["acked"] = [False, False]
        state = json.loads(state_path.read_text())
        state["queries"]["dev-sp"] = saved
        state_path.write_text(json.dumps(state))
        restarted = Device(state_path, LAT, LON, helper_config=lambda q: pair.helper_config())
        [again] = restarted.participate(channel, query_ids=["dev-sp"])
        assert again.status == "duplicate"
        assert restarted.state.queries["dev-sp"].sealed.hex() == saved["sealed"]
        [third] = restarted.participate(channel, query_ids=["dev-sp"])
        assert third.status == "already_acknowledged"
        assert aggregated(channel, "dev-sp").aggregated_reports == 1


def test_a_budget_declines_and_a_helper_config_from_elsewhere_is_used_as_given(
    pair: Pair, tmp_path: Path
) -> None:
    with pair.channel() as channel:
        _create(channel, tmp_path, "dev-rr", sp=False)
        helper = pair.helper_config()  # from the helper itself
        poor = Device(
            tmp_path / "poor.json", LAT, LON, budget_epsilon=0.5, helper_config=lambda q: helper
        )
        [declined] = poor.participate(channel, query_ids=["dev-rr"])
        assert declined.status == "declined"

        unkeyed = Device(tmp_path / "unkeyed.json", LAT, LON)
        [needs] = unkeyed.participate(channel, query_ids=["dev-rr"])
        assert needs.status == "failed" and "helper_config" in needs.message
        # A helper config learnt elsewhere is used as given, and checked against the
        # leader's copy: any other key (here the leader's own) is refused before sending.
        leader_as_helper = Device(
            tmp_path / "odd.json",
            LAT,
            LON,
            helper_config=lambda q: HpkeConfig.decode(q.leader_hpke_config),
        )
        [refused] = leader_as_helper.participate(channel, query_ids=["dev-rr"])
        assert refused.status == "failed" and "refusing to upload" in refused.message
        other = generate_key_pair((helper.config_id + 1) % 256).config
        stranger = Device(tmp_path / "stranger.json", LAT, LON, helper_config=lambda q: other)
        [sent] = stranger.participate(channel, query_ids=["dev-rr"])
        assert sent.status == "failed" and "refusing to upload" in sent.message
        done = aggregated(channel, "dev-rr")
        assert (done.aggregated_reports, done.refused_reports) == (0, 0)
