"""What an aggregate share sealed to the collector is bound to (its HPKE info).

The collector relies on more than the share itself: which query and parameters it belongs
to, how many reports it sums (the estimator divides by it) and how much noise its
aggregator added (the standard errors and the privacy claims depend on it). The collector
hears all of these from the leader, so each aggregator seals its share under exactly the
values it used itself; the collector opens a share only with the same values. A leader
that provisioned the helper with other parameters (min_reports 1, noise 0), or that
misstates the report count or the helper's noise, is detected: the helper's share does not
open.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction


def mechanism_text(name: str, params: Mapping[str, str]) -> str:
    """A canonical text of a mechanism (its name and `params()`), the same at every party."""
    return f"{name} {json.dumps(dict(params), sort_keys=True)}"


def sigma_text(sigma: Fraction | None) -> str:
    """A noise sigma as bound: its lowest-terms fraction, or "" for none (or zero)."""
    return "" if not sigma else str(sigma)


@dataclass(frozen=True)
class ShareBinding:
    query_id: str
    round: int
    vdaf: str
    targets: int
    min_reports: int
    mechanism: str  # `mechanism_text`
    reports: int
    noise_sigma: str  # `sigma_text` of the sigma the sealing aggregator added

    def encode(self) -> bytes:
        """Each field length-prefixed (4 bytes), integers as 8 bytes big-endian, so no two
        different bindings encode alike."""
        fields = [
            self.query_id.encode(),
            struct.pack(">Q", self.round),
            self.vdaf.encode(),
            struct.pack(">Q", self.targets),
            struct.pack(">Q", self.min_reports),
            self.mechanism.encode(),
            struct.pack(">Q", self.reports),
            self.noise_sigma.encode(),
        ]
        return b"".join(struct.pack(">I", len(f)) + f for f in fields)

    def describe(self) -> str:
        sigma = self.noise_sigma or "none"
        return (
            f"query {self.query_id!r} ({self.mechanism}, {self.targets} targets, min_reports "
            f"{self.min_reports}), {self.reports} reports, noise sigma {sigma}"
        )
