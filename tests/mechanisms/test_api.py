"""The shared-core API as other components use it: construct, params, draw, estimate."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import (
    Mechanism,
    RandomizedResponse,
    SamplingPrivacy,
    draw_from_json,
    mechanism_from_params,
)


def test_parameters_parse_exactly() -> None:
    rr = RandomizedResponse("0.85", "3/10")
    assert rr.flip1 == Fraction(17, 20)
    assert rr.flip2 == Fraction(3, 10)
    assert rr.params() == {"flip1": "17/20", "flip2": "3/10"}
    assert rr.yes_given_yes == Fraction(179, 200)
    assert rr.yes_given_no == Fraction(9, 200)
    assert (rr.name, rr.rounds) == ("rr", 1)
    sp = SamplingPrivacy(Fraction(1, 2))
    assert sp.params() == {"sampling_rate": "1/2"}
    assert (sp.name, sp.rounds) == ("sp", 2)
    assert SamplingPrivacy(1).sampling_rate == 1
    assert RandomizedResponse(0.85, 0).flip1 == Fraction(17, 20)


@pytest.mark.parametrize(
    "mech", [RandomizedResponse("17/20", "3/10"), SamplingPrivacy("1/4")], ids=["rr", "sp"]
)
def test_params_round_trip(mech: Mechanism) -> None:
    assert mechanism_from_params(mech.name, mech.params()) == mech


@pytest.mark.parametrize(
    ("name", "params", "parameter"),
    [
        ("xx", {}, "mechanism"),
        ("rr", {"flip1": "1/2"}, "params"),
        ("sp", {"sampling_rate": "1/2", "extra": "1"}, "params"),
        ("rr", {"flip1": "0", "flip2": "1/2"}, "flip1"),
        ("sp", {"sampling_rate": "half"}, "sampling_rate"),
    ],
)
def test_mechanism_from_bad_params(name: str, params: dict[str, str], parameter: str) -> None:
    with pytest.raises(ParameterError) as err:
        mechanism_from_params(name, params)
    assert err.value.parameter == parameter


@pytest.mark.parametrize(
    "mech", [RandomizedResponse("17/20", "3/10"), SamplingPrivacy("1/2")], ids=["rr", "sp"]
)
def test_draw_answers_one_packed_vector_per_round(mech: Mechanism) -> None:
    targets = list(range(100, 113))
    draw = mech.draw(105, targets)
    assert draw.rounds == mech.rounds
    for r in range(1, mech.rounds + 1):
        assert len(draw.answers(r)) == 2
        assert draw.answers(r)[-1] & 0b0000_0111 == 0
    restored = draw_from_json(json.loads(json.dumps(draw.to_json())))
    assert restored == draw
    for r in range(1, mech.rounds + 1):
        assert restored.answers(r) == draw.answers(r)
    with pytest.raises(ParameterError, match="round"):
        draw.answers(mech.rounds + 1)


def test_estimate_of_expected_counts_is_the_truth() -> None:
    rr = RandomizedResponse("17/20", "3/10")
    n, truth = 10_000, np.array([0.0, 1000.0, 10_000.0])
    expected = truth * float(rr.yes_given_yes) + (n - truth) * float(rr.yes_given_no)
    est = rr.estimate(np.rint(expected * 1000).reshape(1, -1) / 1000, n, 0.0)
    np.testing.assert_allclose(est.estimate, truth, atol=1e-6)
    assert est.std_error[1] == pytest.approx(rr.predicted_sd(1000, n))
    assert rr.predicted_sd(1000, 10_000) == pytest.approx(25.8, abs=0.05)
