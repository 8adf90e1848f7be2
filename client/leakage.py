"""What answering a query costs a device: its local leakage, charged once per query.

The cost is the accounting package's `device_query_cost` (engineer C), i.e. what the party that
receives the device's reports (the trusted aggregator; docs/design.md, "Trust models and
views") learns, for bounded neighbours (the device changes its location):

- Randomized response: the pure epsilon of one report of one bit per target. With one target
  that is eps0 = ln(1 + p / ((1-p) min(q, 1-q))); with two or more, a move between targets
  flips two bits, so ln(a1/a0) + ln((1-a0)/(1-a1)) (5.198 for 0.85/0.3, not 2.990).
- Sampling Privacy: the aggregator links the two rounds under one pseudonym, and the linked pair
  reveals selection exactly (round 1 = 0, round 2 = 1 at the device's own target happens with
  probability s there and never elsewhere). It has no finite pure epsilon; it is (0, s)-DP.
  Summing the rounds' per-round epsilons (-ln(1-s) each) would understate it: the rounds are not
  independent. So a device whose budget has no delta (the default) declines SP queries: the
  honest consequence of the trusted model.

Charged once per query (both rounds of an SP query are one linked pair), recorded with the draw
before the first report leaves the device; replaying a saved draw after a restart costs nothing.
"""

from __future__ import annotations

from ldpcollect.accounting.device_budget import DeviceBudget, LocalCost, device_query_cost
from ldpcollect.mechanisms import Mechanism

__all__ = ["DeviceBudget", "LocalCost", "query_cost"]


def query_cost(mech: Mechanism, n_targets: int) -> LocalCost:
    """(epsilon, delta) a device is charged for answering every round of one query."""
    return device_query_cost(mech, n_targets)
