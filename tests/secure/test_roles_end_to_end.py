"""Secure mode through real leader and helper processes: devices upload once to the leader,
the two aggregators verify and aggregate, the collector opens both sealed shares and gets
the exact counts; every bad upload gets its precise status and changes no count."""

from __future__ import annotations

import random
from collections.abc import Iterator
from math import isqrt
from pathlib import Path

import grpc
import pytest

from client.secure_collector import create_secure_query, release_secure_query
from client.secure_device import SecureDevice, upload
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.secure.sampling_pair import PRIO3_SAMPLING_PAIR
from ldpcollect.secure.sealing import HpkeKeyPair, generate_key_pair
from ldpcollect.secure.upload import BitsVdaf, SecureReport, answer_vdaf
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.vdaf.field import Field128
from ldpcollect.vdaf.flp import Flp
from ldpcollect.vdaf.prio3 import Prio3
from tests.secure.roles import ADMIN, Pair, admin_stub, aggregated, secure_pair
from tests.secure.test_sampling_pair import UncheckedPair

TARGETS = [11, 12, 13, 14, 15, 16]
RR = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})
SP = mechanism_from_params("sp", {"sampling_rate": "0.5"})
AUTH = (("authorization", f"Bearer {ADMIN}"),)


def lying_pair_vdaf(targets: int) -> BitsVdaf:
    """SP's pair VDAF with an encoder that lets the device pick r1 || r2 || w freely."""
    circuit = UncheckedPair(Field128, targets, isqrt(3 * targets + 1))
    return Prio3(PRIO3_SAMPLING_PAIR, Flp(circuit), 2)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with secure_pair(tmp_path_factory.mktemp("roles")) as running:
        yield running


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> HpkeKeyPair:
    return load_or_create_key_pair(tmp_path_factory.mktemp("collector") / "collector.key")


def new_device(pair: Pair, collector: HpkeKeyPair, min_reports: int = 1) -> SecureDevice:
    with pair.channel() as channel:
        query = create_secure_query(channel, ADMIN, collector, RR, TARGETS, min_reports)
        return pair.device(channel, query.query_id)


def test_rr_counts_through_both_aggregators_are_exact(pair: Pair, collector: HpkeKeyPair) -> None:
    device = new_device(pair, collector, min_reports=40)
    rng = random.Random(7)
    answers = [[rng.randrange(2) for _ in TARGETS] for _ in range(60)]
    with pair.channel() as channel:
        done = upload(channel, [device.seal_measurement(a) for a in answers])
        assert (done.accepted, done.duplicates, list(done.rejected)) == (60, 0, [])
        query = aggregated(channel, device.query.query_id)
        assert (query.aggregated_reports, query.refused_reports) == (60, 0)
        release = release_secure_query(channel, ADMIN, collector, device.query.query_id)
    assert release.reports == 60
    assert release.round_counts == [[sum(col) for col in zip(*answers, strict=True)]]


def test_sp_pairs_count_only_honest_devices_and_a_lying_pair_counts_nothing(
    pair: Pair, collector: HpkeKeyPair
) -> None:
    with pair.channel() as channel:
        query = create_secure_query(channel, ADMIN, collector, SP, TARGETS, 1)
        device = pair.device(channel, query.query_id)
        rng = random.Random(3)
        draws = [device.draw(rng.choice(TARGETS)) for _ in range(20)]
        honest = [device.seal(d) for d in draws]
        liar = SecureDevice(device.query, device.helper)
        liar.vdaf = lying_pair_vdaf(len(TARGETS))
        t = len(TARGETS)
        lies = [
            liar.seal_measurement([0] * t + [1] * t + [1]),  # all ones in round 2
            liar.seal_measurement([0] * t + [1, 1] + [0] * (t - 2) + [1]),  # two cells
        ]
        done = upload(channel, honest + lies)
        assert (done.accepted, list(done.rejected)) == (22, [])  # the leader cannot tell yet
        final = aggregated(channel, query.query_id)
        assert (final.aggregated_reports, final.refused_reports) == (20, 2)
        release = release_secure_query(channel, ADMIN, collector, query.query_id)
    expected = [
        [int(sum(d.answer_bits(r)[i] for d in draws)) for i in range(len(TARGETS))] for r in (1, 2)
    ]
    assert release.round_counts == expected


def replaced(body: bytes, **fields: object) -> bytes:
    report = SecureReport.decode(body)
    values = {**report.__dict__, **fields}
    return SecureReport(**values).encode()


def tampered(ciphertext: bytes) -> bytes:
    return ciphertext[:-1] + bytes([ciphertext[-1] ^ 1])


def test_each_bad_upload_gets_its_status_and_counts_nothing(
    pair: Pair, collector: HpkeKeyPair
) -> None:
    device = new_device(pair, collector)
    good = device.seal_measurement([1] * len(TARGETS))
    report = SecureReport.decode(good)
    other_t = SecureDevice(device.query, device.helper)
    other_t.vdaf = answer_vdaf(len(TARGETS) + 3)
    stranger = generate_key_pair(report.leader_ciphertext[0] ^ 0xFF)
    foreign = SecureDevice(device.query, device.helper)
    foreign.leader = stranger.config
    bad = {
        "tampered leader share": replaced(
            good, leader_ciphertext=tampered(report.leader_ciphertext)
        ),
        "tampered helper share": replaced(
            good, helper_ciphertext=tampered(report.helper_ciphertext)[:-1]
        ),
        "wrong key id": foreign.seal_measurement([0] * len(TARGETS)),
        "sharded for other targets": other_t.seal_measurement([0] * (len(TARGETS) + 3)),
        "other report id": replaced(good, report_id=bytes(16)),
        "other round": replaced(good, round=2),
        "not a report": b"\x05junk",
        "unknown query": replaced(good, query_id="no-such-query"),
    }
    expected = {
        "tampered leader share": (grpc.StatusCode.INVALID_ARGUMENT, "BAD_CIPHERTEXT"),
        "tampered helper share": (grpc.StatusCode.INVALID_ARGUMENT, "WRONG_LENGTH"),
        "wrong key id": (grpc.StatusCode.INVALID_ARGUMENT, "WRONG_CONFIG_ID"),
        "sharded for other targets": (grpc.StatusCode.INVALID_ARGUMENT, "WRONG_LENGTH"),
        "other report id": (grpc.StatusCode.INVALID_ARGUMENT, "BAD_CIPHERTEXT"),
        "other round": (grpc.StatusCode.INVALID_ARGUMENT, "WRONG_ROUND"),
        "not a report": (grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED"),
        "unknown query": (grpc.StatusCode.NOT_FOUND, "no secure query"),
    }
    names = list(bad)
    with pair.channel() as channel:
        done = upload(channel, [bad[n] for n in names] + [good, good])
        assert (done.accepted, done.duplicates) == (1, 1)
        got = {names[r.index]: (_code(r.code), r.message) for r in done.rejected}
        assert set(got) == set(names)
        for name, (code, word) in expected.items():
            assert got[name][0] == code, name
            assert word in got[name][1], (name, got[name][1])
        conflict = device.seal_measurement([0] * len(TARGETS), report_id=report.report_id)
        again = upload(channel, [conflict])
        assert again.rejected[0].code == grpc.StatusCode.ALREADY_EXISTS.value[0]
        assert "REPLAY" in again.rejected[0].message
        query = aggregated(channel, device.query.query_id)
        assert (query.aggregated_reports, query.refused_reports) == (1, 0)
        release = release_secure_query(channel, ADMIN, collector, device.query.query_id)
    assert release.round_counts == [[1] * len(TARGETS)]


def _code(value: int) -> grpc.StatusCode:
    return next(c for c in grpc.StatusCode if c.value[0] == value)


def test_admin_needs_its_token_and_release_needs_min_reports_and_happens_once(
    pair: Pair, collector: HpkeKeyPair
) -> None:
    device = new_device(pair, collector, min_reports=3)
    query_id = device.query.query_id
    with pair.channel() as channel:
        stub = admin_stub(channel)
        with pytest.raises(grpc.RpcError) as denied:
            stub.CloseSecureQuery(spb.CloseSecureQueryRequest(query_id=query_id))
        assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
        upload(channel, [device.seal_measurement([1, 0, 1, 0, 1, 0]) for _ in range(2)])
        aggregated(channel, query_id)
        with pytest.raises(grpc.RpcError) as early:
            stub.CollectShares(spb.CollectSharesRequest(query_id=query_id), metadata=AUTH)
        assert early.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # still open
        stub.CloseSecureQuery(spb.CloseSecureQueryRequest(query_id=query_id), metadata=AUTH)
        with pytest.raises(grpc.RpcError) as few:
            stub.CollectShares(spb.CollectSharesRequest(query_id=query_id), metadata=AUTH)
        assert few.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "min_reports" in str(few.value.details())
        late = upload(channel, [device.seal_measurement([1] * 6)])
        assert late.rejected[0].code == grpc.StatusCode.FAILED_PRECONDITION.value[0]


def test_a_release_gives_each_noised_share_once(pair: Pair, collector: HpkeKeyPair) -> None:
    with pair.channel() as channel:
        query = create_secure_query(channel, ADMIN, collector, RR, TARGETS, 1, noise_sigma="2")
        device = pair.device(channel, query.query_id)
        upload(channel, [device.seal_measurement([1] * 6) for _ in range(5)])
        aggregated(channel, query.query_id)
        first = release_secure_query(channel, ADMIN, collector, query.query_id)
        second = release_secure_query(channel, ADMIN, collector, query.query_id)
    assert first.round_counts == second.round_counts  # the same noise, not fresh draws
    assert first.noise_variance_per_count > 2 * 3.9  # both aggregators' sigma^2 = 4


def test_the_secure_ledger_refuses_over_budget_before_either_share_and_states_the_views_honestly(
    tmp_path: Path, collector: HpkeKeyPair
) -> None:
    with secure_pair(tmp_path) as pair, pair.channel() as channel:
        stub = admin_stub(channel)
        query = create_secure_query(channel, ADMIN, collector, RR, TARGETS, 1, noise_sigma="2")
        device = pair.device(channel, query.query_id)
        upload(channel, [device.seal_measurement([0, 1] * 3) for _ in range(4)])
        aggregated(channel, query.query_id)
        stub.SetSecureBudget(pb.SetBudgetRequest(epsilon=0.01, delta=1e-6), metadata=AUTH)
        with pytest.raises(grpc.RpcError) as refused:
            release_secure_query(channel, ADMIN, collector, query.query_id)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        stub.SetSecureBudget(pb.SetBudgetRequest(epsilon=0, delta=0), metadata=AUTH)
        answer = stub.CollectShares(
            spb.CollectSharesRequest(query_id=query.query_id), metadata=AUTH
        )  # the helper had released nothing: it releases now
        ledger = stub.GetSecureLedger(pb.GetLedgerRequest(), metadata=AUTH)
    views = {claim.view: claim for claim in answer.claims}
    assert set(views) == {"aggregator", "collector+aggregator", "public"}
    # once the release is public, one aggregator sees the counts through the other's noise
    assert views["aggregator"].epsilon == views["collector+aggregator"].epsilon
    assert "Once the estimates are public" in views["aggregator"].explanation
    assert 0 < views["public"].epsilon == views["collector+aggregator"].epsilon < float("inf")
    assert [entry.query_id for entry in ledger.entries][-1] == query.query_id
