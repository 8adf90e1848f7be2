"""Sampling Privacy's two rounds as one Prio3 report, so a malicious device cannot count for
more than an honest one (docs/secure-mode.md, "Sampling Privacy").

The device submits, once and after round 2, the pair (round 1, round 2) of its answer
vectors. The measurement is r1 || r2 || w (2T + 1 field elements), and the circuit checks

- every entry of r1, of r2 and of the difference d = r2 - r1 is 0 or 1, and w is 0 or 1,
  all with the same random-weighted range check x * (x - 1) as Prio3SumVec (d is linear in
  the shares of r1 and r2, so each aggregator derives its share of d from its own shares);
- sum(d) = w: the difference has at most one 1 (the device was selected at one cell at most).

An honest SP device meets these exactly: unselected, r2 = r1; selected at t, r1_t = 0 and
r2_t = 1. The output is r1 || r2, so one aggregation yields both rounds' counts, over
exactly the devices that completed both rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import isqrt

from ldpcollect.vdaf.circuits import bits_check
from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, Field128
from ldpcollect.vdaf.flp import Flp, GadgetCall, Valid
from ldpcollect.vdaf.gadgets import Mul, ParallelSum
from ldpcollect.vdaf.native import SAMPLING_PAIR, NativeCircuit
from ldpcollect.vdaf.prio3 import Prio3

PRIO3_SAMPLING_PAIR = 0xFFFF0001
"""Our codepoint, in the draft's private-use range (0xFFFF0000 and above)."""

PAIR_ROUND = 2
"""The round a pair report is sealed for: it is sent once round 2 is open."""


class SamplingPair(Valid[Sequence[int], list[int]]):
    """The circuit over r1 || r2 || w described in the module docstring."""

    def __init__(self, field: Field, targets: int, chunk_length: int) -> None:
        if targets < 1 or chunk_length < 1:
            raise VdafError(
                f"targets and chunk_length must be at least 1, got {targets}, {chunk_length}"
            )
        self.field = field
        self.targets = targets
        self.chunk_length = chunk_length
        self.meas_len = 2 * targets + 1
        self.checked_len = 3 * targets + 1
        self.gadgets = [ParallelSum(Mul(), chunk_length)]
        self.gadget_calls = [-(-self.checked_len // chunk_length)]
        self.joint_rand_len = self.gadget_calls[0]
        self.eval_output_len = 2
        self.output_len = 2 * targets

    def native_circuit(self) -> NativeCircuit | None:
        return NativeCircuit(SAMPLING_PAIR, self.targets, 0, self.chunk_length)

    def encode(self, measurement: Sequence[int]) -> list[int]:
        """`measurement` is round 1's bits then round 2's; refuses a pair no honest SP
        device makes."""
        t = self.targets
        if len(measurement) != 2 * t:
            raise VdafError(f"a round pair has 2 x {t} entries, got {len(measurement)}")
        try:  # ints and bools: one byte each, compared as whole integers
            data = bytes(measurement)
        except (TypeError, ValueError):
            data = b"\x02"  # anything else takes the element-wise checks below
        if max(data, default=0) <= 1:
            r1, r2 = int.from_bytes(data[:t], "little"), int.from_bytes(data[t:], "little")
            weight = (r1 ^ r2).bit_count()
            if r1 & ~r2 or weight > 1:
                raise VdafError("round 2 must equal round 1 but for at most one 0 turned to 1")
            return [*data, weight]
        if any(x not in (0, 1) for x in measurement):
            raise VdafError("round answers are 0 or 1")
        diff = [b - a for a, b in zip(measurement[:t], measurement[t:], strict=True)]
        if any(d not in (0, 1) for d in diff) or sum(diff) > 1:
            raise VdafError("round 2 must equal round 1 but for at most one 0 turned to 1")
        return [int(x) for x in measurement] + [sum(diff)]

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall],
    ) -> list[int]:
        f, t = self.field, self.targets
        r1, r2, w = meas[:t], meas[t : 2 * t], meas[2 * t]
        diff = [(b - a) % f.modulus for a, b in zip(r1, r2, strict=True)]
        checked = [*r1, *r2, *diff, w]
        range_check = bits_check(f, checked, joint_rand, num_shares, self.chunk_length, gadgets)
        return [range_check, (sum(diff) - w) % f.modulus]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return list(meas[: 2 * self.targets])

    def decode(self, output: Sequence[int], num_measurements: int) -> list[int]:
        return list(output)


def pair_vdaf(targets: int) -> Prio3[Sequence[int], list[int]]:
    """The VDAF for SP's round pair over `targets` cells, for two aggregators. Field128: the
    circuit uses joint randomness, so one proof needs the large field."""
    circuit = SamplingPair(Field128, targets, max(1, isqrt(3 * targets + 1)))
    return Prio3(PRIO3_SAMPLING_PAIR, Flp(circuit), 2)


def split_counts(counts: Sequence[int], targets: int) -> tuple[list[int], list[int]]:
    """Unsharded pair counts as (Y1, Y2) per target."""
    if len(counts) != 2 * targets:
        raise ValueError(f"pair counts have 2 x {targets} entries, got {len(counts)}")
    return list(counts[:targets]), list(counts[targets:])
