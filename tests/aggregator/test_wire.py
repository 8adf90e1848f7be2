"""Conversions between the wire contract and the core mechanisms."""

from __future__ import annotations

from fractions import Fraction

import grpc
import pytest

from ldpcollect.errors import ParameterError
from ldpcollect.geo import GridScheme, H3Scheme
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.wire import (
    mechanism_from_proto,
    mechanism_to_proto,
    noise_sigma_from_proto,
    parameter_error_status,
    scheme_from_proto,
    scheme_from_text,
    scheme_to_proto,
    scheme_to_text,
    validate_query_id,
)


def test_mechanisms_round_trip_exactly() -> None:
    rr = RandomizedResponse("0.85", "0.3")
    sp = SamplingPrivacy("17/20")
    for mech in (rr, sp):
        assert mechanism_from_proto(mechanism_to_proto(mech)) == mech
    spec = mechanism_to_proto(rr)
    assert spec.randomized_response.flip1 == "17/20"


@pytest.mark.parametrize(
    ("spec", "parameter"),
    [
        (pb.MechanismSpec(), "mechanism"),
        (pb.MechanismSpec(randomized_response=pb.RandomizedResponse(flip2="0.3")), "flip1"),
        (
            pb.MechanismSpec(randomized_response=pb.RandomizedResponse(flip1="x", flip2="0")),
            "flip1",
        ),
        (
            pb.MechanismSpec(randomized_response=pb.RandomizedResponse(flip1="0", flip2="0")),
            "flip1",
        ),
        (
            pb.MechanismSpec(randomized_response=pb.RandomizedResponse(flip1="1", flip2="2")),
            "flip2",
        ),
        (
            pb.MechanismSpec(sampling_privacy=pb.SamplingPrivacy(sampling_rate="1/0")),
            "sampling_rate",
        ),
        (pb.MechanismSpec(sampling_privacy=pb.SamplingPrivacy(sampling_rate="0")), "sampling_rate"),
    ],
)
def test_bad_mechanism_names_the_parameter(spec: pb.MechanismSpec, parameter: str) -> None:
    with pytest.raises(ParameterError) as info:
        mechanism_from_proto(spec)
    assert info.value.parameter == parameter
    code, message = parameter_error_status(info.value)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert parameter in message


def test_schemes_round_trip_and_reject_bad_resolutions() -> None:
    assert scheme_to_text(scheme_from_text("grid")) == "grid"
    assert scheme_to_text(scheme_from_text("H3:8")) == "h3:8"
    assert scheme_from_proto(scheme_from_text("h3:8")) == H3Scheme(8)
    assert scheme_to_proto(GridScheme()) == scheme_from_text("grid")
    for bad in ("h3:16", "h3:x", "hex"):
        with pytest.raises(ParameterError):
            scheme_from_text(bad)
    with pytest.raises(ParameterError, match="location_scheme"):
        scheme_to_text(pb.LocationScheme())
    with pytest.raises(ParameterError, match="h3 resolution"):
        scheme_to_text(pb.LocationScheme(h3=pb.H3Scheme(resolution=99)))


def test_noise_sigma_and_query_id() -> None:
    assert noise_sigma_from_proto(pb.ReleaseNoise()) is None
    assert noise_sigma_from_proto(pb.ReleaseNoise(sigma="2.5")) == Fraction(5, 2)
    for bad in ("0", "-1", "abc"):
        with pytest.raises(ParameterError, match="noise sigma"):
            noise_sigma_from_proto(pb.ReleaseNoise(sigma=bad))
    assert validate_query_id("q-1.a_b") == "q-1.a_b"
    for bad in ("", "a b", "x" * 65):
        with pytest.raises(ParameterError, match="query_id"):
            validate_query_id(bad)
