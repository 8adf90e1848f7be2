"""Bad input raises ParameterError naming the parameter and its allowed range."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import (
    RandomizedResponse,
    SamplingPrivacy,
    draw_from_json,
    validate_targets,
)

unit = st.fractions(min_value=0, max_value=1, max_denominator=10**6)
outside = st.one_of(
    st.fractions(max_value=0, max_denominator=10**6),
    st.fractions(min_value=Fraction(1) + Fraction(1, 10**6), max_denominator=10**6),
)


@given(unit.filter(lambda p: p > 0), unit)
def test_valid_rr_constructs(p: Fraction, q: Fraction) -> None:
    rr = RandomizedResponse(str(p), q)
    assert (rr.flip1, rr.flip2) == (p, q)
    assert 0 <= rr.yes_given_no <= rr.yes_given_yes <= 1


@given(outside, unit)
def test_invalid_flip1_raises(p: Fraction, q: Fraction) -> None:
    with pytest.raises(ParameterError) as err:
        RandomizedResponse(p, q)
    assert err.value.parameter == "flip1"
    assert "(0, 1]" in str(err.value)


@given(unit.filter(lambda p: p > 0), outside.filter(lambda q: q != 0))
def test_invalid_flip2_raises(p: Fraction, q: Fraction) -> None:
    with pytest.raises(ParameterError) as err:
        RandomizedResponse(p, q)
    assert err.value.parameter == "flip2"
    assert "[0, 1]" in str(err.value)


@given(outside)
def test_invalid_sampling_rate_raises(s: Fraction) -> None:
    with pytest.raises(ParameterError) as err:
        SamplingPrivacy(str(s))
    assert err.value.parameter == "sampling_rate"
    assert "(0, 1]" in str(err.value)


@pytest.mark.parametrize(
    ("targets", "detail"),
    [
        ([], "no targets"),
        ([1, 2, 1], "duplicate"),
        ([-1], "out of range"),
        ([2**64], "out of range"),
        ([1.0], "not an integer"),
        ([True], "not an integer"),
        (range(65_537), "too many"),
    ],
)
def test_bad_targets(targets: list[int], detail: str) -> None:
    with pytest.raises(ParameterError, match=detail) as err:
        validate_targets(targets)
    assert err.value.parameter == "targets"
    assert "65,536" in str(err.value)
    with pytest.raises(ParameterError):
        SamplingPrivacy("1/2").draw(0, targets)


def test_largest_target_list_and_extreme_ids_are_fine() -> None:
    assert len(validate_targets(range(65_536))) == 65_536
    assert validate_targets([0, 2**64 - 1]) == (0, 2**64 - 1)
    draw = RandomizedResponse(1, 0).draw(2**64 - 1, [0, 2**64 - 1])
    assert draw.answer_bits(1).tolist() == [False, True]


@pytest.mark.parametrize("location", [-1, 2**64, "5", 1.5])
def test_bad_location(location: object) -> None:
    with pytest.raises(ParameterError) as err:
        RandomizedResponse(1, 0).draw(location, [1])  # type: ignore[arg-type]
    assert err.value.parameter == "location_id"


def test_bad_fleet_inputs() -> None:
    rng = np.random.default_rng(0)
    sp = SamplingPrivacy("1/2")
    with pytest.raises(ParameterError) as err:
        sp.fleet_counts(np.array([-3, 1]), np.array([1]), rng)
    assert err.value.parameter == "locations"
    with pytest.raises(ParameterError) as err:
        sp.fleet_answers(np.array([[1]]), np.array([1]), rng)
    assert err.value.parameter == "locations"
    with pytest.raises(ParameterError) as err:
        sp.fleet_counts(np.array([1]), np.array([1, 1]), rng)
    assert err.value.parameter == "targets"


def test_bad_sample_aggregate_inputs() -> None:
    rng = np.random.default_rng(0)
    rr = RandomizedResponse("1/2", "1/2")
    for counts, n in [([5, 6], 10), ([-1], 10), ([], 10), ([[1]], 10), ([1.5], 10)]:
        with pytest.raises(ParameterError) as err:
            rr.sample_aggregate(np.array(counts), n, rng)
        assert err.value.parameter == "true_counts"
    with pytest.raises(ParameterError) as err:
        rr.sample_aggregate(np.array([1]), -1, rng)
    assert err.value.parameter == "n_devices"


def test_bad_estimate_inputs() -> None:
    rr, sp = RandomizedResponse("17/20", "3/10"), SamplingPrivacy("1/2")
    with pytest.raises(ParameterError, match=r"shape \(2, T\)") as err:
        sp.estimate(np.array([[1, 2]]), 10)
    assert err.value.parameter == "round_counts"
    with pytest.raises(ParameterError, match=r"\[0, n_devices=10\]"):
        rr.estimate(np.array([[11]]), 10)
    with pytest.raises(ParameterError, match="finite"):
        rr.estimate(np.array([[np.nan]]), 10, count_noise_variance=1.0)
    with pytest.raises(ParameterError) as err:
        rr.estimate(np.array([[1]]), 10, count_noise_variance=-1.0)
    assert err.value.parameter == "count_noise_variance"
    with pytest.raises(ParameterError) as err:
        rr.predicted_sd(11, 10)
    assert err.value.parameter == "true_count"
    # noisy counts may leave [0, N]: they are noise, not an error
    assert rr.estimate(np.array([[-2.5]]), 10, count_noise_variance=4.0).n_devices == 10


def test_bad_device_draw_json() -> None:
    good = SamplingPrivacy("1/2").draw(3, [1, 2, 3]).to_json()
    bad_cases: list[dict[str, object]] = [
        {**good, "format": "other"},
        {**good, "mechanism": "xx"},
        {**good, "answers": ["AA=="]},  # one round for a two-round mechanism
        {**good, "answers": ["AAA=", "AAA="]},  # two bytes for three targets
        {**good, "answers": ["/w==", "/w=="]},  # padding bits set
        {**good, "answers": ["!!", "!!"]},
        {**good, "n_targets": "3"},
        {**good, "params": {"sampling_rate": "2"}},
    ]
    for case in bad_cases:
        with pytest.raises(ParameterError):
            draw_from_json(case)
