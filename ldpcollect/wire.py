"""Conversions between the wire contract (`ldpcollect.v1`) and the shared core.

Both sides use these: the aggregator to read what the operator and devices send, the device
SDK to read a query's public parameters. Anything invalid raises `ParameterError`, which a
service maps to INVALID_ARGUMENT with `parameter_error_status`.
"""

from __future__ import annotations

import re
from fractions import Fraction

import grpc

from ldpcollect.errors import ParameterError
from ldpcollect.geo import LocationScheme
from ldpcollect.geo import scheme_from_text as geo_scheme_from_text
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy
from ldpcollect.rational import parse_rational_text
from ldpcollect.release_noise import NOISE_SIGMA_RANGE, validate_noise_sigma
from ldpcollect.v1 import ldpcollect_pb2 as pb

__all__ = [
    "H3_RESOLUTIONS",
    "QUERY_ID_PATTERN",
    "REPORT_KEY_BYTES",
    "mechanism_from_proto",
    "mechanism_to_proto",
    "noise_sigma_from_proto",
    "noise_sigma_to_proto",
    "parameter_error_status",
    "parse_probability_text",
    "scheme_from_proto",
    "scheme_from_text",
    "scheme_to_proto",
    "scheme_to_text",
    "validate_query_id",
]

# Device pseudonyms and report ids are 16 random bytes.
REPORT_KEY_BYTES = 16
H3_RESOLUTIONS = range(0, 16)
QUERY_ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def parse_probability_text(parameter: str, text: str, allowed: str) -> Fraction:
    """Decimal or fraction text ("0.85", "17/20") to an exact Fraction; range not checked."""
    return parse_rational_text(parameter, text, allowed)


def mechanism_from_proto(spec: pb.MechanismSpec) -> Mechanism:
    """The core mechanism a `MechanismSpec` describes; ParameterError when unset or invalid."""
    which = spec.WhichOneof("mechanism")
    if which == "randomized_response":
        rr = spec.randomized_response
        flip1 = parse_probability_text("flip1", rr.flip1, "(0, 1]")
        flip2 = parse_probability_text("flip2", rr.flip2, "[0, 1]")
        return RandomizedResponse(flip1, flip2)
    if which == "sampling_privacy":
        rate = parse_probability_text(
            "sampling_rate", spec.sampling_privacy.sampling_rate, "(0, 1]"
        )
        return SamplingPrivacy(rate)
    raise ParameterError(
        "mechanism", None, "randomized_response or sampling_privacy", "no mechanism set"
    )


def mechanism_to_proto(mech: Mechanism) -> pb.MechanismSpec:
    """The wire form of a mechanism; parameters as exact fraction text."""
    params = mech.params()
    if mech.name == "rr":
        return pb.MechanismSpec(
            randomized_response=pb.RandomizedResponse(flip1=params["flip1"], flip2=params["flip2"])
        )
    if mech.name == "sp":
        return pb.MechanismSpec(
            sampling_privacy=pb.SamplingPrivacy(sampling_rate=params["sampling_rate"])
        )
    raise ParameterError("mechanism", mech.name, "rr or sp")


def scheme_to_text(scheme: pb.LocationScheme) -> str:
    """ "grid" or "h3:<resolution>"; ParameterError when unset or the resolution is invalid."""
    which = scheme.WhichOneof("scheme")
    if which == "grid":
        return "grid"
    if which == "h3":
        resolution = scheme.h3.resolution
        if resolution not in H3_RESOLUTIONS:
            raise ParameterError("h3 resolution", resolution, "[0, 15]")
        return f"h3:{resolution}"
    raise ParameterError("location_scheme", None, "grid or h3", "no location scheme set")


def scheme_from_text(text: str) -> pb.LocationScheme:
    """Parse "grid" or "h3:<resolution>" into the wire message."""
    cleaned = text.strip().lower()
    if cleaned == "grid":
        return pb.LocationScheme(grid=pb.GridScheme())
    if cleaned.startswith("h3:"):
        try:
            resolution = int(cleaned[3:])
        except ValueError as exc:
            raise ParameterError("h3 resolution", cleaned[3:], "[0, 15]") from exc
        if resolution not in H3_RESOLUTIONS:
            raise ParameterError("h3 resolution", resolution, "[0, 15]")
        return pb.LocationScheme(h3=pb.H3Scheme(resolution=resolution))
    raise ParameterError("location_scheme", text, '"grid" or "h3:<0..15>"')


def scheme_from_proto(scheme: pb.LocationScheme) -> LocationScheme:
    """The `ldpcollect.geo` scheme object a `LocationScheme` message describes."""
    return geo_scheme_from_text(scheme_to_text(scheme))


def scheme_to_proto(scheme: LocationScheme) -> pb.LocationScheme:
    return scheme_from_text(scheme.describe())


def noise_sigma_from_proto(noise: pb.ReleaseNoise) -> Fraction | None:
    """Release-noise sigma as an exact Fraction (> 0); None when no noise is requested."""
    if not noise.sigma.strip():
        return None
    sigma = parse_rational_text("noise sigma", noise.sigma, NOISE_SIGMA_RANGE)
    return validate_noise_sigma(sigma)


def noise_sigma_to_proto(sigma: Fraction | None) -> pb.ReleaseNoise:
    return pb.ReleaseNoise(sigma="" if sigma is None else str(sigma))


# A query's description is free text for people: bounded, so it cannot carry bulk data into
# every listing and release record.
MAX_DESCRIPTION_CHARS = 2_000


def validate_description(description: str) -> str:
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise ParameterError(
            "description",
            f"{len(description)} characters",
            f"at most {MAX_DESCRIPTION_CHARS} characters",
        )
    return description


def validate_query_id(query_id: str) -> str:
    if not QUERY_ID_PATTERN.fullmatch(query_id):
        raise ParameterError("query_id", query_id, "[A-Za-z0-9_.-]{1,64}")
    return query_id


def parameter_error_status(err: ParameterError) -> tuple[grpc.StatusCode, str]:
    """The gRPC status for a bad parameter: INVALID_ARGUMENT with the error's message."""
    return grpc.StatusCode.INVALID_ARGUMENT, str(err)
