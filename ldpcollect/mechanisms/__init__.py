"""The privacy mechanisms: each module holds its device, fleet and aggregator halves."""

from ldpcollect.mechanisms.draw import DeviceDraw
from ldpcollect.mechanisms.estimates import Z95, Estimates
from ldpcollect.mechanisms.randomized_response import RandomizedResponse
from ldpcollect.mechanisms.registry import (
    MECHANISM_PARAMS,
    Mechanism,
    draw_from_json,
    mechanism_from_params,
)
from ldpcollect.mechanisms.sampling_privacy import SamplingPrivacy
from ldpcollect.mechanisms.targets import MAX_TARGETS, validate_targets

__all__ = [
    "MAX_TARGETS",
    "MECHANISM_PARAMS",
    "Z95",
    "DeviceDraw",
    "Estimates",
    "Mechanism",
    "RandomizedResponse",
    "SamplingPrivacy",
    "draw_from_json",
    "mechanism_from_params",
    "validate_targets",
]
