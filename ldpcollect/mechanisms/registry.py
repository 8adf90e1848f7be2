"""The mechanisms by name, as queries and saved draws refer to them."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import TypeAlias

from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms.draw import DRAW_FORMAT, DeviceDraw
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


def draw_from_json(data: Mapping[str, object]) -> DeviceDraw:
    """Restore a draw saved by `DeviceDraw.to_json`; anything malformed raises
    ParameterError("device_draw", ...)."""
    allowed = f"a dict written by DeviceDraw.to_json ({DRAW_FORMAT})"
    if not isinstance(data, Mapping) or data.get("format") != DRAW_FORMAT:
        raise ParameterError("device_draw", _short(data), allowed, "unknown format")
    name, params, n_targets, answers = (
        data.get("mechanism"),
        data.get("params"),
        data.get("n_targets"),
        data.get("answers"),
    )
    if (
        not isinstance(name, str)
        or not isinstance(params, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())
        or isinstance(n_targets, bool)
        or not isinstance(n_targets, int)
        or not 1 <= n_targets <= 65_536
        or not isinstance(answers, list)
        or not all(isinstance(a, str) for a in answers)
    ):
        raise ParameterError("device_draw", _short(data), allowed, "missing or mistyped field")
    mechanism = mechanism_from_params(name, params)
    if len(answers) != mechanism.rounds:
        raise ParameterError(
            "device_draw", f"{len(answers)} rounds", f"{mechanism.rounds} rounds for {name}"
        )
    try:
        packed = tuple(base64.b64decode(a, validate=True) for a in answers)
    except binascii.Error:
        raise ParameterError("device_draw", answers, allowed, "answers not base64") from None
    return DeviceDraw(mechanism.name, mechanism.params(), n_targets, packed)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
