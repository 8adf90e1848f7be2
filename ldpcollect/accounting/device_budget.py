"""A device's own privacy budget over the queries it answers (basic composition).

Costs are what the party receiving the device's reports learns about it (the trusted
aggregator): for randomized response, the pure epsilon of one query's report (two answers
change when the query has two or more targets); for Sampling Privacy, whose two rounds the
aggregator links, (0, s): with probability s the device's location is revealed, otherwise
nothing is. So a device with a pure budget (delta 0) declines Sampling Privacy queries; that is
the honest consequence of the trusted model. Basic composition is valid for adaptively chosen
queries, and answering the same query again (a restart replays the saved draw) costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ldpcollect.accounting.local_pairs import rr_pairs, worst_pure_epsilon
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy


@dataclass(frozen=True)
class LocalCost:
    epsilon: float
    delta: float
    explanation: str


def device_query_cost(mechanism: Mechanism, n_targets: int) -> LocalCost:
    """What answering one query costs the device, towards the aggregator that receives it."""
    if n_targets < 1:
        raise ParameterError("n_targets", n_targets, "[1, 65536]")
    if isinstance(mechanism, RandomizedResponse):
        eps = worst_pure_epsilon(
            rr_pairs(float(mechanism.flip1), float(mechanism.flip2), n_targets)
        )
        return LocalCost(eps, 0.0, f"randomized response report over {n_targets} target(s)")
    if isinstance(mechanism, SamplingPrivacy):
        s = float(mechanism.sampling_rate)
        return LocalCost(0.0, s, "Sampling Privacy: both rounds linked reveal selection")
    raise ParameterError("mechanism", mechanism, "RandomizedResponse or SamplingPrivacy")


class DeviceBudgetExceeded(ValueError):
    """The device declines: the query's cost would exceed its budget."""


@dataclass
class DeviceBudget:
    epsilon: float
    delta: float = 0.0
    spent: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ParameterError("epsilon", self.epsilon, "[0, inf)")
        if not 0 <= self.delta <= 1:
            raise ParameterError("delta", self.delta, "[0, 1]")

    @property
    def spent_epsilon(self) -> float:
        return math.fsum(e for e, _ in self.spent.values())

    @property
    def spent_delta(self) -> float:
        return math.fsum(d for _, d in self.spent.values())

    def can_answer(
        self, local_epsilon: float, local_delta: float = 0.0, query_id: str = ""
    ) -> bool:
        """True if a query with this cost fits (always true for a query already answered)."""
        if query_id and query_id in self.spent:
            return True
        if local_epsilon < 0 or local_delta < 0 or math.isnan(local_epsilon + local_delta):
            raise ParameterError("local_epsilon", local_epsilon, "[0, inf]")
        if math.isinf(local_epsilon):
            return False
        return (
            math.fsum([self.spent_epsilon, local_epsilon]) <= self.epsilon
            and math.fsum([self.spent_delta, local_delta]) <= self.delta
        )

    def record(self, query_id: str, local_epsilon: float, local_delta: float = 0.0) -> None:
        """Charge a query the device answers; raises DeviceBudgetExceeded if it does not fit."""
        if query_id in self.spent:
            return
        if not self.can_answer(local_epsilon, local_delta):
            raise DeviceBudgetExceeded(
                f"device budget exceeded: spent epsilon {self.spent_epsilon:.6g} delta "
                f"{self.spent_delta:.6g}, requested epsilon {local_epsilon:.6g} delta "
                f"{local_delta:.6g}, budget epsilon {self.epsilon:g} delta {self.delta:g}"
            )
        self.spent[query_id] = (float(local_epsilon), float(local_delta))

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "spent": {q: [e, d] for q, (e, d) in self.spent.items()},
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> DeviceBudget:
        budget = DeviceBudget(float(data["epsilon"]), float(data.get("delta", 0.0)))
        for q, (e, d) in dict(data.get("spent", {})).items():
            budget.spent[str(q)] = (float(e), float(d))
        return budget
