"""The generic FLP: complete (every valid measurement is accepted, shared or not) and sound
(an invalid measurement, or a valid one with a tampered proof, is rejected).

Soundness is probabilistic: an invalid input passes only if the random query point or joint
randomness hits a root of a nonzero polynomial of degree below 2**8, a chance under
2**8 / 2**64 per trial even in Field64. Over the few hundred seeded trials here a single
acceptance would have probability below 2**-45, so every trial must reject.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.vdaf.circuits import (
    Count,
    Histogram,
    MultihotCountVec,
    Sum,
    SumVec,
    encode_range_checked_int,
)
from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field64, Field128
from ldpcollect.vdaf.flp import Flp, Valid

CIRCUITS: dict[str, Valid[Any, Any]] = {
    "Count": Count(Field64),
    "Sum(1337)": Sum(Field64, 1337),
    "SumVec(3, 7, 2)": SumVec(Field128, 3, 7, 2),
    "Histogram(10, 3)": Histogram(Field128, 10, 3),
    "MultihotCountVec(10, 4, 3)": MultihotCountVec(Field128, 10, 4, 3),
}

MEASUREMENTS: dict[str, st.SearchStrategy[Any]] = {
    "Count": st.sampled_from([0, 1]),
    "Sum(1337)": st.integers(min_value=0, max_value=1337),
    "SumVec(3, 7, 2)": st.lists(st.integers(min_value=0, max_value=7), min_size=3, max_size=3),
    "Histogram(10, 3)": st.integers(min_value=0, max_value=9),
    "MultihotCountVec(10, 4, 3)": st.lists(st.booleans(), min_size=10, max_size=10).filter(
        lambda bits: sum(bits) <= 4
    ),
}

EXAMPLES: dict[str, Any] = {
    "Count": 1,
    "Sum(1337)": 1000,
    "SumVec(3, 7, 2)": [7, 0, 5],
    "Histogram(10, 3)": 4,
    "MultihotCountVec(10, 4, 3)": [True, False, True] + [False] * 7,
}


def share(
    values: Sequence[int], num_shares: int, modulus: int, rng: random.Random
) -> list[list[int]]:
    shares = [[rng.randrange(modulus) for _ in values] for _ in range(num_shares - 1)]
    last = [(v - sum(s[i] for s in shares)) % modulus for i, v in enumerate(values)]
    return [*shares, last]


def run_flp(
    flp: Flp[Any, Any],
    meas: Sequence[int],
    num_shares: int,
    rng: random.Random,
    tamper: int | None = None,
) -> bool:
    """Prove, optionally add 1 to proof element `tamper`, share, query every share, decide."""
    p = flp.field.modulus
    joint_rand = [rng.randrange(p) for _ in range(flp.joint_rand_len)]
    prove_rand = [rng.randrange(p) for _ in range(flp.prove_rand_len)]
    query_rand = [rng.randrange(p) for _ in range(flp.query_rand_len)]
    proof = flp.prove(meas, prove_rand, joint_rand)
    if tamper is not None:
        proof[tamper] = (proof[tamper] + 1) % p
    verifier = [0] * flp.verifier_len
    for meas_share, proof_share in zip(
        share(meas, num_shares, p, rng), share(proof, num_shares, p, rng), strict=True
    ):
        part = flp.query(meas_share, proof_share, query_rand, joint_rand, num_shares)
        verifier = [(a + b) % p for a, b in zip(verifier, part, strict=True)]
    return flp.decide(verifier)


@pytest.mark.parametrize("name", list(CIRCUITS))
@given(data=st.data(), num_shares=st.integers(min_value=1, max_value=4), seed=st.integers(0, 2**32))
def test_every_valid_measurement_is_accepted(
    name: str, data: st.DataObject, num_shares: int, seed: int
) -> None:
    flp = Flp(CIRCUITS[name])
    meas = flp.encode(data.draw(MEASUREMENTS[name]))
    assert run_flp(flp, meas, num_shares, random.Random(seed))


@pytest.mark.parametrize("name", list(CIRCUITS))
def test_proof_length_and_verifier_length_follow_the_gadgets(name: str) -> None:
    flp = Flp(CIRCUITS[name])
    p = flp.field.modulus
    rng = random.Random(1)
    meas = flp.encode(EXAMPLES[name])
    proof = flp.prove(
        meas,
        [rng.randrange(p) for _ in range(flp.prove_rand_len)],
        [rng.randrange(p) for _ in range(flp.joint_rand_len)],
    )
    assert len(proof) == flp.proof_len
    assert flp.verifier_len == 1 + sum(g.arity + 1 for g in flp.valid.gadgets)


def invalid_encodings(name: str, rng: random.Random) -> list[int]:
    """A random encoding the circuit must reject, drawn to hit each of its checks."""
    flp = Flp(CIRCUITS[name])
    p = flp.field.modulus
    meas = [rng.randrange(2) for _ in range(flp.meas_len)]
    bad = rng.randrange(flp.meas_len)
    if name == "Histogram(10, 3)":
        shape = rng.choice(["not one-hot", "two and minus one", "random entry"])
        if shape == "not one-hot":  # 0/1 entries but zero or several ones
            meas = [0] * 10 if rng.random() < 0.5 else [1, 1] + [0] * 8
        elif shape == "two and minus one":  # sums to one, fails only the range check
            meas = [0] * 10
            meas[bad], meas[(bad + 1) % 10] = 2, p - 1
        else:
            meas = [0] * 10
            meas[bad] = rng.randrange(2, p)
        return meas
    if name == "MultihotCountVec(10, 4, 3)" and rng.random() < 0.5:
        # entries are bits but the reported weight (bits after the first 10) is wrong
        entries = [rng.randrange(2) for _ in range(10)]
        weight = sum(entries)
        wrong = (weight + rng.randrange(1, 5)) % 5
        return entries + encode_range_checked_int(wrong, 4)
    meas[bad] = rng.randrange(2, p)  # one element that is not a bit
    return meas


@pytest.mark.parametrize("name", list(CIRCUITS))
def test_an_invalid_measurement_is_rejected(name: str) -> None:
    flp = Flp(CIRCUITS[name])
    rng = random.Random(f"soundness {name}")
    for trial in range(60):
        meas = invalid_encodings(name, rng)
        assert not run_flp(flp, meas, 1 + trial % 3, rng), f"trial {trial} accepted {meas}"


@pytest.mark.parametrize("name", list(CIRCUITS))
def test_a_tampered_proof_is_rejected(name: str) -> None:
    flp = Flp(CIRCUITS[name])
    rng = random.Random(f"tamper {name}")
    for position in range(flp.proof_len):
        meas = flp.encode(EXAMPLES[name])
        assert not run_flp(flp, meas, 2, rng, tamper=position), f"proof[{position}] + 1 accepted"


def test_a_query_point_on_the_wire_nodes_is_refused() -> None:
    flp = Flp(CIRCUITS["Count"])
    meas = flp.encode(1)
    proof = flp.prove(meas, [5, 6], [])
    with pytest.raises(VdafError, match="root of unity"):
        flp.query(meas, proof, [1], [], 1)


def test_inputs_of_the_wrong_length_are_refused() -> None:
    flp = Flp(CIRCUITS["Histogram(10, 3)"])
    with pytest.raises(VdafError, match="measurement must have 10 elements, got 9"):
        flp.prove([0] * 9, [0] * flp.prove_rand_len, [0] * flp.joint_rand_len)
    with pytest.raises(VdafError, match="verifier must have"):
        flp.decide([0])
