"""One device's randomness for one query, decided once and kept.

Re-randomizing an answer leaks (two independent draws of the same truth average out the
noise), so a device draws every round's answers at once, saves the draw, and after a restart
answers from the restored draw, byte for byte.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ldpcollect import bits
from ldpcollect.errors import ParameterError

DRAW_FORMAT = "ldpcollect.device-draw/1"


@dataclass(frozen=True)
class DeviceDraw:
    """Packed answers for every round of one query (round 1 first)."""

    mechanism: str
    params: Mapping[str, str] = field(hash=False)
    n_targets: int
    packed: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not self.packed:
            raise ParameterError("packed", "()", "one packed answer per round")
        for data in self.packed:
            bits.unpack(data, self.n_targets)  # checks length and zero padding

    @property
    def rounds(self) -> int:
        return len(self.packed)

    def answers(self, round: int) -> bytes:
        """Packed answer bits for `round` (1-based)."""
        if isinstance(round, bool) or not isinstance(round, int) or not 1 <= round <= self.rounds:
            raise ParameterError("round", round, f"an integer in [1, {self.rounds}]")
        return self.packed[round - 1]

    def answer_bits(self, round: int) -> NDArray[np.bool_]:
        """The same answers unpacked, one bool per target."""
        return bits.unpack(self.answers(round), self.n_targets)

    def to_json(self) -> dict[str, object]:
        return {
            "format": DRAW_FORMAT,
            "mechanism": self.mechanism,
            "params": dict(self.params),
            "n_targets": self.n_targets,
            "answers": [base64.b64encode(data).decode("ascii") for data in self.packed],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> DeviceDraw:
        """Restore a saved draw; anything malformed raises ParameterError("device_draw", ...)."""
        from ldpcollect.mechanisms.registry import mechanism_from_params

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
        return cls(mechanism.name, mechanism.params(), n_targets, packed)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
