"""Aggregator values -> wire messages."""

from __future__ import annotations

import math
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from aggregator.estimates_wire import encode_estimates
from aggregator.model import QueryInfo, ReleaseRecord
from aggregator.release import StoredLedger, epoch_seconds
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.wire import mechanism_to_proto, noise_sigma_to_proto, scheme_from_text


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(round(seconds * 1e9))
    return ts


def query_to_proto(info: QueryInfo) -> pb.Query:
    spec = info.spec
    return pb.Query(
        query_id=spec.query_id,
        description=spec.description,
        mechanism=mechanism_to_proto(spec.mechanism),
        location_scheme=scheme_from_text(spec.scheme),
        targets=spec.targets,
        rounds=spec.mechanism.rounds,
        current_round=info.current_round,
        state=int(info.status),  # type: ignore[arg-type]
        min_reports=spec.min_reports,
        noise=noise_sigma_to_proto(spec.noise_sigma),
        reports_per_round=info.reports_per_round,
        completed_devices=info.completed_devices,
        created_at=timestamp(info.created_at),
        require_tokens=spec.token_issuer is not None,
        token_issuer=spec.token_issuer or "",
    )


def claim_to_proto(claim: dict[str, Any]) -> pb.PrivacyClaim:
    """A stored claim (`PrivacyClaim.to_json()`: null, or legacy "inf", for no bound) as its
    wire message (+inf for no bound)."""
    from ldpcollect.accounting.release_cost import PrivacyClaim  # on first use: see release.py

    c = PrivacyClaim.from_json(claim)
    return pb.PrivacyClaim(
        view=c.view,
        guarantee=c.guarantee,
        epsilon=c.epsilon,
        delta=c.delta,
        epsilon_bun_steinke=c.epsilon_bun_steinke,
        rho=c.rho,
        pure_epsilon=c.pure_epsilon,
        explanation=c.explanation,
        headline=c.headline,
        figures=c.figures,
        reveal_probability=c.reveal_probability,
    )


def release_to_proto(record: ReleaseRecord) -> pb.QueryRelease:
    """The release as its wire message; the estimates are encoded with numpy
    (`estimates_wire`) and parsed with the rest, one message per target costing too much at
    tens of thousands of targets."""
    head = pb.QueryRelease(
        query_id=record.query_id,
        participants=record.participants,
        released_at=timestamp(record.released_at),
        claims=[claim_to_proto(c) for c in record.claims],
    )
    return pb.QueryRelease.FromString(head.SerializeToString() + encode_estimates(record.estimates))


def release_to_proto_per_message(record: ReleaseRecord) -> pb.QueryRelease:
    """`release_to_proto` one message per estimate (the reference its tests compare with)."""
    return pb.QueryRelease(
        query_id=record.query_id,
        participants=record.participants,
        released_at=timestamp(record.released_at),
        estimates=[
            pb.TargetEstimate(
                location_id=e.location_id,
                estimate=e.estimate,
                std_error=e.std_error,
                ci_low=e.ci_low,
                ci_high=e.ci_high,
                participants=e.participants,
                round_counts=e.round_counts,
            )
            for e in record.estimates
        ],
        claims=[claim_to_proto(c) for c in record.claims],
    )


def _num(value: object) -> float:
    """A summary number: "inf" strings, and None (no limit), become +inf."""
    if value is None:
        return math.inf
    if isinstance(value, str | int | float):
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def _opt(value: object) -> float | None:
    return None if value is None else _num(value)


def ledger_to_proto(body: str | None) -> pb.Ledger:
    """GetLedger / SetBudget: the accounting's `summary()` plus budget history and notes."""
    stored = StoredLedger.from_body(body)
    ledger = stored.ledger
    summary = ledger.summary()
    odometer = summary["odometer"]
    notes = list(summary["notes"])
    notes.append(
        f"Claims are stated at delta {stored.reporting_delta:g} "
        + (
            "(the budget's delta)"
            if ledger.mode in ("zcdp", "renyi")
            else "(a fixed reporting delta: no (epsilon, delta) budget is set)"
        )
        + "; each entry keeps the delta in force when it was released. The filter charges zCDP "
        "rho (or pure epsilon under a pure budget), which does not depend on delta."
    )
    notes.append(
        f"The odometer ({odometer['method']}) bounds the public's realized loss at any time, "
        "whatever budget changes happened."
    )
    late = [c for c in stored.budget_changes if int(c.get("releases_before", 0)) > 0]
    legacy = [c for c in late if not c.get("new_filter")]
    if legacy:
        notes.append(
            f"The budget was changed {len(legacy)} time(s) after releases had been charged "
            "within one filter (recorded by an earlier version, which allowed it): such a "
            "change voids that filter's guarantee if it depended on released results; rely on "
            "the odometer."
        )
    filters = [c for c in late if c.get("new_filter")]
    if filters:
        notes.append(
            f"{len(filters)} new filter(s) were started after releases (latest after "
            f"{filters[-1]['releases_before']} release(s)); each budget limits the releases "
            "after it, and the odometer covers every release."
        )
    if stored.unaccounted:
        notes.append(
            f"{len(stored.unaccounted)} release(s) were made by an aggregator without privacy "
            "accounting and carry no claims; they are NOT counted in spent or the odometer: "
            + ", ".join(str(e.get("query_id")) for e in stored.unaccounted)
        )
    return pb.Ledger(
        budget_epsilon=ledger.epsilon,
        budget_delta=ledger.delta,
        budget_mode=ledger.mode,
        currency=ledger.currency,
        budget_rho=_opt(summary["budget"]["rho"]),
        spent=_num(summary["spent"]),
        remaining=_opt(summary["remaining"]),
        spent_rho=_num(summary["spent_rho"]),
        remaining_rho=_num(summary["remaining_rho"]),
        spent_epsilon=_num(summary["spent_epsilon"]),
        remaining_epsilon=_num(summary["remaining_epsilon"]),
        spent_epsilon_bun_steinke=_num(summary["spent_epsilon_bun_steinke"]),
        spent_pure_epsilon=_opt(summary["spent_pure_epsilon"]),
        odometer_epsilon=_num(summary["odometer_epsilon"]),
        odometer_delta=_num(summary["odometer_delta"]),
        odometer_method=str(odometer["method"]),
        reporting_delta=stored.reporting_delta,
        entries=[
            pb.LedgerEntry(
                query_id=str(e["query_id"]),
                released_at=timestamp(epoch_seconds(str(e["released_at"]))),
                claims=[claim_to_proto(c) for c in e["claims"]],
                charged=_opt(e["charged"]),
            )
            for e in summary["releases"]
        ],
        budget_changes=[
            pb.BudgetChange(
                epsilon=float(c["epsilon"]),
                delta=float(c["delta"]),
                changed_at=timestamp(epoch_seconds(str(c["changed_at"]))),
                releases_before=int(c["releases_before"]),
                new_filter=bool(c.get("new_filter", False)),
                no_budget=bool(c.get("no_budget", False)),
            )
            for c in stored.budget_changes
        ],
        notes=notes,
        filter_start=ledger.filter_start,
        no_budget=ledger.no_budget,
    )
