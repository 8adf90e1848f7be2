"""Secure mode against a leader that cheats, through real processes: a real helper started with
NO policy options (so its defaults hold: a minimum batch of 100), a real leader whose link to
the helper, and whose answers to the collector, a man in the middle rewrites
(`malicious_leader.py`), real devices (the SDK and the CLI) and the real collector.

Each attack is refused by the helper or detected by a device or the collector, the helper
never releases a share its policy forbids, and an honest run still counts exactly."""

from __future__ import annotations

import random
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from client.secure_collector import LeaderMisstated, create_secure_query, release_secure_query
from client.secure_device import SecureDevice, fetch_query, upload
from client.secure_keys import UntrustedAggregator, fetch_helper_config
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.secure.sealing import HpkeConfig, HpkeKeyPair, generate_key_pair
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.v1 import aggregation_pb2_grpc as apb_grpc
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.wire import mechanism_to_proto
from tests.secure.malicious_leader import Rewrites, man_in_the_middle, rewriting
from tests.secure.roles import ADMIN, PEER, Role, aggregated, wait_until
from tests.serving import run_cli

TARGETS = [31, 32, 33, 34, 35, 36]
RR = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})
BATCH = 100  # the helper's default minimum batch
HELPER = "/ldpcollect.v1.Helper/"
ADMIN_RPC = "/ldpcollect.v1.SecureAdmin/"
PEER_AUTH = (("authorization", f"Bearer {PEER}"),)


class Lines:
    """A child's stdout, read line by line in a thread (its later lines: the helper's
    record of each query it takes part in)."""

    def __init__(self, role: Role) -> None:
        assert role.proc is not None and role.proc.stdout is not None
        self.lines: list[str] = []
        stream = role.proc.stdout
        threading.Thread(target=lambda: self.lines.extend(stream), daemon=True).start()

    def mentioning(self, text: str) -> str:
        return wait_until(lambda: next((line for line in self.lines if text in line), None), 30)


@dataclass
class Setup:
    helper: Role
    leader: Role
    to_helper: Rewrites  # what the leader's operator controls on the peer channel
    to_collector: Rewrites  # what the leader tells the collector
    collector_address: str  # the collector reaches the leader through it
    collector: HpkeKeyPair
    collector_key: Path
    helper_lines: Lines


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("malicious")
    helper = Role("helper", tmp / "helper.db", "127.0.0.1:0")  # no policy options at all
    helper.start()
    lines = Lines(helper)
    with man_in_the_middle(helper.address) as (to_helper_address, to_helper):
        leader = Role("leader", tmp / "leader.db", "127.0.0.1:0", helper=to_helper_address)
        try:
            leader.start()
            with man_in_the_middle(leader.address) as (collector_address, to_collector):
                key = tmp / "collector.key"
                yield Setup(
                    helper,
                    leader,
                    to_helper,
                    to_collector,
                    collector_address,
                    load_or_create_key_pair(key),
                    key,
                    lines,
                )
        finally:
            leader.stop()
            helper.stop()


@pytest.fixture(autouse=True)
def honest_again(setup: Setup) -> Iterator[None]:
    yield
    setup.to_helper.clear()
    setup.to_collector.clear()


def leader_channel(setup: Setup) -> grpc.Channel:
    return grpc.insecure_channel(setup.leader.address)


def create(
    setup: Setup, query_id: str, min_reports: int = BATCH, sigma: str = ""
) -> spb.SecureQuery:
    with leader_channel(setup) as channel:
        return create_secure_query(
            channel, ADMIN, setup.collector, RR, TARGETS, min_reports, sigma, query_id
        )


def helper_key(setup: Setup) -> HpkeConfig:
    with grpc.insecure_channel(setup.helper.address) as channel:
        return fetch_helper_config(channel)


def fill(setup: Setup, query_id: str, n: int = BATCH) -> list[list[int]]:
    """`n` honest devices' answers, uploaded and aggregated at both."""
    rng = random.Random(query_id)
    answers = [[rng.randrange(2) for _ in TARGETS] for _ in range(n)]
    with leader_channel(setup) as channel, grpc.insecure_channel(setup.helper.address) as h:
        device = SecureDevice(fetch_query(channel, query_id), fetch_helper_config(h))
        done = upload(channel, [device.seal_measurement(a) for a in answers])
        assert (done.accepted, list(done.rejected)) == (n, [])
        assert aggregated(channel, query_id).aggregated_reports == n
    return answers


def exact(answers: list[list[int]]) -> list[list[int]]:
    return [[sum(column) for column in zip(*answers, strict=True)]]


def not_found_at_leader(setup: Setup, query_id: str) -> bool:
    with leader_channel(setup) as channel:
        try:
            fetch_query(channel, query_id)
        except grpc.RpcError as error:
            return error.code() == grpc.StatusCode.NOT_FOUND
    return False


def test_a_helper_with_no_policy_options_refuses_a_query_with_min_reports_1(
    setup: Setup,
) -> None:
    rr = ["--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3", "--targets", "1,2,3"]
    create_cli = [
        "secure",
        "create",
        "-q",
        "tiny",
        *rr,
        "--collector-key",
        str(setup.collector_key),
    ]
    refused = run_cli(
        ADMIN, *create_cli, "--min-reports", "1", server=setup.leader.address, ok=False
    )
    assert refused.returncode == 1
    assert "FAILED_PRECONDITION" in refused.stderr and "--min-batch 100" in refused.stderr
    assert "min_reports 1 is below" in refused.stderr
    assert not_found_at_leader(setup, "tiny")
    # nothing stayed at the helper either: the same id is provisioned afresh, differently
    run_cli(ADMIN, *create_cli, "--min-reports", "100", server=setup.leader.address)


def test_malicious_leader_provisioning_min_reports_1_is_refused_and_leaves_nothing(
    setup: Setup,
) -> None:
    def lower(message: apb.ProvisionQueryRequest) -> None:
        message.min_reports = 1

    setup.to_helper.requests[HELPER + "ProvisionQuery"] = rewriting(
        apb.ProvisionQueryRequest, lower
    )
    with pytest.raises(grpc.RpcError) as refused:
        create(setup, "lowered")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "--min-batch 100" in str(refused.value.details())
    assert not_found_at_leader(setup, "lowered")
    setup.to_helper.clear()
    assert create(setup, "lowered").min_reports == BATCH  # the helper had kept nothing


def test_malicious_leader_provisioning_no_noise_is_detected_by_the_collector(
    setup: Setup,
) -> None:
    def no_noise(message: apb.ProvisionQueryRequest) -> None:
        message.noise_sigma = ""

    setup.to_helper.requests[HELPER + "ProvisionQuery"] = rewriting(
        apb.ProvisionQueryRequest, no_noise
    )
    created = create(setup, "noiseless", sigma="2")
    setup.to_helper.clear()
    fill(setup, "noiseless")

    def claim_noise(message: spb.CollectSharesResponse) -> None:
        message.helper_noise_sigma = "2"  # the leader hides that the helper added none

    setup.to_collector.responses[ADMIN_RPC + "CollectShares"] = rewriting(
        spb.CollectSharesResponse, claim_noise
    )
    does_not_open = pytest.raises(LeaderMisstated, match="helper's aggregate share does not open")
    with grpc.insecure_channel(setup.collector_address) as channel, does_not_open:
        release_secure_query(channel, ADMIN, setup.collector, "noiseless", expected=created)
    setup.to_collector.clear()
    less = pytest.raises(LeaderMisstated, match="helper added noise sigma none, less than")
    with grpc.insecure_channel(setup.collector_address) as channel, less:
        release_secure_query(channel, ADMIN, setup.collector, "noiseless", expected=created)


def test_malicious_leader_lying_about_the_report_count_is_refused_or_detected(
    setup: Setup,
) -> None:
    created = create(setup, "counted")
    answers = fill(setup, "counted")

    def more(message: apb.AggregateShareRequest) -> None:
        message.reports += 1

    setup.to_helper.requests[HELPER + "AggregateShare"] = rewriting(apb.AggregateShareRequest, more)
    with leader_channel(setup) as channel, pytest.raises(grpc.RpcError) as refused:
        release_secure_query(channel, ADMIN, setup.collector, "counted")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "the aggregators disagree" in str(refused.value.details())
    setup.to_helper.clear()

    lies = {
        "reports": lambda m: setattr(m, "reports", m.reports - 10),
        "min_reports": lambda m: setattr(m.query, "min_reports", 1),
    }
    for lie in lies.values():
        setup.to_collector.responses[ADMIN_RPC + "CollectShares"] = rewriting(
            spb.CollectSharesResponse, lie
        )
        with grpc.insecure_channel(setup.collector_address) as channel:
            with pytest.raises(LeaderMisstated, match="helper's aggregate share does not open"):
                release_secure_query(channel, ADMIN, setup.collector, "counted")
            with pytest.raises(LeaderMisstated):  # and the collector's own record says so
                release_secure_query(channel, ADMIN, setup.collector, "counted", expected=created)
    setup.to_collector.clear()
    with grpc.insecure_channel(setup.collector_address) as channel:
        release = release_secure_query(channel, ADMIN, setup.collector, "counted", expected=created)
    assert (release.reports, release.round_counts) == (BATCH, exact(answers))


def test_malicious_leader_asking_again_or_below_the_floor_gets_nothing_new(setup: Setup) -> None:
    created = create(setup, "twice", sigma="2")
    fill(setup, "twice")
    with leader_channel(setup) as channel:
        release_secure_query(channel, ADMIN, setup.collector, "twice", expected=created)
    with grpc.insecure_channel(setup.helper.address) as channel:
        helper = apb_grpc.HelperStub(channel)  # the leader's operator holds the peer token
        ask = apb.AggregateShareRequest(query_id="twice", reports=BATCH)
        first = helper.AggregateShare(ask, metadata=PEER_AUTH)
        again = helper.AggregateShare(ask, metadata=PEER_AUTH)
        assert again.sealed_share == first.sealed_share  # no fresh noise to average away
        assert (again.reports, again.noise_sigma) == (BATCH, "2")
        with pytest.raises(grpc.RpcError) as other:
            helper.AggregateShare(
                apb.AggregateShareRequest(query_id="twice", reports=BATCH - 1), metadata=PEER_AUTH
            )
        assert other.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        # a query provisioned straight at the helper, released with no report at all
        helper.ProvisionQuery(provision("empty", setup.collector), metadata=PEER_AUTH)
        with pytest.raises(grpc.RpcError) as empty:
            helper.AggregateShare(
                apb.AggregateShareRequest(query_id="empty", reports=0), metadata=PEER_AUTH
            )
    assert empty.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    words = str(empty.value.details())
    assert "--min-batch 100" in words and "aggregated 0 reports" in words


def provision(
    query_id: str, collector: HpkeKeyPair, min_reports: int = BATCH
) -> apb.ProvisionQueryRequest:
    return apb.ProvisionQueryRequest(
        query_id=query_id,
        vdaf="round",
        targets=len(TARGETS),
        upload_round=1,
        verify_key=secrets.token_bytes(32),
        collector_hpke_config=collector.config.encode(),
        min_reports=min_reports,
        mechanism=mechanism_to_proto(RR),
    )


def test_malicious_leader_substituting_the_helper_key_is_refused_by_every_device(
    setup: Setup,
) -> None:
    forged = generate_key_pair(7)

    def substitute(message: apb.GetHpkeConfigResponse) -> None:
        message.hpke_config = forged.config.encode()

    setup.to_helper.responses[HELPER + "GetHpkeConfig"] = rewriting(
        apb.GetHpkeConfigResponse, substitute
    )
    create(setup, "forged")
    with leader_channel(setup) as channel:
        query = fetch_query(channel, "forged")
    assert query.helper_hpke_config == forged.config.encode()  # what the leader hands out
    with pytest.raises(UntrustedAggregator, match="not the key the helper publishes"):
        SecureDevice(query, helper_key(setup))
    pinned = setup.helper.db.with_name(setup.helper.db.name + ".hpke-helper.config")
    for source in (["--helper", setup.helper.address], ["--helper-config", str(pinned)]):
        done = run_cli(
            ADMIN, "secure", "simulate", "-q", "forged", "-n", "5", *source,
            server=setup.leader.address, ok=False,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert "refusing to upload" in done.stderr and "helper publishes" in done.stderr
    bare = run_cli(
        ADMIN, "secure", "simulate", "-q", "forged", server=setup.leader.address, ok=False
    )
    assert bare.returncode == 2 and "--helper" in bare.stderr
    with leader_channel(setup) as channel:
        state = fetch_query(channel, "forged")
    assert (state.pending_reports, state.aggregated_reports, state.refused_reports) == (0, 0, 0)


def test_malicious_leader_sealing_to_another_collector_key_is_refused_by_a_pinned_helper(
    setup: Setup, tmp_path: Path
) -> None:
    # the unpinned helper records and prints the key each query names, for its operator
    create(setup, "audited")
    line = setup.helper_lines.mentioning("query audited")
    assert setup.collector.config.encode().hex() in line and "not pinned" in line
    pinned = Role(
        "helper",
        tmp_path / "pinned.db",
        "127.0.0.1:0",
        extra=("--collector-config", setup.collector.config.encode().hex()),
    )
    pinned.start()
    try:
        with grpc.insecure_channel(pinned.address) as channel:
            helper = apb_grpc.HelperStub(channel)
            stranger = generate_key_pair(3)
            with pytest.raises(grpc.RpcError) as refused:
                helper.ProvisionQuery(provision("elsewhere", stranger), metadata=PEER_AUTH)
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "--collector-config" in str(refused.value.details())
            helper.ProvisionQuery(provision("elsewhere", setup.collector), metadata=PEER_AUTH)
    finally:
        pinned.stop()
