"""What answering a query costs a device: its local leakage, charged once per query.

Choice (documented in the device's budget): a device is charged the pure local epsilon of
everything the party receiving its reports sees (in the trusted model, DESIGN.md section 2,
the one aggregator), for bounded neighbours: the device changes its location.

- Randomized response: one report of one bit per target. With one target that is eps0 =
  ln(1 + p / ((1-p) min(q, 1-q))) (`mech.local_epsilon()`). With two or more targets a move
  from target t1 to t2 flips the truth of TWO bits, so the report's pure epsilon is
  ln(a1/a0) + ln((1-a0)/(1-a1)) (5.198 for 0.85/0.3, not 2.990). The charge is computed by
  the accounting package's exact pairs (`ldpcollect.accounting.local_pairs`).
- Sampling Privacy: two reports under one pseudonym, so the aggregator sees them linked. One
  round alone leaks little (-ln(1-s) per bit), but the linked pair reveals selection exactly:
  the pattern (round 1 = 0, round 2 = 1) for target t happens with probability s at t and
  never elsewhere. The pair has no finite pure epsilon (it is only (eps, delta = s)-DP), so
  the honest charge is +inf: a device with a finite budget declines SP queries in the trusted
  model. Summing the rounds' epsilons would understate it: the rounds are not independent.
- `rounds_linked=False` is for a deployment where no single party sees two rounds of one
  device (e.g. the two-aggregator secure mode): each round is charged its own pure epsilon
  (rounds x eps_round), by basic composition over the parties' separate views.
"""

from __future__ import annotations

import math

from ldpcollect.accounting.local_pairs import rr_pairs, sp_round_pairs, worst_pure_epsilon
from ldpcollect.mechanisms import Mechanism, RandomizedResponse


def round_epsilon(mech: Mechanism, n_targets: int) -> float:
    """Pure local epsilon of one round's report over `n_targets` targets."""
    if isinstance(mech, RandomizedResponse):
        pairs = rr_pairs(float(mech.flip1), float(mech.flip2), n_targets)
    else:
        pairs = sp_round_pairs(float(mech.sampling_rate), n_targets)
    return float(worst_pure_epsilon(pairs))


def query_charge(mech: Mechanism, n_targets: int, *, rounds_linked: bool = True) -> float:
    """Local epsilon a device is charged for answering every round of one query."""
    if mech.rounds == 1:
        return round_epsilon(mech, n_targets)
    if rounds_linked:
        return math.inf
    return mech.rounds * round_epsilon(mech, n_targets)
