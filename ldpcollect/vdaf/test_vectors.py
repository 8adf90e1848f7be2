"""Checks a build against the draft's published test vectors (draft appendix C).

A Prio3 vector file lists a VDAF's parameters, some reports with every message they produce,
and the operations to replay in order. Each operation runs on the messages as the vector
encodes them (not on our own earlier output), and what it produces must equal the vector's
bytes. An operation marked `"success": false` must be refused with a `VdafError`; accepting
it is a failure, and so is any other exception. The XofTurboShake128 file checks a derived
seed and an expanded Field128 vector.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldpcollect.vdaf import native
from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field128
from ldpcollect.vdaf.prio3 import PreparedShare, Prio3, VerifyState
from ldpcollect.vdaf.variants import (
    prio3_count,
    prio3_histogram,
    prio3_multihot_count_vec,
    prio3_sum,
    prio3_sum_vec,
)
from ldpcollect.vdaf.xof import XofTurboShake128

AnyPrio3 = Prio3[Any, Any]

PRIO3_BUILDERS: dict[str, Callable[[dict[str, Any]], AnyPrio3]] = {
    "Prio3Count": lambda v: prio3_count(v["shares"]),
    "Prio3Sum": lambda v: prio3_sum(v["shares"], v["max_measurement"]),
    "Prio3SumVec": lambda v: prio3_sum_vec(
        v["shares"], v["length"], v["max_measurement"], v["chunk_length"]
    ),
    "Prio3Histogram": lambda v: prio3_histogram(v["shares"], v["length"], v["chunk_length"]),
    "Prio3MultihotCountVec": lambda v: prio3_multihot_count_vec(
        v["shares"], v["length"], v["max_weight"], v["chunk_length"]
    ),
}
SUPPORTED = (*PRIO3_BUILDERS, "XofTurboShake128")


@dataclass(frozen=True)
class VectorResult:
    """The verdict on one file: `passed`, or `skipped` (not a kind we implement), and why."""

    name: str
    kind: str
    passed: bool
    skipped: bool
    detail: str


def kind_of(path: Path) -> str:
    """The algorithm a vector file is for: its name up to the first underscore."""
    return path.stem.split("_", 1)[0]


def check_directory(directory: Path) -> list[VectorResult]:
    """Every `*.json` in `directory`, in name order."""
    return [check_file(path) for path in sorted(directory.glob("*.json"))]


def check_file(path: Path, compiled: bool = False) -> VectorResult:
    """Replays `path`; with `compiled`, through the encoded batch methods (the compiled
    Prio3 where the VDAF has one: `Prio3.kernel`)."""
    kind = kind_of(path)
    if kind not in SUPPORTED:
        return VectorResult(path.name, kind, False, True, f"{kind} is not implemented")
    try:
        vector = json.loads(path.read_text())
        if kind == "XofTurboShake128":
            problems = _check_xof(vector, compiled)
            summary = "derived seed and expanded vector match"
        else:
            check = _check_prio3_encoded if compiled else _check_prio3
            problems, refused = check(PRIO3_BUILDERS[kind](vector), vector)
            summary = f"{len(vector['operations'])} operations reproduced"
            if refused:
                summary += f" ({refused} refused, as the vector expects)"
    except (OSError, KeyError, IndexError, TypeError, ValueError) as error:
        return VectorResult(path.name, kind, False, False, f"unreadable vector: {error!r}")
    if problems:
        return VectorResult(path.name, kind, False, False, "; ".join(problems))
    return VectorResult(path.name, kind, True, False, summary)


def _check_xof(vector: dict[str, Any], compiled: bool) -> list[str]:
    seed, dst, binder = (bytes.fromhex(vector[k]) for k in ("seed", "dst", "binder"))
    problems = []
    if compiled:
        derived = native.xof_bytes(seed, dst, binder, XofTurboShake128.SEED_SIZE)
        expanded = native.xof_expand(Field128, seed, dst, binder, vector["length"])
    else:
        derived = XofTurboShake128.derive_seed(seed, dst, binder)
        expanded = XofTurboShake128.expand_into_vec(Field128, seed, dst, binder, vector["length"])
    if derived.hex() != vector["derived_seed"]:
        problems.append("derived_seed differs")
    if Field128.encode_vec(expanded).hex() != vector["expanded_vec_field128"]:
        problems.append("expanded_vec_field128 differs")
    return problems


Step = Callable[[dict[str, Any]], None]


def _replay(
    vdaf: AnyPrio3,
    vector: dict[str, Any],
    problems: list[str],
    shard: Step,
    verify_init: Step,
    to_message: Step,
    verify_next: Step,
    aggregate: Step,
) -> int:
    """Runs the vector's operations with these steps (unsharding is the same for every
    path), appending what differs to `problems`; how many were refused as expected."""

    def unshard(op: dict[str, Any]) -> None:
        shares = [vdaf.decode_agg_share(bytes.fromhex(s)) for s in vector["agg_shares"]]
        result = vdaf.unshard(shares, len(vector["reports"]))
        if result != vector["agg_result"]:
            problems.append(f"aggregate result: got {result}, expected {vector['agg_result']}")

    steps: dict[str, Step] = {
        "shard": shard,
        "verify_init": verify_init,
        "verifier_shares_to_message": to_message,
        "verify_next": verify_next,
        "aggregate": aggregate,
        "unshard": unshard,
    }
    refused = 0
    if not vector["operations"]:
        problems.append("the vector lists no operations")
    for op in vector["operations"]:
        name = op["operation"]
        report, agg_id = op.get("report_index", "-"), op.get("aggregator_id", "-")
        where = f"{name} (report {report}, aggregator {agg_id})"
        if name not in steps:
            problems.append(f"unknown operation {name!r}")
            continue
        try:
            steps[name](op)
        except VdafError as error:
            if op["success"]:
                problems.append(f"{where} was refused: {error}")
            else:
                refused += 1
            continue
        if not op["success"]:
            problems.append(f"{where} was accepted, but the vector expects it to be refused")
    return refused


def _check_prio3_encoded(vdaf: AnyPrio3, vector: dict[str, Any]) -> tuple[list[str], int]:
    """`_check_prio3` through `shard_encoded`, `verify_init_encoded`,
    `verifier_messages_encoded` and `agg_encoded`, one report per call."""
    ctx = bytes.fromhex(vector["ctx"])
    verify_key = bytes.fromhex(vector["verify_key"])
    reports: list[dict[str, Any]] = vector["reports"]
    prepared: dict[tuple[int, int], PreparedShare] = {}
    out_shares: dict[tuple[int, int], bytes] = {}
    problems: list[str] = []

    def expect(what: str, produced: bytes, expected_hex: str) -> None:
        if produced.hex() != expected_hex:
            problems.append(f"{what}: got {produced.hex()}, expected {expected_hex}")

    def shard(op: dict[str, Any]) -> None:
        r = op["report_index"]
        report = reports[r]
        public_share, input_shares = vdaf.shard_encoded(
            ctx,
            report["measurement"],
            bytes.fromhex(report["nonce"]),
            bytes.fromhex(report["rand"]),
        )
        expect(f"report {r} public share", public_share, report["public_share"])
        for agg_id, share in enumerate(input_shares):
            expect(f"report {r} input share {agg_id}", share, report["input_shares"][agg_id])

    def verify_init(op: dict[str, Any]) -> None:
        r, agg_id = op["report_index"], op["aggregator_id"]
        report = reports[r]
        item = (
            bytes.fromhex(report["nonce"]),
            bytes.fromhex(report["public_share"]),
            bytes.fromhex(report["input_shares"][agg_id]),
        )
        [result] = vdaf.verify_init_encoded(verify_key, ctx, agg_id, [item])
        if isinstance(result, VdafError):
            raise result
        prepared[(r, agg_id)] = result
        expect(
            f"report {r} verifier share {agg_id}",
            result.verifier_share,
            report["verifier_shares"][0][agg_id],
        )

    def to_message(op: dict[str, Any]) -> None:
        r, round_ = op["report_index"], op["round"]
        report = reports[r]
        shares = [bytes.fromhex(s) for s in report["verifier_shares"][round_]]
        [message] = vdaf.verifier_messages_encoded(ctx, [shares])
        if isinstance(message, VdafError):
            raise message
        expect(f"report {r} verifier message", message, report["verifier_messages"][round_])

    def verify_next(op: dict[str, Any]) -> None:
        r, agg_id, round_ = op["report_index"], op["aggregator_id"], op["round"]
        report = reports[r]
        message = bytes.fromhex(report["verifier_messages"][round_ - 1])
        mine = prepared[(r, agg_id)]
        if message != mine.joint_rand_seed:
            raise VdafError("joint randomness check failed")
        out_shares[(r, agg_id)] = mine.out_share
        expect(f"report {r} output share {agg_id}", mine.out_share, report["out_shares"][agg_id])

    def aggregate(op: dict[str, Any]) -> None:
        agg_id = op["aggregator_id"]
        shares = [out_shares[key] for key in sorted(out_shares) if key[1] == agg_id]
        expect(
            f"aggregate share {agg_id}",
            vdaf.encode_agg_share(vdaf.agg_encoded(shares)),
            vector["agg_shares"][agg_id],
        )

    steps = (shard, verify_init, to_message, verify_next, aggregate)
    return problems, _replay(vdaf, vector, problems, *steps)


def _check_prio3(vdaf: AnyPrio3, vector: dict[str, Any]) -> tuple[list[str], int]:
    """The mismatches found, and how many operations were refused as expected."""
    ctx = bytes.fromhex(vector["ctx"])
    verify_key = bytes.fromhex(vector["verify_key"])
    reports: list[dict[str, Any]] = vector["reports"]
    states: dict[tuple[int, int], VerifyState] = {}
    out_shares: dict[tuple[int, int], list[int]] = {}
    problems: list[str] = []

    def expect(what: str, produced: bytes, expected_hex: str) -> None:
        if produced.hex() != expected_hex:
            problems.append(f"{what}: got {produced.hex()}, expected {expected_hex}")

    def shard(op: dict[str, Any]) -> None:
        r = op["report_index"]
        report = reports[r]
        public_share, input_shares = vdaf.shard(
            ctx,
            report["measurement"],
            bytes.fromhex(report["nonce"]),
            bytes.fromhex(report["rand"]),
        )
        expect(
            f"report {r} public share",
            vdaf.encode_public_share(public_share),
            report["public_share"],
        )
        for agg_id, share in enumerate(input_shares):
            expect(
                f"report {r} input share {agg_id}",
                vdaf.encode_input_share(share),
                report["input_shares"][agg_id],
            )

    def verify_init(op: dict[str, Any]) -> None:
        r, agg_id = op["report_index"], op["aggregator_id"]
        report = reports[r]
        state, verifier_share = vdaf.verify_init(
            verify_key,
            ctx,
            agg_id,
            bytes.fromhex(report["nonce"]),
            vdaf.decode_public_share(bytes.fromhex(report["public_share"])),
            vdaf.decode_input_share(agg_id, bytes.fromhex(report["input_shares"][agg_id])),
        )
        states[(r, agg_id)] = state
        expect(
            f"report {r} verifier share {agg_id}",
            vdaf.encode_verifier_share(verifier_share),
            report["verifier_shares"][0][agg_id],
        )

    def to_message(op: dict[str, Any]) -> None:
        r, round_ = op["report_index"], op["round"]
        report = reports[r]
        shares = [
            vdaf.decode_verifier_share(bytes.fromhex(s)) for s in report["verifier_shares"][round_]
        ]
        message = vdaf.verifier_shares_to_message(ctx, shares)
        expect(
            f"report {r} verifier message",
            vdaf.encode_verifier_message(message),
            report["verifier_messages"][round_],
        )

    def verify_next(op: dict[str, Any]) -> None:
        r, agg_id, round_ = op["report_index"], op["aggregator_id"], op["round"]
        report = reports[r]
        message = vdaf.decode_verifier_message(
            bytes.fromhex(report["verifier_messages"][round_ - 1])
        )
        out_share = vdaf.verify_next(states[(r, agg_id)], message)
        out_shares[(r, agg_id)] = out_share
        expect(
            f"report {r} output share {agg_id}",
            vdaf.field.encode_vec(out_share),
            report["out_shares"][agg_id],
        )

    def aggregate(op: dict[str, Any]) -> None:
        agg_id = op["aggregator_id"]
        agg_share = vdaf.agg_init()
        for r in range(len(reports)):
            if (r, agg_id) in out_shares:
                agg_share = vdaf.agg_update(agg_share, out_shares[(r, agg_id)])
        expect(
            f"aggregate share {agg_id}",
            vdaf.encode_agg_share(agg_share),
            vector["agg_shares"][agg_id],
        )

    steps = (shard, verify_init, to_message, verify_next, aggregate)
    return problems, _replay(vdaf, vector, problems, *steps)
