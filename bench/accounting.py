"""Accounting speed: what the exact public figures cost per release, in one run.

    .venv/bin/python -m bench.accounting [--json]

Each case computes a release's claims from scratch (caches cleared) and is shown beside a
baseline measured in the same run: what the public figure cost before (SP: the noise's exact
profile at its sensitivity; RR: the claims without a participants floor). Claims are computed
once per query, so these are one-off costs per release. The last cases compute the ledger's
odometer (every reading, as GetLedger does) from scratch, beside the zCDP tiers alone.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from fractions import Fraction
from functools import partial

from rich.console import Console
from rich.table import Table

from ldpcollect.accounting import count_level, odometer, release_cost, release_pld, sp_pair
from ldpcollect.accounting.ledger import PrivacyLedger
from ldpcollect.accounting.release_cost import release_claims
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy

RR = RandomizedResponse("0.85", "0.3")
SP = SamplingPrivacy("1/2")


def _clear() -> None:
    for cached in (
        release_cost.sp_noised_epsilon,
        release_cost.rr_count_level_epsilon,
        sp_pair.sp_target_pair,
        sp_pair.sp_release_renyi,
        sp_pair._target_log_pmfs,
        count_level.rr_count_pair,
        release_pld._release_pld,
        release_pld._restated,
        release_pld._planned,
    ):
        cached.cache_clear()


def _ledger(releases: int) -> PrivacyLedger:
    """A ledger holding `releases` releases cycling through RR as counts over 20,000, SP with
    noise sigma 5 and RR locally (claims computed once, before timing)."""
    kinds = [
        release_claims(RR, 2, None, 1e-6, participants=20_000),
        release_claims(SP, 2, Fraction(5), 1e-6),
        release_claims(RR, 2, None, 1e-6),
    ]
    ledger = PrivacyLedger()
    for i in range(releases):
        ledger.charge(f"q{i}", kinds[i % 3], "2025-01-01T00:00:00+00:00")
    return ledger


def _odometer_cases() -> list[tuple[str, Callable[[], object], float]]:
    """The odometer's readings over a ledger, beside the zCDP tiers alone (the old headline's
    cost): what `ledger` (GetLedger) computes, caches cleared first."""
    cases: list[tuple[str, Callable[[], object], float]] = []
    for releases in (10, 100):
        ledger = _ledger(releases)
        publics = [r.public() for r in ledger.releases]
        baseline = _seconds(partial(odometer.zcdp_tiers, publics, 1e-6))
        cases.append((f"odometer, {releases} mixed releases", ledger.odometer, baseline))
    return cases


def _seconds(work: Callable[[], object]) -> float:
    _clear()
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def _old_sp_figure(sigma: int) -> float:
    """The figure before issue 9: the noise's exact profile at its sensitivity, or CKS."""
    rho = release_cost.noise_rho(Fraction(sigma), 2)
    return release_cost._noise_epsilon(float(sigma * sigma), 2, rho, 1e-6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    rr_baseline = _seconds(lambda: release_claims(RR, 2, None, 1e-6))
    cases: list[tuple[str, Callable[[], object], float]] = []
    for sigma in (2, 5, 20, 50, 100):
        cases.append(
            (
                f"SP s=1/2, two targets, sigma {sigma}: exact pair",
                partial(release_claims, SP, 2, Fraction(sigma), 1e-6),
                _seconds(partial(_old_sp_figure, sigma)),
            )
        )
    for n in (1_000, 20_000, 1_000_000):
        cases.append(
            (
                f"RR 0.85/0.3, two targets, {n:,} participants: count level",
                partial(release_claims, RR, 2, None, 1e-6, participants=n),
                rr_baseline,
            )
        )
    cases += _odometer_cases()
    rows: list[dict[str, str | float]] = []
    for name, work, baseline in cases:
        rows.append({"case": name, "seconds": _seconds(work), "baseline_seconds": baseline})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="claims per release and the odometer, baseline measured in this run")
    for column in ("case", "seconds", "baseline s", "ratio"):
        table.add_column(column)
    for row in rows:
        seconds, baseline = float(row["seconds"]), float(row["baseline_seconds"])
        table.add_row(
            str(row["case"]), f"{seconds:.3f}", f"{baseline:.3f}", f"{seconds / baseline:.0f}x"
        )
    Console().print(table)


if __name__ == "__main__":
    main()
