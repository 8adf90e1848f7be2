"""Device half: exact output probabilities, SP round consistency, saved draws answer identically."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy, draw_from_json

Z = 4.5  # z-tolerance of each frequency check (two-sided p ~ 7e-6)
DRAWS = 12_000


def assert_frequency(hits: int, n: int, p: Fraction) -> None:
    se = math.sqrt(float(p * (1 - p)) * n)
    assert abs(hits - float(p) * n) <= Z * se + 1e-9, (hits, n, p)


def test_rr_device_output_probabilities() -> None:
    rr = RandomizedResponse("17/20", "3/10")
    targets = [40, 41, 42, 43, 44, 45, 46, 47, 48, 49]
    yes = np.zeros(len(targets), dtype=np.int64)
    for _ in range(DRAWS):
        yes += rr.draw(42, targets).answer_bits(1)
    assert_frequency(int(yes[2]), DRAWS, Fraction(179, 200))  # P(Yes|Yes) = 0.895
    assert_frequency(int(yes.sum() - yes[2]), DRAWS * 9, Fraction(9, 200))  # P(Yes|No) = 0.045


def test_rr_degenerate_parameters_are_deterministic() -> None:
    targets = list(range(9))
    assert RandomizedResponse(1, "1/2").draw(4, targets).answer_bits(1).tolist() == [
        t == 4 for t in targets
    ]
    assert not RandomizedResponse("1/2", 0).draw(99, targets).answer_bits(1).any()
    assert all(RandomizedResponse("1/2", 1).draw(4, targets).answer_bits(1)[4] for _ in range(50))


def test_sp_device_output_probabilities_and_round_consistency() -> None:
    s = Fraction(1, 4)
    sp = SamplingPrivacy(s)
    targets = list(range(100, 113))  # 13 targets: 3 padding bits
    own = 5
    selected = own_yes_round1 = 0
    other_yes = 0
    for _ in range(DRAWS):
        draw = sp.draw(100 + own, targets)
        r1, r2 = draw.answer_bits(1), draw.answer_bits(2)
        assert draw.answers(1)[-1] & 0b111 == 0 and draw.answers(2)[-1] & 0b111 == 0
        changed = np.flatnonzero(r1 != r2).tolist()
        assert changed in ([], [own])  # only the device's own target may change ...
        if changed:
            assert (r1[own], r2[own]) == (False, True)  # ... and only from 0 to 1
            selected += 1
        else:
            own_yes_round1 += int(r1[own])
        other_yes += int(r1.sum()) - int(r1[own])
    assert_frequency(selected, DRAWS, s)
    assert_frequency(own_yes_round1, DRAWS, (1 - s) / 2)
    assert_frequency(other_yes, DRAWS * 12, Fraction(1, 2))


def test_sp_device_elsewhere_never_selected() -> None:
    sp = SamplingPrivacy(1)  # s = 1: a device at a target is always selected
    for _ in range(200):
        draw = sp.draw(7, [1, 2, 3])
        assert draw.answers(1) == draw.answers(2)
    draw = sp.draw(2, [1, 2, 3])
    assert (draw.answer_bits(1)[1], draw.answer_bits(2)[1]) == (False, True)


@pytest.mark.parametrize(
    "mech", [RandomizedResponse("17/20", "3/10"), SamplingPrivacy("1/2")], ids=["rr", "sp"]
)
def test_restored_draw_answers_byte_identically(mech: RandomizedResponse | SamplingPrivacy) -> None:
    targets = list(range(1000, 1000 + 300))
    for location in (1000, 1150, 5):
        draw = mech.draw(location, targets)
        text = json.dumps(draw.to_json())
        restored = draw_from_json(json.loads(text))
        assert restored == draw
        assert json.dumps(restored.to_json()) == text
        for r in range(1, mech.rounds + 1):
            assert restored.answers(r) == draw.answers(r)
            assert len(restored.answers(r)) == 38


def test_device_draws_are_fresh_randomness() -> None:
    sp = SamplingPrivacy("1/2")
    targets = list(range(256))
    assert len({sp.draw(1, targets).answers(1) for _ in range(20)}) == 20
