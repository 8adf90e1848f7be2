"""Secure-mode speed at 100 targets, in two parts, each against the trusted path in the
same run.

Core (no gRPC, no storage): HPKE open, batched VDAF verification and aggregation at both
aggregators, against the clear-text per-report work.

Whole path (`--path-reports N`, 0 skips it): a real helper and leader (`ldpcollect serve
--role ...`, separate processes, SQLite) and a real trusted aggregator. Reports are sealed
beforehand (the device side is excluded); the clock runs from the first upload until every
report is durably aggregated at both aggregators (upload, HPKE open at both, batched
verification, aggregation, commits). The trusted figure is the same reports in clear text
through SubmitBatch until acknowledged (durable). Wall time on this shared machine.

    .venv/bin/python bench/secure.py [--reports 200] [--path-reports 1000] [--json]

Two cases: one round's report (Prio3SumVec, bits = 1, what RR uploads) and SP's round pair
(`sampling_pair`, 2 x 100 answers and the difference check). "both aggregators" is the
whole server-side work for a report on one core: open at the leader and at the helper,
`verify_init` at each, combine, finish at each, add the output shares. In a deployment each
aggregator does its half on its own machine, so "per aggregator" (twice the first, roughly)
is the rate one role sustains per core. Sealing (the device side) is shown for information
and excluded from the server rates. The baseline, in the same run, is the trusted path's
per-report work: unpack the answer bits and add them to the counts. CPU time of this process,
best of 3 runs (wall time on this shared machine varies from run to run).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ldpcollect import bits
from ldpcollect.secure.sampling_pair import PAIR_ROUND, pair_vdaf
from ldpcollect.secure.sealing import generate_key_pair
from ldpcollect.secure.upload import (
    BitsVdaf,
    SecureReport,
    aggregate,
    answer_vdaf,
    shard_report,
    verify_batch,
)

TARGETS = 100
VERIFY_KEY = bytes(range(32))
GOAL_REPORTS_PER_SECOND = 1000


@dataclass
class Case:
    name: str
    report_bytes: int
    seal_per_second: float
    both_aggregators_per_second: float
    per_aggregator_per_second: float
    clear_text_per_second: float


def best_cpu(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def run_case(
    name: str, vdaf: BitsVdaf, round_: int, answers: Sequence[list[int]], rng: random.Random
) -> Case:
    leader, helper = generate_key_pair(1), generate_key_pair(2)
    ids = [rng.randbytes(16) for _ in answers]
    rands = [rng.randbytes(vdaf.rand_size) for _ in answers]
    reports: list[SecureReport] = []

    def seal_all() -> None:
        reports.clear()
        for bits_, report_id, rand in zip(answers, ids, rands, strict=True):
            reports.append(
                shard_report(
                    vdaf, leader.config, helper.config, "bench", round_, report_id, bits_, rand
                )
            )

    def verify_all() -> None:
        result = verify_batch(vdaf, leader, helper, VERIFY_KEY, reports)
        aggregate(vdaf, result.leader_out)
        aggregate(vdaf, result.helper_out)
        if any(result.refusals()):
            raise AssertionError("an honest report was refused")

    packed = [bits.pack(np.asarray(a, dtype=np.uint8)) for a in answers]
    width = len(answers[0])

    def clear_all() -> None:
        counts = np.zeros(width, dtype=np.int64)
        for data in packed:
            counts += bits.unpack(data, width)

    n = len(answers)
    seal = best_cpu(seal_all, repeat=1)
    both = best_cpu(verify_all)
    clear = best_cpu(clear_all)
    return Case(
        name,
        len(reports[0].encode()),
        n / seal,
        n / both,
        2 * n / both,
        n / clear,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=200)
    parser.add_argument("--path-reports", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.reports < 1 or args.path_reports < 0:
        parser.error("--reports must be at least 1 and --path-reports at least 0")
    rng = random.Random(2026)
    rounds = [[int(rng.random() < 0.3) for _ in range(TARGETS)] for _ in range(args.reports)]
    pairs = []
    for r1 in rounds:
        r2 = list(r1)
        cell = rng.randrange(TARGETS)
        if rng.randrange(2):
            r1 = list(r1)
            r1[cell], r2[cell] = 0, 1
        pairs.append(r1 + r2)
    cases = [
        run_case("round (SumVec bits=1, T=100)", answer_vdaf(TARGETS), 1, rounds, rng),
        run_case("SP pair (T=100)", pair_vdaf(TARGETS), PAIR_ROUND, pairs, rng),
    ]
    paths = [] if args.path_reports == 0 else whole_path_cases(args.path_reports, rng)
    if args.json:
        print(
            json.dumps(
                {
                    "reports": args.reports,
                    "cases": [asdict(c) for c in cases],
                    "whole_path": [asdict(p) for p in paths],
                }
            )
        )
        return
    print(f"{args.reports} reports per case, one core, CPU time (best of 3)")
    for c in cases:
        ratio = c.clear_text_per_second / c.per_aggregator_per_second
        print(
            f"{c.name}: {c.report_bytes} B/report; seal (device) {c.seal_per_second:,.0f}/s; "
            f"open+verify+aggregate at both aggregators {c.both_aggregators_per_second:,.0f}/s, "
            f"per aggregator {c.per_aggregator_per_second:,.0f}/s "
            f"({c.per_aggregator_per_second / GOAL_REPORTS_PER_SECOND:.2f}x the 1,000/s goal); "
            f"clear text {c.clear_text_per_second:,.0f}/s ({ratio:.0f}x faster)"
        )
    for p in paths:
        print(
            f"whole path, {p.name}: {p.reports} reports, secure {p.secure_per_second:,.0f}/s "
            f"({p.secure_per_second / GOAL_REPORTS_PER_SECOND:.2f}x the 1,000/s goal), "
            f"trusted {p.trusted_per_second:,.0f}/s "
            f"({p.trusted_per_second / p.secure_per_second:.0f}x faster)"
        )


@dataclass
class PathCase:
    name: str
    reports: int
    secure_per_second: float
    trusted_per_second: float


def whole_path_cases(n: int, rng: random.Random) -> list[PathCase]:
    from bench.secure_path import secure_path_rate, trusted_path_rate

    answers = [[int(rng.random() < 0.3) for _ in range(TARGETS)] for _ in range(n)]
    trusted = trusted_path_rate(answers)
    return [
        PathCase("RR round (T=100)", n, secure_path_rate("rr", n), trusted),
        PathCase("SP pair (T=100)", n, secure_path_rate("sp", n), trusted),
    ]


if __name__ == "__main__":
    main()
