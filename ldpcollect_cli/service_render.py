"""How the service commands show wire messages: plain JSON objects and rich tables."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.protobuf.message import Message
from rich import box
from rich.console import Console
from rich.table import Table

from client.secure_admin import as_query
from ldpcollect import geo, wire
from ldpcollect.errors import ParameterError
from ldpcollect.privacy_headline import (
    Detail,
    Headline,
    ledger_headline,
    release_headline,
    unbounded_words,
)
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb

STATE_NAMES = {
    pb.QUERY_STATE_OPEN: "open",
    pb.QUERY_STATE_CLOSED: "closed",
    pb.QUERY_STATE_RELEASED: "released",
}


def number(value: float) -> float | None:
    """JSON has no infinity or NaN: such a value is written as null, and the object holding it
    says why in its `null_reasons`."""
    return value if math.isfinite(value) else None


def _claim_reasons(claim: pb.PrivacyClaim, data: dict[str, Any]) -> dict[str, str]:
    reasons: dict[str, str] = {}
    for key in ("epsilon", "epsilon_bun_steinke"):
        if data[key] is None:
            reasons[key] = f"no finite bound at delta {claim.delta:g} ({claim.guarantee})"
    if data["rho"] is None:
        reasons["rho"] = "no zCDP bound for this view"
    if data["pure_epsilon"] is None:
        reasons["pure_epsilon"] = "no pure-DP bound for this view"
    for name, value in data["figures"].items():
        if value is None:
            reasons[f"figures.{name}"] = "this method gives no finite bound here"
    return reasons


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")


def cell_ids_json(scheme_text: str, cells: Iterable[int]) -> list[int | str]:
    """Location ids as people and tools read them: grid ids as integers, H3 cells as hex."""
    try:
        scheme = geo.scheme_from_text(scheme_text)
    except ParameterError:
        return [int(c) for c in cells]
    return [scheme.cell_json(int(c)) for c in cells]


def query_json(query: pb.Query) -> dict[str, object]:
    try:
        mechanism = wire.mechanism_from_proto(query.mechanism)
        mech_name, params = mechanism.name, mechanism.params()
    except ParameterError:
        mech_name, params = "invalid", {}
    scheme = _scheme_text(query)
    return {
        "query_id": query.query_id,
        "description": query.description,
        "mechanism": mech_name,
        "params": params,
        "scheme": scheme,
        "targets": cell_ids_json(scheme, query.targets),
        "rounds": int(query.rounds),
        "current_round": int(query.current_round),
        "state": STATE_NAMES.get(query.state, "unspecified"),
        "min_reports": int(query.min_reports),
        "noise_sigma": query.noise.sigma or None,
        "reports_per_round": [int(n) for n in query.reports_per_round],
        "completed_devices": int(query.completed_devices),
        "created_at": query.created_at.ToJsonString() if query.HasField("created_at") else None,
        "require_tokens": query.require_tokens,
        "token_issuer": query.token_issuer or None,
        "secure": False,
    }


def secure_query_json(query: spb.SecureQuery) -> dict[str, object]:
    """A secure query in `query_json`'s shape (`"secure": true`), plus what only it has: the
    round its one upload is sealed for, reports aggregated at both aggregators, held at the
    leader and refused after upload, and the aggregators' names in token challenges."""
    return {
        **query_json(as_query(query)),
        "secure": True,
        "upload_round": int(query.upload_round),
        "aggregated_reports": int(query.aggregated_reports),
        "pending_reports": int(query.pending_reports),
        "refused_reports": int(query.refused_reports),
        "token_origins": list(query.token_origins),
    }


def claim_json(claim: pb.PrivacyClaim) -> dict[str, object]:
    """One view's claim: `epsilon` is the headline figure (its method named in `headline`);
    `figures` holds the other valid epsilons at the same delta, by method."""
    data: dict[str, Any] = {
        "view": claim.view,
        "guarantee": claim.guarantee,
        "headline": claim.headline or "epsilon",
        "epsilon": number(claim.epsilon),
        "delta": number(claim.delta),
        "epsilon_bun_steinke": number(claim.epsilon_bun_steinke),
        "rho": number(claim.rho) if claim.HasField("rho") else None,
        "pure_epsilon": number(claim.pure_epsilon) if claim.HasField("pure_epsilon") else None,
        "figures": {k: number(v) for k, v in sorted(claim.figures.items())},
        "explanation": claim.explanation,
    }
    reveal = _optional(claim, "reveal_probability")
    data["unbounded"] = reveal is not None or data["epsilon"] is None
    data["reveal_probability"] = reveal
    data["null_reasons"] = _claim_reasons(claim, data)
    if reveal is not None:
        data["null_reasons"]["epsilon"] = unbounded_words(data)
    return data


def _scheme_text(query: pb.Query) -> str:
    try:
        return wire.scheme_to_text(query.location_scheme)
    except ParameterError:
        return "invalid"


def release_json(release: pb.QueryRelease, query: pb.Query | None = None) -> dict[str, object]:
    """The release as JSON; given its query, also the mechanism and scheme (so a saved release
    can be mapped later) and H3 cells as hex strings."""
    about: dict[str, object] = {}
    ids: list[int | str] = [int(e.location_id) for e in release.estimates]
    if query is not None:
        described = query_json(query)
        about = {key: described[key] for key in ("mechanism", "params", "scheme", "noise_sigma")}
        ids = cell_ids_json(str(described["scheme"]), (e.location_id for e in release.estimates))
    claims = [claim_json(c) for c in release.claims]
    headline = release_headline(claims)
    return {
        "query_id": release.query_id,
        "epsilon": headline.epsilon,
        "delta": headline.delta,
        "unbounded": headline.unbounded,
        "privacy": headline.to_json(),
        **about,
        "participants": int(release.participants),
        "released_at": (
            release.released_at.ToJsonString() if release.HasField("released_at") else None
        ),
        "estimates": [
            {
                "location_id": cell,
                "estimate": number(e.estimate),
                "std_error": number(e.std_error),
                "ci_low": number(e.ci_low),
                "ci_high": number(e.ci_high),
                "participants": int(e.participants),
                "round_counts": [int(c) for c in e.round_counts],
            }
            for cell, e in zip(ids, release.estimates, strict=True)
        ],
        "claims": claims,
    }


def _optional(message: Message, name: str) -> float | None:
    """An `optional double` field: its number, or None when absent."""
    return number(getattr(message, name)) if message.HasField(name) else None


def ledger_privacy(ledger: pb.Ledger, entries: list[list[dict[str, Any]]]) -> Headline:
    """The ledger's headline: the public's loss over everything released (the odometer)."""
    # A budget raised within a filter by an earlier version voids that filter's guarantee.
    raised = any(c.releases_before and not c.new_filter for c in ledger.budget_changes)
    filtered = ledger.budget_mode not in ("", "none") and not ledger.filter_start and not raised
    return ledger_headline(
        number(ledger.odometer_epsilon),
        ledger.odometer_delta,
        ledger.odometer_method,
        entries,
        ledger.reporting_delta,
        (ledger.budget_epsilon, ledger.budget_delta) if filtered else None,
    )


def ledger_json(ledger: pb.Ledger) -> dict[str, object]:
    """Budget, spent and remaining (in the filter's currency, as rho and as epsilon in both
    conversions), the odometer, every release with its claims, budget changes and notes.
    Numbers are numbers or null; `null_reasons` says why each top-level null is null."""
    budget_set = ledger.budget_mode != "none"
    budget_epsilon = number(ledger.budget_epsilon) if budget_set else None
    budget_delta = number(ledger.budget_delta) if budget_set else None
    entries = [[claim_json(c) for c in e.claims] for e in ledger.entries]
    headline = ledger_privacy(ledger, entries)
    data: dict[str, Any] = {
        "epsilon": headline.epsilon,
        "delta": headline.delta,
        "unbounded": headline.unbounded,
        "privacy": headline.to_json(),
        "budget": {
            "epsilon": budget_epsilon,
            "delta": budget_delta,
            "mode": ledger.budget_mode,
            "rho": _optional(ledger, "budget_rho"),
        },
        "currency": ledger.currency,
        "reporting_delta": number(ledger.reporting_delta),
        "budget_epsilon": budget_epsilon,
        "budget_delta": budget_delta,
        "spent": number(ledger.spent),
        "remaining": _optional(ledger, "remaining"),
        "spent_rho": number(ledger.spent_rho),
        "remaining_rho": number(ledger.remaining_rho),
        "spent_epsilon": number(ledger.spent_epsilon),
        "spent_epsilon_bun_steinke": number(ledger.spent_epsilon_bun_steinke),
        "remaining_epsilon": number(ledger.remaining_epsilon),
        "spent_pure_epsilon": _optional(ledger, "spent_pure_epsilon"),
        "odometer": {
            "epsilon": number(ledger.odometer_epsilon),
            "delta": number(ledger.odometer_delta),
            "method": ledger.odometer_method,
        },
        "odometer_epsilon": number(ledger.odometer_epsilon),
        "odometer_delta": number(ledger.odometer_delta),
        "entries": [
            {
                "query_id": e.query_id,
                **release_headline(claims).fields(),
                "released_at": e.released_at.ToJsonString() if e.HasField("released_at") else None,
                "charged": _optional(e, "charged"),
                "claims": claims,
            }
            for e, claims in zip(ledger.entries, entries, strict=True)
        ],
        "budget_changes": [
            {
                "epsilon": number(c.epsilon),
                "delta": number(c.delta),
                "changed_at": c.changed_at.ToJsonString() if c.HasField("changed_at") else None,
                "releases_before": int(c.releases_before),
            }
            for c in ledger.budget_changes
        ],
        "notes": list(ledger.notes),
    }
    data["null_reasons"] = {
        key: (
            "no budget is set"
            if not budget_set and (key.startswith(("budget", "remaining")))
            else headline.words
            if key == "epsilon"
            else "no finite bound: a release without a bound in this currency was recorded"
        )
        for key, value in data.items()
        if value is None
    }
    return data


def fmt(value: object, digits: int = 4) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return "-" if value is None else str(value)


def bound(value: float | None, digits: int = 4) -> str:
    """A privacy loss for people: rounded UP, so a printed bound is never below the true one."""
    if value is None:
        return "-"
    from ldpcollect.accounting.conversions import round_up  # scipy: only when printing

    return f"{round_up(value, digits):.{digits}g}"


def allowance(value: float, digits: int = 4) -> str:
    """What a budget still allows: rounded DOWN, never more than is really left."""
    from ldpcollect.accounting.conversions import round_up

    return f"{-round_up(-value, digits):.{digits}g}" if math.isfinite(value) else fmt(value)


def queries_table(queries: Sequence[pb.Query | spb.SecureQuery]) -> Table:
    """Both kinds of query; a secure one is marked "(2 aggregators)" after its mechanism."""
    table = Table(title="queries")
    for column in ("id", "mechanism", "scheme", "targets", "state", "round", "reports", "done"):
        table.add_column(column)
    for given in queries:
        secure = isinstance(given, spb.SecureQuery)
        q = as_query(given) if isinstance(given, spb.SecureQuery) else given
        data = query_json(q)
        params = data["params"]
        assert isinstance(params, Mapping)
        table.add_row(
            q.query_id,
            f"{data['mechanism']} "
            + " ".join(f"{k}={v}" for k, v in params.items())
            + (" (2 aggregators)" if secure else ""),
            str(data["scheme"]),
            str(len(q.targets)),
            str(data["state"]),
            f"{q.current_round}/{q.rounds}",
            "/".join(str(n) for n in q.reports_per_round) or "0",
            str(q.completed_devices),
        )
    return table


def claims_table(claims: Sequence[pb.PrivacyClaim], title: str = "privacy cost") -> Table:
    table = Table(title=title)
    for column in ("view", "guarantee", "epsilon", "delta", "eps (Bun-Steinke)", "rho", "pure"):
        table.add_column(column)
    for c in claims:
        table.add_row(
            c.view,
            c.guarantee,
            bound(c.epsilon),
            bound(c.delta),
            bound(c.epsilon_bun_steinke),
            bound(c.rho) if c.HasField("rho") else "-",
            bound(c.pure_epsilon) if c.HasField("pure_epsilon") else "-",
        )
    return table


def release_tables(release: pb.QueryRelease, limit: int | None = None) -> list[Table]:
    table = Table(title=f"release of {release.query_id} ({release.participants} participants)")
    for column in ("location_id", "estimate", "std_error", "95% interval", "participants"):
        table.add_column(column, justify="right")
    rows = list(release.estimates)
    if limit is not None:
        rows = sorted(rows, key=lambda e: -e.estimate)[:limit]
    for e in rows:
        table.add_row(
            str(e.location_id),
            f"{e.estimate:.1f}",
            f"{e.std_error:.1f}",
            f"[{e.ci_low:.1f}, {e.ci_high:.1f}]",
            str(e.participants),
        )
    deltas = [c.delta for c in release.claims if c.view == "public"]
    return [table, privacy_table([release], deltas[0] if deltas else None)]


def explanations(console: Console, claims: Sequence[pb.PrivacyClaim]) -> None:
    for c in claims:
        if c.explanation:
            console.print(f"[dim]{c.view}:[/dim] {c.explanation}")


def release_privacy(release: pb.QueryRelease) -> Headline:
    """The release's headline figure and its details (`ldpcollect.privacy_headline`): what maps,
    tables and exports print first."""
    return release_headline([claim_json(c) for c in release.claims])


def privacy_lines(release: pb.QueryRelease) -> list[str]:
    """The headline in one line, then one line per detail."""
    headline = release_privacy(release)
    lines = [f"{release.query_id}: {headline.short()} - {headline.words}"]
    lines += [f"  {d.name}: {_detail_figure(d)}{d.sentence}" for d in headline.details]
    return lines


def _detail_figure(detail: Detail) -> str:
    if detail.epsilon is None:
        return ""
    at = "" if detail.delta is None else f" at delta {detail.delta:g}"
    return f"epsilon {bound(detail.epsilon, 3)}{at}: "


def privacy_table(releases: Iterable[pb.QueryRelease], delta: float | None) -> Table:
    """One headline per release (the public's tightest epsilon at the ledger's delta: the
    figure to publish), then its details, one sentence each."""
    table = Table(
        title="privacy (public view, upper bounds"
        + ("" if delta is None else f"; epsilon at delta {delta:g}")
        + ")",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    for column in ("release", "figure", "epsilon", "delta", "meaning"):
        right = column in ("epsilon", "delta")
        table.add_column(column, justify="right" if right else "left", no_wrap=column != "meaning")
    for release in releases:
        headline = release_privacy(release)
        eps = "NONE (unbounded)" if headline.unbounded else bound(headline.epsilon, 3)
        table.add_row(
            release.query_id,
            "HEADLINE",
            eps,
            "-" if headline.delta is None else f"{headline.delta:g}",
            headline.words,
        )
        for d in headline.details:
            table.add_row(
                "",
                f"  {d.name}",
                "-" if d.epsilon is None else bound(d.epsilon, 3),
                "-" if d.delta is None else f"{d.delta:g}",
                d.sentence,
            )
    return table


MODE_WORDS = {
    "none": "no budget set: releases are recorded, none refused",
    "zcdp": "zCDP filter (Feldman-Zrnic): releases are charged rho and refused past the budget",
    "pure": "pure epsilons summed (basic composition); refused past the budget",
    "renyi": "Renyi filter (Feldman-Zrnic, at several orders): releases are charged the "
    "fraction of the budget their Renyi curve uses and refused past it",
}


def _timestamp(message: Message, name: str) -> str:
    if not message.HasField(name):
        return "-"
    stamp: str = getattr(message, name).ToJsonString()
    return stamp


NARROW = 120
"""Terminals narrower than this many columns get the ledger's releases without the columns
people read least."""


def ledger_tables(ledger: pb.Ledger, width: int | None = None) -> list[Table]:
    """The ledger for a person: the budget and what is spent (in the filter's currency and as
    epsilon by both conversions), the odometer, each release's charge and claims, and every
    budget change. Notes are printed separately."""
    currency = ledger.currency or "rho"
    summary = Table(title="privacy ledger (public view; upper bounds)", show_header=False)
    summary.add_column("", style="bold")
    summary.add_column("")
    headline = ledger_privacy(ledger, [[claim_json(c) for c in e.claims] for e in ledger.entries])
    summary.add_row("PUBLISH THIS", f"{headline.short()}: {headline.words}")
    summary.add_row("details", "every figure below is an upper bound on the same loss or a part")
    summary.add_row(
        "budget mode",
        f"{ledger.budget_mode or 'none'} - " + MODE_WORDS.get(ledger.budget_mode, "unknown mode"),
    )
    if ledger.budget_mode and ledger.budget_mode != "none":
        summary.add_row(
            "budget", f"epsilon {ledger.budget_epsilon:g} at delta {ledger.budget_delta:g}"
        )
    if ledger.HasField("budget_rho"):
        summary.add_row("budget as rho", fmt(ledger.budget_rho, 6))
    remaining = allowance(ledger.remaining, 6) if ledger.HasField("remaining") else "- (no budget)"
    summary.add_row(f"spent ({currency})", bound(ledger.spent, 6))
    summary.add_row(f"remaining ({currency})", remaining)
    summary.add_row(
        "spent as epsilon",
        f"{bound(ledger.spent_epsilon)} (CKS); {bound(ledger.spent_epsilon_bun_steinke)} "
        f"(Bun-Steinke) at delta {ledger.reporting_delta:g}; rho {bound(ledger.spent_rho)} - "
        "the zCDP filter's own accounting, looser than the headline",
    )
    if ledger.budget_mode == "renyi":
        summary.add_row(
            "remaining as epsilon",
            "- (the Renyi filter has no single epsilon left: see remaining, the fraction of "
            "the budget still unused)",
        )
    elif ledger.budget_mode and ledger.budget_mode != "none":
        summary.add_row(
            "remaining as epsilon",
            f"{allowance(ledger.remaining_epsilon)}; rho {allowance(ledger.remaining_rho)}",
        )
    if ledger.HasField("spent_pure_epsilon"):
        summary.add_row("spent pure epsilon", bound(ledger.spent_pure_epsilon, 6))
    summary.add_row(
        "odometer",
        f"epsilon {bound(ledger.odometer_epsilon)} at delta {bound(ledger.odometer_delta, 6)}"
        + (f" ({ledger.odometer_method})" if ledger.odometer_method else ""),
    )
    summary.add_row("reporting delta", f"{ledger.reporting_delta:g} (new releases' claims)")
    tables = [summary]

    # A narrow terminal keeps query, charge, view, guarantee, epsilon, delta and rho whole;
    # the release time, Bun-Steinke and pure epsilon columns are left to --json.
    narrow = width is not None and width < NARROW
    charged_column = "charged" if narrow else f"charged ({currency})"
    columns = ["query", "released at", charged_column, "view", "guarantee"]
    columns += ["epsilon", "Bun-Steinke", "delta", "rho", "pure"]
    dropped = {"released at", "Bun-Steinke", "pure"} if narrow else set()
    kept = [k for k, column in enumerate(columns) if column not in dropped]
    releases = Table(title=f"releases ({len(ledger.entries)})")
    if narrow:
        releases.box = box.SIMPLE_HEAD
        releases.pad_edge = releases.show_edge = False
        releases.caption = (
            f"charged in {currency}; narrow terminal: release times, Bun-Steinke and pure "
            "epsilon in --json"
        )
    for k in kept:
        right = k >= 5
        releases.add_column(columns[k], justify="right" if right else "left", no_wrap=True)
    for entry in ledger.entries:
        charged = bound(entry.charged) if entry.HasField("charged") else "-"
        claims: list[pb.PrivacyClaim | None] = [*entry.claims] or [None]
        for i, c in enumerate(claims):
            head = (
                [entry.query_id, _timestamp(entry, "released_at"), charged]
                if i == 0
                else ["", "", ""]
            )
            if c is None:
                row = [*head, "-", "no claims recorded", "-", "-", "-", "-", "-"]
            else:
                row = [
                    *head,
                    c.view,
                    c.guarantee,
                    bound(c.epsilon),
                    bound(c.epsilon_bun_steinke),
                    f"{c.delta:g}",
                    bound(c.rho) if c.HasField("rho") else "-",
                    bound(c.pure_epsilon) if c.HasField("pure_epsilon") else "-",
                ]
            releases.add_row(*(row[k] for k in kept))
    tables.append(releases)

    if ledger.budget_changes:
        changes = Table(title="budget changes")
        for column in ("changed at", "epsilon", "delta", "releases before"):
            changes.add_column(column, justify="left" if column == "changed at" else "right")
        for change in ledger.budget_changes:
            changes.add_row(
                _timestamp(change, "changed_at"),
                f"{change.epsilon:g}",
                f"{change.delta:g}",
                str(change.releases_before),
            )
        tables.append(changes)
    return tables


def trusted_sp_warning(query_id: str, sampling_rate: str) -> str:
    """What a trusted aggregator learns from a Sampling Privacy query, in one plain line."""
    return (
        f"note: {query_id} is Sampling Privacy at ONE trusted aggregator: its operator sees both "
        "rounds of every device and so learns the exact cell of every device selected at its "
        f"own cell (each with probability {sampling_rate}). On two aggregators no one does: "
        "`ldpcollect query create --secure` at a leader (docs/secure-mode.md)."
    )
