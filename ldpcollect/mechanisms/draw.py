"""One device's randomness for one query, decided once and kept.

Re-randomizing an answer leaks (two independent draws of the same truth average out the
noise), so a device draws every round's answers at once, saves the draw, and after a restart
answers from the restored draw, byte for byte. `to_json` writes a draw; the registry reads it
back (`draw_from_json`), since only the registry knows the mechanisms by name.
"""

from __future__ import annotations

import base64
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
