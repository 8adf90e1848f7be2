"""VDAF speed: Prio3 shard and verification rates over 100 targets, and where the time goes.

    .venv/bin/python bench/vdaf.py [--reports 200] [--json]

For Prio3Histogram(100 buckets, chunk 10) and Prio3MultihotCountVec(100 entries, any weight,
chunk 10), two aggregators, one proof: the client's `shard`, and verification of a report
by both aggregators from its encoded messages (decode, `verify_init` at the leader and the
helper, `verifier_shares_to_message`, `verify_next` at both), all on one core. The
breakdown times the same work in pieces on the same reports: the XOF calls
(TurboSHAKE128: expanding the helper's seed, joint randomness parts and seed, query
randomness), the FLP query of both shares and the decision, and the codec (field
encodings). The baseline, measured in the same run, is the clear-text check a trusted
aggregator would do: the validity circuit evaluated once on the measurement itself.
"vs goal" compares the one-core rate for both aggregators with the secure mode's goal of
1,000 reports/s (where each aggregator does its half on its own core, plus HPKE and storage).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from ldpcollect.vdaf.prio3 import HelperShare, LeaderShare, Prio3
from ldpcollect.vdaf.variants import prio3_histogram, prio3_multihot_count_vec

CTX = b"ldpcollect bench"
VERIFY_KEY = bytes(range(32))
GOAL_REPORTS_PER_SECOND = 1000

AnyPrio3 = Prio3[Any, Any]


@dataclass
class Case:
    name: str
    shard_per_second: float
    verify_per_second: float
    clear_check_per_second: float
    breakdown_us: dict[str, float]


def timed(fn: Callable[[], object], repeat: int = 5) -> float:
    """Best CPU time of this process over `repeat` runs: what one otherwise idle core takes.
    (Wall time on a machine shared with other work is longer and varies from run to run.)"""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def measurements(name: str, count: int, rng: random.Random) -> list[Any]:
    if name.startswith("Histogram"):
        return [rng.randrange(100) for _ in range(count)]
    # Randomized response over 100 targets: each bit is 1 with probability about 0.3.
    return [[rng.random() < 0.3 for _ in range(100)] for _ in range(count)]


def run_case(name: str, vdaf: AnyPrio3, count: int) -> Case:
    rng = random.Random(name)
    values = measurements(name, count, rng)
    nonces = [rng.randbytes(16) for _ in values]
    rands = [rng.randbytes(vdaf.rand_size) for _ in values]

    sharded: list[tuple[bytes, bytes, list[bytes]]] = []

    def shard_all() -> None:
        sharded.clear()
        for value, nonce, rand in zip(values, nonces, rands, strict=True):
            public_share, input_shares = vdaf.shard(CTX, value, nonce, rand)
            sharded.append(
                (
                    nonce,
                    vdaf.encode_public_share(public_share),
                    [vdaf.encode_input_share(s) for s in input_shares],
                )
            )

    shard_seconds = timed(shard_all)

    def verify_all() -> None:
        for nonce, public_encoded, (leader_encoded, helper_encoded) in sharded:
            public_share = vdaf.decode_public_share(public_encoded)
            state0, share0 = vdaf.verify_init(
                VERIFY_KEY, CTX, 0, nonce, public_share, vdaf.decode_input_share(0, leader_encoded)
            )
            state1, share1 = vdaf.verify_init(
                VERIFY_KEY, CTX, 1, nonce, public_share, vdaf.decode_input_share(1, helper_encoded)
            )
            message = vdaf.verifier_shares_to_message(
                CTX,
                [
                    vdaf.decode_verifier_share(vdaf.encode_verifier_share(share0)),
                    vdaf.decode_verifier_share(vdaf.encode_verifier_share(share1)),
                ],
            )
            vdaf.verify_next(state0, message)
            vdaf.verify_next(state1, message)

    verify_seconds = timed(verify_all)
    breakdown = breakdown_us(vdaf, sharded)
    encoded = [vdaf.flp.encode(v) for v in values]
    valid = vdaf.flp.valid
    gadgets = valid.plain_gadgets()
    joint_rand = [rng.randrange(vdaf.field.modulus) for _ in range(vdaf.flp.joint_rand_len)]

    def clear_check() -> None:
        for meas in encoded:
            valid.eval(meas, joint_rand, 1, gadgets)

    clear_seconds = timed(clear_check)
    return Case(
        name=name,
        shard_per_second=count / shard_seconds,
        verify_per_second=count / verify_seconds,
        clear_check_per_second=count / clear_seconds,
        breakdown_us=with_rest(breakdown, 1e6 * verify_seconds / count),
    )


def with_rest(parts: dict[str, float], total: float) -> dict[str, float]:
    """The parts, the rest of the measured whole (states, verifier-share codec, checks; also
    absorbs timing noise, so it is shown but not trusted below a few percent), the whole."""
    rest = max(0.0, total - sum(parts.values()))
    return {
        **parts,
        "rest (states, verifier shares, checks)": rest,
        "total (measured whole)": total,
    }


def breakdown_us(
    vdaf: AnyPrio3, sharded: Sequence[tuple[bytes, bytes, list[bytes]]]
) -> dict[str, float]:
    """Microseconds per report for each kind of work in verifying it at both aggregators."""
    count = len(sharded)
    decoded: list[tuple[bytes, Any, Any, Any]] = []

    def codec() -> None:
        decoded.clear()
        for nonce, public_encoded, (leader_encoded, helper_encoded) in sharded:
            decoded.append(
                (
                    nonce,
                    vdaf.decode_public_share(public_encoded),
                    vdaf.decode_input_share(0, leader_encoded),
                    vdaf.decode_input_share(1, helper_encoded),
                )
            )

    codec_seconds = timed(codec)
    expanded: list[tuple[list[list[int]], list[list[int]], list[list[int]], list[list[int]]]] = []

    def xof() -> None:
        expanded.clear()
        for nonce, parts, leader, helper in decoded:
            assert isinstance(leader, LeaderShare) and isinstance(helper, HelperShare)
            assert parts is not None and leader.blind is not None and helper.blind is not None
            helper_meas = vdaf.helper_meas_share(CTX, 1, helper.seed)
            helper_proof = vdaf.helper_proofs_share(CTX, 1, helper.seed)
            own = [
                vdaf.joint_rand_part(CTX, 0, leader.blind, leader.meas_share, nonce),
                vdaf.joint_rand_part(CTX, 1, helper.blind, helper_meas, nonce),
            ]
            joint_rands = [  # each aggregator derives the seed and the joint randomness
                vdaf.joint_rands(CTX, vdaf.joint_rand_seed(CTX, [own[0], parts[1]])),
                vdaf.joint_rands(CTX, vdaf.joint_rand_seed(CTX, [parts[0], own[1]])),
            ]
            vdaf.joint_rand_seed(CTX, own)  # the verifier message
            query_rands = [vdaf.query_rands(VERIFY_KEY, CTX, nonce) for _ in range(2)]
            expanded.append(
                (
                    [leader.meas_share, helper_meas],
                    [leader.proofs_share, helper_proof],
                    query_rands,
                    joint_rands,
                )
            )

    xof_seconds = timed(xof)
    verifiers: list[list[list[int]]] = []

    def query() -> None:
        verifiers.clear()
        for meas_shares, proof_shares, query_rands, joint_rands in expanded:
            verifiers.append(
                [
                    vdaf.flp.query(m, pr, q, j, 2)
                    for m, pr, q, j in zip(
                        meas_shares, proof_shares, query_rands, joint_rands, strict=True
                    )
                ]
            )

    query_seconds = timed(query)
    p = vdaf.field.modulus

    def decide() -> None:
        for first, second in verifiers:
            assert vdaf.flp.decide([(a + b) % p for a, b in zip(first, second, strict=True)])

    decide_seconds = timed(decide)
    per = 1e6 / count
    return {
        "decode input shares (field codec)": codec_seconds * per,
        "XOF (TurboSHAKE128)": xof_seconds * per,
        "FLP query, both shares": query_seconds * per,
        "FLP decide": decide_seconds * per,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=200, help="reports per case")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    cases = [
        run_case("Histogram(100, chunk 10)", prio3_histogram(2, 100, 10), args.reports),
        run_case(
            "MultihotCountVec(100, weight <= 100, chunk 10)",
            prio3_multihot_count_vec(2, 100, 100, 10),
            args.reports,
        ),
    ]
    if args.json:
        print(
            json.dumps(
                {
                    "goal_reports_per_second": GOAL_REPORTS_PER_SECOND,
                    "cases": [asdict(c) for c in cases],
                },
                indent=2,
            )
        )
        return
    console = Console(width=120)
    table = Table(title="Prio3, two aggregators, CPU time on one core (this machine, this run)")
    for column in (
        "case",
        "shard / s",
        "verify / s (both)",
        "vs goal",
        "clear check / s",
        "secure / clear",
    ):
        table.add_column(column, justify="left" if column == "case" else "right")
    for c in cases:
        table.add_row(
            c.name,
            f"{c.shard_per_second:,.0f}",
            f"{c.verify_per_second:,.0f}",
            f"{c.verify_per_second / GOAL_REPORTS_PER_SECOND:.2f}x",
            f"{c.clear_check_per_second:,.0f}",
            f"{c.clear_check_per_second / c.verify_per_second:,.1f}x slower",
        )
    console.print(table)
    for c in cases:
        parts = Table(title=f"per report, verified at both aggregators: {c.name}")
        parts.add_column("work")
        parts.add_column("us / report", justify="right")
        parts.add_column("share", justify="right")
        total = c.breakdown_us["total (measured whole)"]
        for what, us in c.breakdown_us.items():
            parts.add_row(what, f"{us:,.0f}", f"{100 * us / total:.0f}%")
        console.print(parts)


if __name__ == "__main__":
    main()
