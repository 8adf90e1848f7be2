"""Secure-mode speed, with the compiled VDAF kernels and, in the same run, the reference
(pure-Python) VDAF they replaced; the goals of issue 26 printed with the ratio to each.

Core, at 100 targets (no gRPC, no storage; CPU time of this process, best of 3): the device
(shard + prove, then two HPKE seals) and the aggregators (HPKE open, batched verify_init,
combine, finish, add the output shares), each step timed on its own so the figures say
where every microsecond goes; the clear-text path's per-report work as the baseline.

T sweep (`--sweep`, on by default): the same per-report costs for T = 10 to 4,096, with a
log-log plot (`--plot`, default out/secure_sweep.png).

Whole path (`--path-reports N`, 0 skips it): a real helper and leader (`ldpcollect serve
--role ...`, separate processes, SQLite) against a real trusted aggregator; reports sealed
beforehand; the clock runs from the first upload until every report is durably aggregated
at both. RR and SP at T = 100 (and each again on the reference VDAF, `--no-before` skips
those), RR at T = 1,000. The machine's limit is what the irreducible per-report work allows
on all its cores: the two HPKE opens (one per aggregator), measured here; the issue's
formula adds the device's two seals, printed beside it.

    .venv/bin/python -m bench.secure [--reports 200] [--path-reports 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bench.vdaf import timed
from ldpcollect import bits
from ldpcollect.secure import _native_hpke
from ldpcollect.secure.sampling_pair import PAIR_ROUND, pair_vdaf
from ldpcollect.secure.sealing import (
    ROLE_HELPER,
    ROLE_LEADER,
    generate_key_pair,
    seal_input_share,
    seal_input_shares,
)
from ldpcollect.secure.upload import (
    BitsVdaf,
    Outcome,
    ReportRejected,
    SecureReport,
    aggregate,
    answer_vdaf,
    combine_batch,
    finish_batch,
    init_batch,
    open_share,
    open_shares,
    vdaf_context,
    verify_opened,
)

TARGETS = 100
VERIFY_KEY = bytes(range(32))
QUERY = "bench"
SWEEP = (10, 32, 100, 316, 1000, 2048, 4096)
LIMIT_FACTOR = 1.5
"""A rate within this factor of the machine's limit meets a goal the limit puts out of reach."""

GOAL_PATH = {"RR round (T=100)": 10_000, "SP pair (T=100)": 6_000, "RR round (T=1000)": 1_500}
WARMUP = 2_000
"""Reports of another query sent through the same servers before each timed whole-path run:
what a server that has been running shows (its heap, caches and thread pools grown), not
its first second; a fresh leader ran about 10% more CPU a report over 10,000 reports."""
GOAL_DEVICE = {"round": 10_000, "pair": 5_000}


def round_answers(rng: random.Random, n: int, targets: int) -> list[list[int]]:
    return [[int(rng.random() < 0.3) for _ in range(targets)] for _ in range(n)]


def pair_answers(rng: random.Random, n: int, targets: int) -> list[list[int]]:
    pairs = []
    for r1 in round_answers(rng, n, targets):
        r2 = list(r1)
        cell = rng.randrange(targets)
        if rng.randrange(2):
            r1 = list(r1)
            r1[cell], r2[cell] = 0, 1
        pairs.append(r1 + r2)
    return pairs


@dataclass
class Steps:
    """Microseconds per report, each step on its own (CPU time, one core)."""

    shard_us: float
    seal_us: float  # both seals
    open_us: float  # one aggregator
    verify_us: float  # one aggregator's verify_init
    finish_us: float  # combine, finish at both, add the output shares
    fleet_seal_us: float = 0.0  # both seals, a fleet's batch at a time (seal_input_shares)

    @property
    def device_us(self) -> float:
        return self.shard_us + self.seal_us

    @property
    def fleet_device_us(self) -> float:
        return self.shard_us + self.fleet_seal_us

    @property
    def aggregator_us(self) -> float:
        return self.open_us + self.verify_us + self.finish_us / 2


class Batch:
    """Sealed reports of one VDAF, and each step of their life, separately timeable."""

    def __init__(
        self,
        vdaf: BitsVdaf,
        round_: int,
        answers: Sequence[list[int]],
        seed: int,
        reference: bool = False,
    ):
        rng = random.Random(seed)
        self.reference = reference
        self.vdaf, self.round, self.answers = vdaf, round_, answers
        self.leader, self.helper = generate_key_pair(1), generate_key_pair(2)
        self.ids = [rng.randbytes(16) for _ in answers]
        self.rands = [rng.randbytes(vdaf.rand_size) for _ in answers]
        self.ctx = vdaf_context(QUERY)
        self.sharded: list[tuple[bytes, list[bytes]]] = []
        self.reports: list[SecureReport] = []
        self.opened: dict[int, list[tuple[bytes, bytes, bytes]]] = {}
        self.prepared: dict[int, list[Outcome]] = {}

    def shard(self) -> None:
        self.sharded = [
            self.vdaf.shard_encoded(self.ctx, a, report_id, rand)
            for a, report_id, rand in zip(self.answers, self.ids, self.rands, strict=True)
        ]

    def seal(self) -> None:
        """Each report's two seals on their own, as one device makes them (`shard_report`:
        the compiled seal with one item; the reference: `cryptography`'s, as before)."""
        self.reports = []
        for report_id, (public, (leader, helper)) in zip(self.ids, self.sharded, strict=True):
            meta = (QUERY, self.round, report_id, public)
            sealed = []
            for key, role, share in (
                (self.leader, ROLE_LEADER, leader),
                (self.helper, ROLE_HELPER, helper),
            ):
                if self.reference:
                    sealed.append(seal_input_share(key.config, role, *meta, share))
                else:
                    [one] = seal_input_shares(
                        key.config, role, QUERY, self.round, [(report_id, public, share)]
                    )
                    sealed.append(one)
            self.reports.append(SecureReport(*meta, *sealed))

    def seal_fleet(self) -> None:
        """The same seals as a fleet makes them: every leader share in one compiled call and
        every helper share in another (`seal_input_shares`, as `shard_reports`)."""
        sealed = [
            seal_input_shares(
                config,
                role,
                QUERY,
                self.round,
                [
                    (rid, public, shares[i])
                    for rid, (public, shares) in zip(self.ids, self.sharded, strict=True)
                ],
            )
            for i, (config, role) in enumerate(
                ((self.leader.config, ROLE_LEADER), (self.helper.config, ROLE_HELPER))
            )
        ]
        self.reports = [
            SecureReport(QUERY, self.round, rid, public, mine, theirs)
            for rid, (public, _), mine, theirs in zip(self.ids, self.sharded, *sealed, strict=True)
        ]

    def open(self) -> None:
        """Each role's shares: the compiled batch open (`open_shares`) as the aggregators run
        it; with the reference VDAF, `cryptography`'s HPKE one report at a time, as before."""
        for role, key_pair in ((ROLE_LEADER, self.leader), (ROLE_HELPER, self.helper)):
            if self.reference:
                shares: list[bytes | ReportRejected] = [
                    open_share(key_pair, role, r) for r in self.reports
                ]
            else:
                shares = open_shares(key_pair, role, self.reports)
            self.opened[role] = []
            for r, share in zip(self.reports, shares, strict=True):
                if isinstance(share, ReportRejected):
                    raise AssertionError(f"an honest share did not open: {share.detail}")
                self.opened[role].append((r.report_id, r.public_share, share))

    def verify(self) -> None:
        for role in (ROLE_LEADER, ROLE_HELPER):
            self.prepared[role] = verify_opened(
                self.vdaf, role, VERIFY_KEY, QUERY, self.opened[role]
            )

    def finish(self) -> None:
        leader, helper = self.prepared[ROLE_LEADER], self.prepared[ROLE_HELPER]
        messages = combine_batch(self.vdaf, leader, helper)
        for outs in (
            finish_batch(self.vdaf, leader, messages),
            finish_batch(self.vdaf, helper, messages),
        ):
            aggregate(self.vdaf, outs)
            if any(not isinstance(out, bytes) for out in outs):
                raise AssertionError("an honest report was refused")

    def steps(self, repeat: int = 3) -> Steps:
        n = len(self.answers)
        per = 1e6 / n
        shard = timed(self.shard, repeat)
        fleet_seal = 0.0 if self.reference else timed(self.seal_fleet, repeat)
        seal = timed(self.seal, repeat)
        opened = timed(self.open, repeat)
        verify = timed(self.verify, repeat)
        finish = timed(self.finish, repeat)
        return Steps(
            shard * per,
            seal * per,
            opened * per / 2,
            verify * per / 2,
            finish * per,
            fleet_seal * per,
        )

    def both_aggregators(self, repeat: int = 3) -> float:
        """Reports per second for everything both aggregators do, as one call chain."""

        def run() -> None:
            leader = init_batch(self.vdaf, self.leader, ROLE_LEADER, VERIFY_KEY, self.reports)
            helper = init_batch(self.vdaf, self.helper, ROLE_HELPER, VERIFY_KEY, self.reports)
            messages = combine_batch(self.vdaf, leader, helper)
            aggregate(self.vdaf, finish_batch(self.vdaf, leader, messages))
            aggregate(self.vdaf, finish_batch(self.vdaf, helper, messages))

        return len(self.reports) / timed(run, repeat)


@dataclass
class Case:
    name: str
    report_bytes: int
    seal_per_second: float
    both_aggregators_per_second: float
    per_aggregator_per_second: float
    clear_text_per_second: float
    steps_us: dict[str, float] = field(default_factory=dict)
    reference_steps_us: dict[str, float] = field(default_factory=dict)
    reference_seal_per_second: float = 0.0
    reference_per_aggregator_per_second: float = 0.0
    device_limit_per_second: float = 0.0
    device_goal_per_second: float = 0.0
    fleet_seal_per_second: float = 0.0
    """Shard + prove + both seals, the seals a fleet's batch at a time (the fleet runner's
    way; `seal_per_second` is one device's, one report at a time)."""


def _steps_dict(steps: Steps) -> dict[str, float]:
    return {
        **asdict(steps),
        "device_us": steps.device_us,
        "fleet_device_us": steps.fleet_device_us,
        "aggregator_us": steps.aggregator_us,
    }


def run_case(
    name: str, kind: str, vdaf: BitsVdaf, round_: int, answers: Sequence[list[int]]
) -> Case:
    batch = Batch(vdaf, round_, answers, 2026)
    steps = batch.steps()
    both = batch.both_aggregators()
    reference = Batch(vdaf.reference(), round_, answers, 2026, reference=True)
    before = reference.steps(repeat=1)

    packed = [bits.pack(np.asarray(a, dtype=np.uint8)) for a in answers]
    width = len(answers[0])

    def clear_all() -> None:
        counts = np.zeros(width, dtype=np.int64)
        for data in packed:
            counts += bits.unpack(data, width)

    clear = timed(clear_all)
    return Case(
        name,
        len(batch.reports[0].encode()),
        1e6 / steps.device_us,
        both,
        2 * both,
        len(answers) / clear,
        _steps_dict(steps),
        _steps_dict(before),
        1e6 / before.device_us,
        1e6 / before.aggregator_us,
        1e6 / steps.seal_us,
        GOAL_DEVICE[kind],
        1e6 / steps.fleet_device_us,
    )


@dataclass
class SweepPoint:
    kind: str
    targets: int
    reports: int
    steps_us: dict[str, float]


def sweep(rng: random.Random, targets: Sequence[int]) -> list[SweepPoint]:
    points = []
    for t in targets:
        n = max(10, min(200, 20_000 // t))
        for kind, vdaf, round_, answers in (
            ("round", answer_vdaf(t), 1, round_answers(rng, n, t)),
            ("pair", pair_vdaf(t), PAIR_ROUND, pair_answers(rng, n, t)),
        ):
            steps = Batch(vdaf, round_, answers, t).steps(repeat=2)
            points.append(SweepPoint(kind, t, n, _steps_dict(steps)))
    return points


def plot_sweep(points: Sequence[SweepPoint], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    styles = {"round": "-", "pair": "--"}
    lines = {
        "shard_us": ("device: shard + prove", "tab:blue"),
        "seal_us": ("device: two HPKE seals", "tab:cyan"),
        "fleet_seal_us": ("fleet: two HPKE seals, batched", "tab:green"),
        "verify_us": ("one aggregator: verify_init", "tab:red"),
        "open_us": ("one aggregator: HPKE open", "tab:orange"),
        "aggregator_us": ("one aggregator: all", "tab:purple"),
    }
    for kind in ("round", "pair"):
        mine = [p for p in points if p.kind == kind]
        xs = [p.targets for p in mine]
        for key, (label, color) in lines.items():
            ax.plot(
                xs,
                [p.steps_us[key] for p in mine],
                styles[kind],
                color=color,
                marker="o",
                markersize=3,
                label=f"{label} ({'RR round' if kind == 'round' else 'SP pair'})",
            )
    # a line of slope 1 through the largest T's prover cost: a curve no steeper than it grows
    # at most linearly in T
    xs = sorted({p.targets for p in points})
    anchor = max(p.steps_us["shard_us"] for p in points if p.targets == xs[-1])
    ax.plot(xs, [anchor * x / xs[-1] for x in xs], ":", color="grey", label="slope 1 (linear in T)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("targets T (answer bits per round)")
    ax.set_ylabel("CPU microseconds per report (one core)")
    ax.set_title("Secure mode: cost per report against T (compiled VDAF)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@dataclass
class PathCase:
    name: str
    reports: int
    secure_per_second: float
    trusted_per_second: float
    targets: int = TARGETS
    reference: bool = False
    leader_cpu_us: float = 0.0
    helper_cpu_us: float = 0.0
    load_cpu_us: float = 0.0  # the load generator: this process's uploads and polls
    limit_per_second: float = 0.0
    limit_with_device_seals_per_second: float = 0.0
    goal_per_second: float = 0.0
    met: bool = False
    aggregator_steps_us: float = 0.0
    """One aggregator's in-process steps for one report (HPKE open, verify_init, its half of
    combine + finish + aggregate), measured in this run: the rest of a role's CPU is gRPC,
    storage and the interpreter."""


def whole_path_cases(
    n: int,
    rng: random.Random,
    opens_us: dict[int, float],
    seals_us: dict[int, float],
    steps_us: dict[int, float],
    before: bool,
    warmup: int = 0,
) -> list[PathCase]:
    from bench.secure_path import secure_path_rate, trusted_path_rate

    cores = os.cpu_count() or 1
    trusted = {t: trusted_path_rate(round_answers(rng, n, t)) for t in (100, 1000)}
    runs = [("RR round (T=100)", "rr", 100), ("SP pair (T=100)", "sp", 100)]
    runs += [("RR round (T=1000)", "rr", 1000)]
    cases = []
    for name, mechanism, targets in runs:
        for reference in (False, True) if before and targets == 100 else (False,):
            run = secure_path_rate(mechanism, n, targets, reference, warmup)
            key = targets if mechanism == "rr" else -targets
            limit = cores * 1e6 / (2 * opens_us[key])
            goal = GOAL_PATH[name]
            cases.append(
                PathCase(
                    name + (" [reference VDAF]" if reference else ""),
                    n,
                    run.per_second,
                    trusted[targets],
                    targets,
                    reference,
                    run.leader_cpu * 1e6 / n,
                    run.helper_cpu * 1e6 / n,
                    run.load_cpu * 1e6 / n,
                    limit,
                    cores * 1e6 / (2 * opens_us[key] + seals_us[key]),
                    goal,
                    run.per_second >= min(goal, limit / LIMIT_FACTOR),
                    0.0 if reference else steps_us[key],
                )
            )
    return cases


@dataclass(frozen=True)
class X25519Speed:
    """Microseconds per X25519 in a batch open's DH step: the eight-lane kernel (AVX-512
    IFMA, where the CPU has it) and OpenSSL one at a time, measured in the same run."""

    lanes_available: bool
    lanes_us: float
    openssl_us: float


def x25519_speed(points: int = 4000) -> X25519Speed:
    rng = random.Random(25519)
    scalar = rng.randbytes(32)
    batch = [rng.randbytes(32) for _ in range(points)]

    scalars = [scalar] * points

    def us(lanes: bool) -> float:
        return timed(lambda: _native_hpke.x25519(scalars, batch, lanes), 3) / points * 1e6

    return X25519Speed(_native_hpke.lanes_available(), us(True), us(False))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=200)
    parser.add_argument(
        "--path-reports",
        type=int,
        default=10_000,
        help="reports per whole-path run (fewer measure mostly the pipeline filling and draining)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=WARMUP,
        help="reports of another query through the same servers before each timed run",
    )
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--no-before", action="store_true", help="skip the reference whole path")
    parser.add_argument("--plot", type=Path, default=Path("out/secure_sweep.png"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.reports < 1 or args.path_reports < 0 or args.warmup < 0:
        parser.error("--reports must be at least 1, --path-reports and --warmup at least 0")
    rng = random.Random(2026)
    cases = [
        run_case(
            "round (SumVec bits=1, T=100)",
            "round",
            answer_vdaf(TARGETS),
            1,
            round_answers(rng, args.reports, TARGETS),
        ),
        run_case(
            "SP pair (T=100)",
            "pair",
            pair_vdaf(TARGETS),
            PAIR_ROUND,
            pair_answers(rng, args.reports, TARGETS),
        ),
    ]
    dh = x25519_speed()
    points = [] if args.no_sweep else sweep(rng, SWEEP)
    if points:
        plot_sweep(points, args.plot)
    opens = {100: cases[0].steps_us["open_us"], -100: cases[1].steps_us["open_us"]}
    # the devices' seals as a fleet makes them, batched (the issue's limit with the sealing)
    seals = {100: cases[0].steps_us["fleet_seal_us"], -100: cases[1].steps_us["fleet_seal_us"]}
    steps = {100: cases[0].steps_us["aggregator_us"], -100: cases[1].steps_us["aggregator_us"]}
    at_1000 = [p for p in points if p.kind == "round" and p.targets == 1000]
    if at_1000:
        opens[1000] = at_1000[0].steps_us["open_us"]
        seals[1000] = at_1000[0].steps_us["fleet_seal_us"]
        steps[1000] = at_1000[0].steps_us["aggregator_us"]
    else:
        measured = Batch(answer_vdaf(1000), 1, round_answers(rng, 20, 1000), 1000).steps(1)
        opens[1000], seals[1000] = measured.open_us, measured.fleet_seal_us
        steps[1000] = measured.aggregator_us
    paths = (
        []
        if args.path_reports == 0
        else whole_path_cases(
            args.path_reports, rng, opens, seals, steps, not args.no_before, args.warmup
        )
    )
    if args.json:
        print(
            json.dumps(
                {
                    "reports": args.reports,
                    "cases": [asdict(c) for c in cases],
                    "x25519": asdict(dh),
                    "sweep": [asdict(p) for p in points],
                    "whole_path": [asdict(p) for p in paths],
                }
            )
        )
        return
    report(args.reports, cases, points, paths, args.plot, dh)


def report(
    reports: int,
    cases: Sequence[Case],
    points: Sequence[SweepPoint],
    paths: Sequence[PathCase],
    plot: Path,
    dh: X25519Speed,
) -> None:
    print(
        f"{reports} reports per case, CPU time of one core (best of 3); 'before' = reference VDAF"
    )
    lanes = "eight AVX-512 IFMA lanes" if dh.lanes_available else "no IFMA here: OpenSSL too"
    print(
        f"X25519 in a batch open: {dh.lanes_us:.1f} us each ({lanes}); OpenSSL one at a time "
        f"{dh.openssl_us:.1f} us ({dh.openssl_us / dh.lanes_us:.2f}x)"
    )
    for c in cases:
        s, r = c.steps_us, c.reference_steps_us
        print(f"\n{c.name}: {c.report_bytes} B/report. Microseconds per report, now (before):")
        print(
            f"  device   shard+prove {s['shard_us']:7.1f} ({r['shard_us']:7.1f})  "
            f"two HPKE seals {s['seal_us']:6.1f}  = {s['device_us']:6.1f} ({r['device_us']:6.1f})"
        )
        print(
            f"  fleet    shard+prove {s['shard_us']:7.1f}  two HPKE seals in batches "
            f"{s['fleet_seal_us']:6.1f}  = {s['fleet_device_us']:6.1f}"
        )
        print(
            f"  one agg. HPKE open {s['open_us']:6.1f}  verify_init {s['verify_us']:6.1f} "
            f"({r['verify_us']:6.1f})  half of combine+finish+aggregate {s['finish_us'] / 2:5.1f} "
            f"({r['finish_us'] / 2:5.1f})  = {s['aggregator_us']:6.1f} ({r['aggregator_us']:6.1f})"
        )
        device_ok = c.seal_per_second >= min(
            c.device_goal_per_second, c.device_limit_per_second / LIMIT_FACTOR
        )
        goal, limit = c.device_goal_per_second, c.device_limit_per_second
        print(
            f"  device, one report at a time {c.seal_per_second:,.0f}/s per core "
            f"({c.seal_per_second / goal:.2f}x the {goal:,.0f}/s goal; its two seals alone allow "
            f"{limit:,.0f}/s: {limit / c.seal_per_second:.2f}x from it) "
            f"{'MET' if device_ok else 'NOT MET'}; before {c.reference_seal_per_second:,.0f}/s"
        )
        fleet = c.fleet_seal_per_second
        print(
            f"  fleet, seals in batches {fleet:,.0f}/s per core ({fleet / goal:.2f}x the goal; "
            f"{fleet / c.seal_per_second:.2f}x one at a time) "
            f"{'MET' if fleet >= goal else 'NOT MET'}"
        )
        print(
            f"  per aggregator {c.per_aggregator_per_second:,.0f}/s per core "
            f"(before {c.reference_per_aggregator_per_second:,.0f}/s, "
            f"{c.per_aggregator_per_second / c.reference_per_aggregator_per_second:.1f}x); "
            f"clear text {c.clear_text_per_second:,.0f}/s"
        )
    if points:
        print(f"\nT sweep (plot: {plot}), microseconds per report, one core:")
        print("  kind   T      shard+prove  seals  batched  open  verify  one aggregator")
        for p in points:
            s = p.steps_us
            print(
                f"  {p.kind:5s} {p.targets:5d}  {s['shard_us']:10.1f} {s['seal_us']:6.1f} "
                f"{s['fleet_seal_us']:8.1f} {s['open_us']:5.1f} {s['verify_us']:7.1f} "
                f"{s['aggregator_us']:8.1f}"
            )
    if paths:
        print(f"\nWhole path ({os.cpu_count()} cores; limit = the two HPKE opens on every core):")
    for path in paths:
        rate, goal, limit = path.secure_per_second, path.goal_per_second, path.limit_per_second
        verdict = "" if path.reference else f" -> {'MET' if path.met else 'NOT MET'}"
        cpu_us = path.leader_cpu_us + path.helper_cpu_us + path.load_cpu_us
        cpu_rate = (os.cpu_count() or 1) * 1e6 / cpu_us
        with_seals = path.limit_with_device_seals_per_second
        print(
            f"  {path.name}: {path.reports} reports, secure {rate:,.0f}/s; goal {goal:,.0f}/s "
            f"({rate / goal:.2f}x); limit {limit:,.0f}/s ({limit / rate:.1f}x away); the issue's "
            f"limit with a fleet's two seals (batched) {with_seals:,.0f}/s "
            f"({with_seals / rate:.1f}x away); trusted {path.trusted_per_second:,.0f}/s{verdict}\n"
            f"    CPU per report (us, from /proc over the timed window): leader "
            f"{path.leader_cpu_us:,.0f}, helper {path.helper_cpu_us:,.0f}, load generator "
            f"{path.load_cpu_us:,.0f} (uploads of reports sealed before the window, and polls) "
            f"= {cpu_us:,.0f}: the cores allow {cpu_rate:,.0f}/s at that CPU "
            f"({cpu_rate / rate:.1f}x the rate measured; {limit / cpu_rate:.1f}x from the limit)"
        )
        if path.aggregator_steps_us:
            own = path.aggregator_steps_us
            print(
                f"    of which each aggregator's own steps (HPKE open, verify_init, combine, "
                f"aggregate; measured above) {own:,.0f}: the rest, gRPC, storage and the "
                f"interpreter, leader {path.leader_cpu_us - own:,.0f}, helper "
                f"{path.helper_cpu_us - own:,.0f}"
            )


if __name__ == "__main__":
    main()
