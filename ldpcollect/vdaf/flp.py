"""The fully linear proof of draft section 7.3 (BBCGGI19, section 4.2) over a validity circuit.

The prover runs the circuit once, recording every input wire of every gadget call; each wire
becomes a polynomial (a random seed at w**0, the call values at w**1, w**2, ...) and the
proof carries the seeds and the gadget polynomial, the gadget applied to those wires. The
verifier, holding only additive shares of the measurement and proof, runs the same circuit
but takes each gadget output from (its share of) the gadget polynomial, then evaluates the
wire and gadget polynomials at a random point t. Everything it computes is linear in its
shares, so the shares of the verifier add up to the verifier; `decide` checks that the
circuit output is zero and that the gadget applied to the wires at t equals the gadget
polynomial at t.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from operator import mul
from typing import Generic, TypeVar

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, next_power_of_two
from ldpcollect.vdaf.gadgets import Gadget, gadget_poly_len, wire_poly_len
from ldpcollect.vdaf.native import NativeCircuit
from ldpcollect.vdaf.polynomial import (
    double_evaluations,
    extend_values,
    lagrange_eval,
    lagrange_weights,
)

Measurement = TypeVar("Measurement")
AggResult = TypeVar("AggResult")

GadgetCall = Callable[[list[int]], int]
"""How a circuit calls its i-th gadget: inputs in, output out. The prover and the verifier
pass different callables (recording, or reading the proof), so the circuit is written once."""


class Valid(ABC, Generic[Measurement, AggResult]):
    """A validity circuit: accepts a measurement's encoding iff every output is zero.

    Subclasses set the attributes below. `eval` must be affine in `meas` apart from its
    gadget calls, and scale every added constant by 1 / num_shares, so that evaluating it on
    a share gives a share of the output.
    """

    field: Field
    gadgets: Sequence[Gadget]
    gadget_calls: Sequence[int]
    meas_len: int
    joint_rand_len: int
    eval_output_len: int
    output_len: int

    @abstractmethod
    def encode(self, measurement: Measurement) -> list[int]: ...

    @abstractmethod
    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall],
    ) -> list[int]: ...

    @abstractmethod
    def truncate(self, meas: Sequence[int]) -> list[int]:
        """The aggregatable part of an encoded measurement (or of a share of one)."""

    @abstractmethod
    def decode(self, output: Sequence[int], num_measurements: int) -> AggResult: ...

    def native_circuit(self) -> NativeCircuit | None:
        """How the compiled Prio3 names this circuit, if it implements it (ldpcollect/vdaf/
        native.py); None keeps the instance on this reference code."""
        return None

    def plain_gadgets(self) -> list[GadgetCall]:
        """The gadgets themselves, for evaluating the circuit in the clear."""
        return [_plain(self.field, g) for g in self.gadgets]


def _plain(field: Field, gadget: Gadget) -> GadgetCall:
    return lambda inp: gadget.eval(field, inp)


class _WireRecorder:
    """Records the input wires of a gadget's calls. Wire j's polynomial takes its seed at
    w**0 and the j-th input of call k at w**k (w the principal p-th root of unity, p the
    wire length), then zeros."""

    def __init__(self, gadget: Gadget, calls: int, seeds: Sequence[int]) -> None:
        self.gadget, self.calls, self.seeds = gadget, calls, list(seeds)
        self.inputs: list[list[int]] = []

    def record(self, inp: list[int]) -> int:
        """Keep one call's inputs; its index k (from 1)."""
        if len(self.inputs) == self.calls:
            raise VdafError(f"the circuit called a gadget more than its {self.calls} calls")
        if len(inp) != self.gadget.arity:
            raise VdafError(f"a gadget of arity {self.gadget.arity} got {len(inp)} inputs")
        self.inputs.append(inp)
        return len(self.inputs)

    def wires(self) -> list[list[int]]:
        padding = [0] * (wire_poly_len(self.calls) - 1 - len(self.inputs))
        columns = zip(*self.inputs, strict=True) if self.inputs else ((),) * len(self.seeds)
        return [[seed, *column, *padding] for seed, column in zip(self.seeds, columns, strict=True)]


class _ProveRecorder(_WireRecorder):
    """The prover's view of a gadget: record the inputs and compute the output."""

    def __init__(self, field: Field, gadget: Gadget, calls: int, seeds: Sequence[int]) -> None:
        super().__init__(gadget, calls, seeds)
        self.field = field

    def __call__(self, inp: list[int]) -> int:
        p = self.field.modulus
        inp = [x % p for x in inp]  # a circuit may pass unreduced inputs (`bits_check`)
        self.record(inp)
        return self.gadget.eval(self.field, inp)


class _QueryRecorder(_WireRecorder):
    """The verifier's view of a gadget: record the inputs (of a share) and answer call k from
    (the share of) the gadget polynomial at w**k. The inputs are only used in `wires_at`,
    which reduces its sums, so unreduced inputs are fine here."""

    def __init__(
        self,
        field: Field,
        gadget: Gadget,
        calls: int,
        seeds: Sequence[int],
        gadget_poly: Sequence[int],
    ) -> None:
        super().__init__(gadget, calls, seeds)
        self.field = field
        p = wire_poly_len(calls)
        poly = extend_values(field, gadget_poly, next_power_of_two(len(gadget_poly)))
        size = next_power_of_two(gadget_poly_len(gadget.degree, p))
        while len(poly) < size:
            poly = double_evaluations(field, poly)
        self.poly = poly
        self.step = len(poly) // p

    def __call__(self, inp: list[int]) -> int:
        return self.poly[self.record(inp) * self.step]

    def wires_at(self, t: int) -> list[int]:
        """Each wire polynomial evaluated at t (Lagrange weights over the wire nodes; the
        zero padding after the recorded calls contributes nothing, so it is skipped)."""
        p = self.field.modulus
        weights = lagrange_weights(self.field, wire_poly_len(self.calls), t)
        used = weights[: 1 + len(self.inputs)]
        columns = zip(self.seeds, *self.inputs, strict=True)
        return [sum(map(mul, used, column)) % p for column in columns]


class Flp(Generic[Measurement, AggResult]):
    """The generic FLP for one validity circuit: prove, query, decide, and the encoding."""

    def __init__(self, valid: Valid[Measurement, AggResult]) -> None:
        self.valid = valid
        self.field = valid.field
        self.meas_len = valid.meas_len
        self.output_len = valid.output_len
        self.joint_rand_len = valid.joint_rand_len
        self.prove_rand_len = sum(g.arity for g in valid.gadgets)
        self.query_rand_len = len(valid.gadgets) + (
            valid.eval_output_len if valid.eval_output_len > 1 else 0
        )
        self.proof_len = sum(
            g.arity + gadget_poly_len(g.degree, wire_poly_len(calls))
            for g, calls in zip(valid.gadgets, valid.gadget_calls, strict=True)
        )
        self.verifier_len = 1 + sum(g.arity + 1 for g in valid.gadgets)

    def encode(self, measurement: Measurement) -> list[int]:
        return self.valid.encode(measurement)

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return self.valid.truncate(meas)

    def decode(self, output: Sequence[int], num_measurements: int) -> AggResult:
        return self.valid.decode(output, num_measurements)

    def prove(
        self, meas: Sequence[int], prove_rand: Sequence[int], joint_rand: Sequence[int]
    ) -> list[int]:
        _check_len("measurement", meas, self.meas_len)
        _check_len("prove randomness", prove_rand, self.prove_rand_len)
        _check_len("joint randomness", joint_rand, self.joint_rand_len)
        recorders = []
        offset = 0
        for g, calls in zip(self.valid.gadgets, self.valid.gadget_calls, strict=True):
            seeds = prove_rand[offset : offset + g.arity]
            offset += g.arity
            recorders.append(_ProveRecorder(self.field, g, calls, seeds))
        self.valid.eval(meas, joint_rand, 1, recorders)

        proof: list[int] = []
        for r in recorders:
            wires = r.wires()
            proof += r.seeds
            gadget_poly = r.gadget.eval_poly(self.field, wires)
            proof += gadget_poly[: gadget_poly_len(r.gadget.degree, len(wires[0]))]
        return proof

    def query(
        self,
        meas: Sequence[int],
        proof: Sequence[int],
        query_rand: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
    ) -> list[int]:
        """The verifier (a share of it, when given shares of meas and proof)."""
        _check_len("measurement share", meas, self.meas_len)
        _check_len("proof share", proof, self.proof_len)
        _check_len("query randomness", query_rand, self.query_rand_len)
        _check_len("joint randomness", joint_rand, self.joint_rand_len)
        field, p = self.field, self.field.modulus
        recorders = []
        offset = 0
        for g, calls in zip(self.valid.gadgets, self.valid.gadget_calls, strict=True):
            seeds = proof[offset : offset + g.arity]
            offset += g.arity
            poly_len = gadget_poly_len(g.degree, wire_poly_len(calls))
            gadget_poly = proof[offset : offset + poly_len]
            offset += poly_len
            recorders.append(_QueryRecorder(field, g, calls, seeds, gadget_poly))
        out = self.valid.eval(meas, joint_rand, num_shares, recorders)

        # Several circuit outputs are checked at once through a random linear combination.
        outputs = self.valid.eval_output_len
        rand = list(query_rand)
        if outputs > 1:
            coeffs, rand = rand[:outputs], rand[outputs:]
            v = sum(c * o for c, o in zip(coeffs, out, strict=True)) % p
        else:
            [v] = out

        verifier = [v]
        for r, t in zip(recorders, rand, strict=True):
            # A t among the wire nodes would reveal a gadget input: refuse it.
            if pow(t, wire_poly_len(r.calls), p) == 1:
                raise VdafError("the query point is a root of unity")
            verifier += r.wires_at(t)
            verifier.append(lagrange_eval(field, r.poly, t))
        return verifier

    def decide(self, verifier: Sequence[int]) -> bool:
        _check_len("verifier", verifier, self.verifier_len)
        if verifier[0] != 0:
            return False
        offset = 1
        for g in self.valid.gadgets:
            wires = verifier[offset : offset + g.arity]
            gadget_at_t = verifier[offset + g.arity]
            offset += g.arity + 1
            if g.eval(self.field, wires) != gadget_at_t:
                return False
        return True


def _check_len(what: str, vec: Sequence[int], expected: int) -> None:
    if len(vec) != expected:
        raise VdafError(f"{what} must have {expected} elements, got {len(vec)}")
