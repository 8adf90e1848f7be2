"""The helper's own policy: each rule refuses by name and leaves nothing behind; the noise it
adds is the query's raised to its floor; its own ledger refuses a query, and a release,
beyond its budget; at release it counts itself. On a real store, without gRPC."""

from __future__ import annotations

import random
import secrets
from fractions import Fraction
from pathlib import Path

import pytest

from aggregator.release import StoredLedger, set_budget_function
from aggregator.secure.aggregation_driver import leader_half
from aggregator.secure.aggregation_handler import HelperHandler
from aggregator.secure.helper_policy import HelperPolicy, PolicyRefusal
from aggregator.secure.metrics import SecureMetrics
from aggregator.secure.store import HeldReport, SecureStore
from aggregator.secure.views import secure_claims
from ldpcollect.accounting.ledger import BudgetExceeded, PrivacyLedger
from ldpcollect.accounting.release_cost import PrivacyClaim
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy
from ldpcollect.secure.query_vdaf import ROUND_VDAF, query_vdaf
from ldpcollect.secure.sealing import (
    ROLE_HELPER,
    ROLE_LEADER,
    generate_key_pair,
    open_aggregate_share,
    open_input_share,
)
from ldpcollect.secure.share_binding import ShareBinding, mechanism_text
from ldpcollect.secure.upload import shard_report
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.wire import mechanism_to_proto

RR = RandomizedResponse("0.85", "0.3")
T = 4
LEADER, HELPER, COLLECTOR = generate_key_pair(1), generate_key_pair(2), generate_key_pair(3)
COLLECTOR_CONFIG = COLLECTOR.config.encode()


@pytest.mark.parametrize(
    ("policy", "min_reports", "mechanism", "targets", "rule"),
    [
        (HelperPolicy(), 99, RR, T, "--min-batch 100"),
        (HelperPolicy(mechanisms=("sp",)), 100, RR, T, "--accept-mechanism"),
        (HelperPolicy(), 100, RandomizedResponse("1", "0.3"), T, "no-privacy mechanisms"),
        (HelperPolicy(max_targets=3), 100, RR, T, "--max-targets 3"),
        (HelperPolicy(max_local_epsilon=1.0), 100, RR, T, "--max-local-epsilon 1"),
        (HelperPolicy(collector_configs=(bytes(33),)), 100, RR, T, "--collector-config"),
    ],
)
def test_each_rule_refuses_naming_itself(
    policy: HelperPolicy, min_reports: int, mechanism: Mechanism, targets: int, rule: str
) -> None:
    with pytest.raises(PolicyRefusal, match=f"the helper's policy refuses \\({rule}"):
        policy.check_query(min_reports, mechanism, targets, COLLECTOR_CONFIG)


def test_a_query_within_every_rule_is_accepted() -> None:
    strict = HelperPolicy(
        min_batch=50,
        mechanisms=("rr", "sp"),
        max_targets=T,
        max_local_epsilon=6.0,
        collector_configs=(COLLECTOR_CONFIG,),
    )
    for mechanism in (RR, SamplingPrivacy("0.5")):
        strict.check_query(50, mechanism, T, COLLECTOR_CONFIG)


def test_the_noise_added_is_the_querys_never_below_the_floor() -> None:
    floor = HelperPolicy(min_noise_sigma=Fraction(3))
    assert floor.noise_sigma(None) == 3
    assert floor.noise_sigma(Fraction(2)) == 3
    assert floor.noise_sigma(Fraction(5)) == 5
    assert HelperPolicy().noise_sigma(Fraction(2)) == 2
    assert HelperPolicy().noise_sigma(None) is None


def test_at_release_the_helper_needs_its_floor_and_the_querys_minimum() -> None:
    policy = HelperPolicy(min_batch=10)
    policy.check_release(10, 10)
    for aggregated, minimum in ((9, 1), (19, 20)):
        with pytest.raises(PolicyRefusal, match=f"aggregated {aggregated} reports"):
            policy.check_release(aggregated, minimum)


def provision(query_id: str, min_reports: int = 1, sigma: str = "") -> apb.ProvisionQueryRequest:
    return apb.ProvisionQueryRequest(
        query_id=query_id,
        vdaf=ROUND_VDAF,
        targets=T,
        upload_round=1,
        verify_key=secrets.token_bytes(32),
        collector_hpke_config=COLLECTOR_CONFIG,
        noise_sigma=sigma,
        min_reports=min_reports,
        mechanism=mechanism_to_proto(RR),
    )


def helper(tmp_path: Path, policy: HelperPolicy) -> tuple[HelperHandler, list[str]]:
    store = SecureStore(tmp_path / "h.secure")
    store.open()
    audit: list[str] = []
    return HelperHandler(store, HELPER, SecureMetrics(), policy=policy, audit=audit.append), audit


def test_provisioning_records_the_noise_and_the_collector_key_for_audit(tmp_path: Path) -> None:
    handler, audit = helper(tmp_path, HelperPolicy(min_batch=1, min_noise_sigma=Fraction(3)))
    answer = handler.provision(provision("q", sigma="2"))
    assert answer.noise_sigma == "3"
    stored = handler.store.query("q").params
    assert (stored["noise_sigma"], stored["query_noise_sigma"]) == ("3", "2")
    assert stored["collector_config"] == COLLECTOR_CONFIG.hex()
    [line] = audit
    assert "query q" in line and COLLECTOR_CONFIG.hex() in line and "not pinned" in line


def test_a_refused_query_leaves_nothing_at_the_helper(tmp_path: Path) -> None:
    handler, audit = helper(tmp_path, HelperPolicy())
    with pytest.raises(PolicyRefusal, match="--min-batch 100"):
        handler.provision(provision("q", min_reports=1))
    assert not handler.store.has_query("q") and audit == []


def test_the_helpers_own_ledger_refuses_a_query_beyond_its_budget(tmp_path: Path) -> None:
    handler, _ = helper(tmp_path, HelperPolicy(min_batch=1))
    handler.store.update_ledger(set_budget_function(0.5, 1e-6))
    with pytest.raises(PolicyRefusal, match="its own ledger"):
        handler.provision(provision("q", sigma="2"))
    assert not handler.store.has_query("q")


def aggregate_one(handler: HelperHandler, query_id: str, answers: list[int]) -> None:
    """One honest report through the helper's job step (the leader's half computed here)."""
    query = handler.store.query(query_id)
    vdaf = query_vdaf(ROUND_VDAF, T)
    rng = random.Random(5)
    report = shard_report(
        vdaf, LEADER.config, HELPER.config, query_id, 1, rng.randbytes(16), answers,
        rng.randbytes(vdaf.rand_size),
    )  # fmt: skip
    share = open_input_share(
        LEADER, ROLE_LEADER, query_id, 1, report.report_id, report.public_share,
        report.leader_ciphertext,
    )  # fmt: skip
    half = leader_half(
        query, secrets.token_bytes(16), [HeldReport(report.report_id, report.encode(), share)]
    )
    [result] = handler.aggregate(half.request).results
    assert result.refusal == ""


def fitting_budget(claims: list[PrivacyClaim]) -> float:
    """The smallest epsilon budget (delta 1e-6) admitting one such release, to 1e-6."""
    low, high = 0.0, 1e4
    while high - low > 1e-6:
        middle = (low + high) / 2
        try:
            PrivacyLedger(middle, 1e-6).check(claims)
            high = middle
        except BudgetExceeded:
            low = middle
    return high


def test_the_release_is_charged_to_the_helpers_ledger_and_bound_to_its_count_and_noise(
    tmp_path: Path,
) -> None:
    handler, _ = helper(tmp_path, HelperPolicy(min_batch=1))
    claims = secure_claims(RR, T, None, 1e-6, 1)
    handler.store.update_ledger(set_budget_function(1.2 * fitting_budget(claims), 1e-6))
    for query_id in ("q", "r"):  # each fits the budget alone
        handler.provision(provision(query_id))
        aggregate_one(handler, query_id, [1, 0, 0, 1])
    answer = handler.aggregate_share(apb.AggregateShareRequest(query_id="q", reports=1))
    assert (answer.reports, answer.noise_sigma) == (1, "")
    binding = ShareBinding("q", 1, ROUND_VDAF, T, 1, mechanism_text(RR.name, RR.params()), 1, "")
    opened = open_aggregate_share(COLLECTOR, ROLE_HELPER, binding, answer.sealed_share)
    assert len(opened) == len(handler.store.query("q").aggregate)
    charged = StoredLedger.from_body(handler.store.ledger()).ledger.releases
    assert [release.query_id for release in charged] == ["q"]
    with pytest.raises(PolicyRefusal, match="its own ledger"):  # both would not fit
        handler.aggregate_share(apb.AggregateShareRequest(query_id="r", reports=1))
    assert handler.store.query("r").sealed_share is None
