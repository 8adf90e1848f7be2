"""One statement of privacy loss for one view (`PrivacyClaim`), and the orders at which Renyi
curves are stated and combined."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

VIEWS = ("public", "aggregator")
GUARANTEES = ("pure", "zcdp", "approximate", "none")
MAX_TARGETS = 65_536
# Orders of the Renyi filter (`renyi_filter`); claims that have their own curve state it there.
FILTER_ORDERS: tuple[float, ...] = (
    1.25,
    1.5,
    2.0,
    3.0,
    4.0,
    6.0,
    8.0,
    12.0,
    16.0,
    24.0,
    32.0,
    64.0,
)
# Orders at which RDP curves are combined and converted (any order gives a valid bound).
ORDERS: tuple[float, ...] = tuple(float(a) for a in 1.0 + np.logspace(-2.5, 3.5, 400))


@dataclass(frozen=True)
class PrivacyClaim:
    """One statement of privacy loss for one view; fields mirror the wire message."""

    view: str
    guarantee: str
    epsilon: float
    delta: float
    epsilon_bun_steinke: float
    rho: float | None
    pure_epsilon: float | None
    explanation: str
    headline: str = "local_exact"  # the method that gives `epsilon`
    figures: dict[str, float] = field(default_factory=dict)  # other valid epsilons at `delta`
    renyi: dict[str, float] = field(default_factory=dict)  # D_alpha by order ("2", "1.5")
    # What was released (mechanism, its parameters, targets, noise, participants floor), so the
    # ledger can rebuild the release's privacy-loss distribution (`release_pld`). Strings only.
    source: dict[str, str] = field(default_factory=dict)
    # Set when no finite epsilon holds at `delta` because the view reveals a device's location
    # exactly with this probability (Sampling Privacy without noise: (0, s)-DP and no better).
    reveal_probability: float | None = None

    @property
    def unbounded(self) -> bool:
        """No finite epsilon at `delta`: the view is (0, reveal_probability)-DP or nothing."""
        return self.reveal_probability is not None or math.isinf(self.epsilon)

    def composable(self) -> tuple[float, float]:
        """(epsilon, delta) that basic composition adds for this claim: (0, reveal_probability)
        when the view reveals a device with that probability, else the claim's own pair."""
        if self.reveal_probability is not None:
            return 0.0, self.reveal_probability
        return self.epsilon, self.delta

    def to_json(self) -> dict[str, Any]:
        """JSON of numbers or null; `null_reasons` says why each null is null."""
        data = asdict(self)
        reasons: dict[str, str] = {}
        for key in ("epsilon", "epsilon_bun_steinke"):
            if math.isinf(data[key]):
                data[key] = None
                reasons[key] = f"no finite bound at delta {self.delta:g} ({self.guarantee})"
        if self.rho is None or math.isinf(self.rho):
            data["rho"] = None
            reasons["rho"] = "no zCDP bound for this view"
        if self.pure_epsilon is None or math.isinf(self.pure_epsilon):
            data["pure_epsilon"] = None
            reasons["pure_epsilon"] = "no pure-DP bound for this view"
        for name, value in self.figures.items():
            if math.isinf(value):
                data["figures"][name] = None
                reasons[f"figures.{name}"] = "this method gives no finite bound here"
        for order, value in self.renyi.items():
            if math.isinf(value):
                data["renyi"][order] = None
                reasons[f"renyi.{order}"] = "no finite Renyi divergence at this order"
        if self.reveal_probability is not None:
            reasons["epsilon"] = (
                f"no finite epsilon at any delta below {self.reveal_probability:g}: the view "
                f"reveals a device's cell exactly with probability {self.reveal_probability:g}"
            )
        data["unbounded"] = self.unbounded
        data["null_reasons"] = reasons
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> PrivacyClaim:
        reveal = data.get("reveal_probability")
        epsilon = _decode(data["epsilon"])
        if reveal is None and data["guarantee"] == "approximate":
            # Recorded before `reveal_probability`: stored as (0, s); no finite epsilon below s.
            reveal, epsilon = float(data["delta"]), math.inf
        return PrivacyClaim(
            view=str(data["view"]),
            guarantee=str(data["guarantee"]),
            epsilon=epsilon,
            delta=float(data["delta"]),
            epsilon_bun_steinke=math.inf
            if reveal is not None
            else _decode(data["epsilon_bun_steinke"]),
            rho=None if data.get("rho") is None else float(data["rho"]),
            pure_epsilon=None if data.get("pure_epsilon") is None else float(data["pure_epsilon"]),
            explanation=str(data["explanation"]),
            headline=str(data.get("headline", "local_exact")),
            figures={str(k): _decode(v) for k, v in data.get("figures", {}).items()},
            renyi={str(k): _decode(v) for k, v in data.get("renyi", {}).items()},
            source={str(k): str(v) for k, v in data.get("source", {}).items()},
            reveal_probability=None if reveal is None else float(reveal),
        )


def _decode(value: object) -> float:
    """A stored figure: null (or the legacy string "inf") means no finite bound."""
    return math.inf if value is None or value == "inf" else float(str(value))
