"""The aggregation steps on real stores without gRPC: the helper answers a retried job from
its record without counting twice, refuses a report id seen in another job as a replay,
refuses a bad proof; the leader refuses a helper answer that does not match its job."""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aggregator.secure.aggregation_driver import HelperGarbage, finish, leader_half
from aggregator.secure.aggregation_handler import HelperHandler
from aggregator.secure.metrics import SecureMetrics
from aggregator.secure.store import HeldReport, SecureStore
from aggregator.secure.upload import LeaderUpload, held_body, held_fields
from ldpcollect.secure.query_vdaf import ROUND_VDAF, query_vdaf
from ldpcollect.secure.sealing import (
    ROLE_LEADER,
    generate_key_pair,
    open_input_share,
    seal_input_share,
)
from ldpcollect.secure.upload import SecureReport, shard_report
from ldpcollect.v1 import aggregation_pb2 as apb

T = 4
KEY = bytes(range(32))
LEADER, HELPER, COLLECTOR = generate_key_pair(1), generate_key_pair(2), generate_key_pair(3)


def round_params() -> dict[str, Any]:
    """A round query's parameters at T targets, for this module's helper and collector."""
    return {
        "vdaf": ROUND_VDAF,
        "targets": T,
        "upload_round": 1,
        "min_reports": 1,
        "noise_sigma": "",
        "collector_config": COLLECTOR.config.encode().hex(),
        "helper_config": HELPER.config.encode().hex(),
    }


def stores(tmp_path: Path) -> tuple[SecureStore, SecureStore]:
    vdaf = query_vdaf(ROUND_VDAF, T)
    empty = vdaf.encode_agg_share(vdaf.agg_init())
    leader, helper = SecureStore(tmp_path / "l.secure"), SecureStore(tmp_path / "h.secure")
    for store in (leader, helper):
        store.open()
    params = round_params()
    leader.create_query("q", params, KEY, empty)
    helper.provision_query("q", params, KEY, empty)
    return leader, helper


def held(rng: random.Random, answers: list[int]) -> HeldReport:
    vdaf = query_vdaf(ROUND_VDAF, T)
    report = shard_report(
        vdaf,
        LEADER.config,
        HELPER.config,
        "q",
        1,
        rng.randbytes(16),
        answers,
        rng.randbytes(vdaf.rand_size),
    )
    share = open_input_share(
        LEADER,
        ROLE_LEADER,
        "q",
        1,
        report.report_id,
        report.public_share,
        report.leader_ciphertext,
    )
    return HeldReport(report.report_id, report.encode(), share)


def test_a_retried_job_is_answered_from_the_record_and_counted_once(tmp_path: Path) -> None:
    leader, helper = stores(tmp_path)
    handler = HelperHandler(helper, HELPER, SecureMetrics())
    rng = random.Random(1)
    reports = [held(rng, [1, 0, 1, 0]) for _ in range(3)]
    half = leader_half(leader.query("q"), b"j" * 16, reports)
    first = handler.aggregate(half.request)
    again = handler.aggregate(half.request)
    assert first == again
    assert helper.query("q").aggregated == 3
    outcomes, _ = finish(leader.query("q"), half, first)
    assert [o for _, o in outcomes] == ["", "", ""]


def test_a_report_id_from_another_job_is_a_replay(tmp_path: Path) -> None:
    leader, helper = stores(tmp_path)
    metrics = SecureMetrics()
    handler = HelperHandler(helper, HELPER, metrics)
    report = held(random.Random(2), [0, 1, 1, 0])
    handler.aggregate(leader_half(leader.query("q"), b"a" * 16, [report]).request)
    replay = handler.aggregate(leader_half(leader.query("q"), b"b" * 16, [report]).request)
    assert replay.results[0].refusal == "REPLAY"
    assert (helper.query("q").aggregated, helper.query("q").refused) == (1, 1)
    sample = metrics.registry.get_sample_value
    assert sample("ldpcollect_secure_reports_total", {"outcome": "REPLAY"}) == 1
    assert sample("ldpcollect_secure_reports_total", {"outcome": "aggregated"}) == 1


def test_a_tampered_verifier_share_fails_the_proof_at_the_helper(tmp_path: Path) -> None:
    leader, helper = stores(tmp_path)
    handler = HelperHandler(helper, HELPER, SecureMetrics())
    half = leader_half(leader.query("q"), b"c" * 16, [held(random.Random(3), [1, 1, 1, 1])])
    share = bytearray(half.request.reports[0].leader_verifier_share)
    share[0] ^= 1
    half.request.reports[0].leader_verifier_share = bytes(share)
    answer = handler.aggregate(half.request)
    assert answer.results[0].refusal == "BAD_PROOF"
    assert helper.query("q").aggregated == 0


def test_the_leader_refuses_a_helper_answer_that_does_not_match_its_job(tmp_path: Path) -> None:
    leader, _ = stores(tmp_path)
    rng = random.Random(4)
    half = leader_half(leader.query("q"), b"d" * 16, [held(rng, [0, 0, 0, 1]) for _ in range(2)])
    garbage = apb.AggregationJobResponse(results=[apb.HelperResult(report_id=bytes(16))])
    with pytest.raises(HelperGarbage):
        finish(leader.query("q"), half, garbage)
    wrong = apb.AggregationJobResponse(
        results=[
            apb.HelperResult(report_id=r.report_id, verifier_message=b"\x00" * 32)
            for r in half.request.reports
        ]
    )
    outcomes, _ = finish(leader.query("q"), half, wrong)
    assert {o for _, o in outcomes} == {"HELPER_MISMATCH"}


def test_a_job_finished_twice_is_counted_once(tmp_path: Path) -> None:
    leader, helper = stores(tmp_path)
    handler = HelperHandler(helper, HELPER, SecureMetrics())
    rng = random.Random(5)
    for report in [held(rng, [1, 1, 0, 0]) for _ in range(2)]:
        leader.hold_reports("q", [(report.report_id, report.body, report.leader_share, b"")])
    job = leader.claim_job("q", 10, b"e" * 16)
    assert job is not None
    job_id, reports = job
    assert leader.claim_job("q", 10, b"f" * 16, frozenset({job_id})) is None
    half = leader_half(leader.query("q"), job_id, reports)
    outcomes, total = finish(leader.query("q"), half, handler.aggregate(half.request))
    vdaf = query_vdaf(ROUND_VDAF, T)

    def merge(old: bytes) -> bytes:
        return vdaf.encode_agg_share(vdaf.merge([vdaf.decode_agg_share(old), total]))

    leader.finish_job("q", job_id, outcomes, merge)
    leader.finish_job("q", job_id, outcomes, merge)  # a second worker, or a replayed finish
    assert leader.query("q").aggregated == 2
    assert leader.query("q").aggregate == vdaf.encode_agg_share(total)


def test_the_leader_counts_each_refused_upload_by_reason_and_holds_nothing(
    tmp_path: Path,
) -> None:
    leader, _ = stores(tmp_path)
    metrics = SecureMetrics()
    uploads = LeaderUpload(leader, LEADER, metrics, lambda: None)
    good = held(random.Random(6), [1, 0, 0, 1])
    report = SecureReport.decode(good.body)
    flipped = bytearray(report.leader_ciphertext)
    flipped[-1] ^= 1
    bad = SecureReport(
        "q", 1, report.report_id, report.public_share, bytes(flipped), report.helper_ciphertext
    )
    result = uploads.upload([bad.encode(), b"junk", good.body, good.body])
    assert (result.accepted, result.duplicates) == (1, 1)
    assert [(index, type(refusal).__name__) for index, _, refusal in result.rejected] == [
        (0, "ReportRefused"),
        (1, "ReportRefused"),
    ]
    sample = metrics.registry.get_sample_value
    assert sample("ldpcollect_secure_uploads_total", {"outcome": "BAD_CIPHERTEXT"}) == 1
    assert sample("ldpcollect_secure_uploads_total", {"outcome": "MALFORMED"}) == 1
    assert leader.pending("q") == {"q": 1}


def test_the_leader_holds_its_share_once_and_still_tells_a_conflict_from_a_duplicate(
    tmp_path: Path,
) -> None:
    leader, helper = stores(tmp_path)
    uploads = LeaderUpload(leader, LEADER, SecureMetrics(), lambda: None)
    rng = random.Random(7)
    good = held(rng, [0, 1, 0, 1])
    report = SecureReport.decode(good.body)
    # the same report id and share, sealed again: other bytes, so a conflict (REPLAY)
    resealed = SecureReport(
        "q",
        1,
        report.report_id,
        report.public_share,
        seal_input_share(
            LEADER.config,
            ROLE_LEADER,
            "q",
            1,
            report.report_id,
            report.public_share,
            good.leader_share,
        ),
        report.helper_ciphertext,
    )
    first = uploads.upload([good.body])
    again = uploads.upload([good.body, resealed.encode()])
    assert (first.accepted, again.duplicates) == (1, 1)
    assert [type(refusal).__name__ for _, _, refusal in again.rejected] == ["AlreadyExists"]
    job = leader.claim_job("q", 10, b"g" * 16)
    assert job is not None
    job_id, reports = job
    kept = SecureReport.decode(reports[0].body)
    assert report.leader_ciphertext not in reports[0].body
    assert kept.leader_ciphertext == hashlib.sha256(report.leader_ciphertext).digest()
    assert (kept.public_share, kept.helper_ciphertext) == (
        report.public_share,
        report.helper_ciphertext,
    )
    assert reports[0].leader_share == good.leader_share
    handler = HelperHandler(helper, HELPER, SecureMetrics())
    half = leader_half(leader.query("q"), job_id, reports)
    outcomes, _ = finish(leader.query("q"), half, handler.aggregate(half.request))
    assert outcomes == [(report.report_id, "")]


@given(
    query_id=st.text(min_size=1, max_size=30),
    public=st.binary(max_size=100),
    leader=st.binary(max_size=300),
    helper=st.binary(max_size=200),
)
def test_the_held_body_is_the_report_with_its_leader_ciphertext_hashed(
    query_id: str, public: bytes, leader: bytes, helper: bytes
) -> None:
    report = SecureReport(query_id, 7, bytes(range(16)), public, leader, helper)
    hashed = replace(report, leader_ciphertext=hashlib.sha256(leader).digest())
    held = held_body(report, report.encode())
    assert held == hashed.encode()
    assert held_fields(held) == (report.report_id, public, helper)
