"""The mechanisms by name, as queries and saved draws refer to them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms.randomized_response import RandomizedResponse
from ldpcollect.mechanisms.sampling_privacy import SamplingPrivacy

Mechanism: TypeAlias = RandomizedResponse | SamplingPrivacy

MECHANISM_PARAMS: dict[str, tuple[str, ...]] = {
    "rr": ("flip1", "flip2"),
    "sp": ("sampling_rate",),
}


def mechanism_from_params(name: str, params: Mapping[str, str]) -> Mechanism:
    """Build a mechanism from its public name and parameters (as `params()` writes them)."""
    if name not in MECHANISM_PARAMS:
        raise ParameterError("mechanism", name, "one of 'rr', 'sp'")
    expected = MECHANISM_PARAMS[name]
    if set(params) != set(expected):
        raise ParameterError(
            "params", sorted(params), f"exactly the keys {list(expected)} for mechanism {name!r}"
        )
    if name == "rr":
        return RandomizedResponse(params["flip1"], params["flip2"])
    return SamplingPrivacy(params["sampling_rate"])
