"""Helper: its own policy, checked before it takes part in a query and again at release.

The helper does not take the leader's word for what protects devices. Its operator sets
(`ldpcollect serve --role helper ...`, docs/secure-mode.md):

- `--min-batch N` (default 100): a query whose min_reports is lower is refused, and at
  release the helper itself counts that it aggregated at least max(N, min_reports);
- `--min-noise-sigma S`: the noise it adds is the query's sigma raised to S;
- `--accept-mechanism NAME` (default rr and sp), `--max-targets N`, `--max-local-epsilon E`:
  the mechanisms and parameter ranges it takes part in;
- `--collector-config HEX` (repeatable): the only collector keys it seals to (default: the
  key each query names, printed and kept with the query so an operator can audit it);
- `--budget-epsilon/--budget-delta`: its own privacy ledger (kept in its own store).

Every refusal names the rule (the option) that refuses it. The helper keeps nothing for a
query it refuses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from aggregator.errors import FailedPrecondition
from ldpcollect.mechanisms import Mechanism
from ldpcollect.mechanisms.no_privacy import gives_no_privacy

DEFAULT_MIN_BATCH = 100
DEFAULT_MECHANISMS = ("rr", "sp")
DEFAULT_MAX_TARGETS = 100_000


class PolicyRefusal(FailedPrecondition):
    """The helper's policy refuses: FAILED_PRECONDITION naming its rule."""

    def __init__(self, rule: str, why: str) -> None:
        super().__init__(f"the helper's policy refuses ({rule}): {why}")
        self.rule = rule


@dataclass(frozen=True)
class HelperPolicy:
    min_batch: int = DEFAULT_MIN_BATCH
    min_noise_sigma: Fraction | None = None
    mechanisms: tuple[str, ...] = DEFAULT_MECHANISMS
    max_targets: int = DEFAULT_MAX_TARGETS
    max_local_epsilon: float | None = None
    # Pinned collector configs (33 bytes each); empty: the query's own, recorded.
    collector_configs: tuple[bytes, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.min_batch < 1:
            raise ValueError(f"--min-batch must be at least 1, got {self.min_batch}")
        if self.min_noise_sigma is not None and self.min_noise_sigma < 0:
            raise ValueError(f"--min-noise-sigma must be >= 0, got {self.min_noise_sigma}")

    def check_query(
        self, min_reports: int, mechanism: Mechanism, targets: int, collector_config: bytes
    ) -> None:
        """At provisioning: PolicyRefusal unless the query fits this policy."""
        if min_reports < self.min_batch:
            raise PolicyRefusal(
                f"--min-batch {self.min_batch}",
                f"the query's min_reports {min_reports} is below the {self.min_batch} reports "
                "this helper aggregates before it releases anything",
            )
        if mechanism.name not in self.mechanisms:
            raise PolicyRefusal(
                "--accept-mechanism",
                f"mechanism {mechanism.name!r} is not one of {', '.join(self.mechanisms)}",
            )
        if gives_no_privacy(mechanism):
            raise PolicyRefusal("no-privacy mechanisms", "these parameters give no privacy at all")
        if targets > self.max_targets:
            raise PolicyRefusal(
                f"--max-targets {self.max_targets}", f"the query has {targets} targets"
            )
        epsilon = mechanism.local_epsilon()
        if self.max_local_epsilon is not None and not epsilon <= self.max_local_epsilon:
            shown = "unbounded" if math.isinf(epsilon) else f"{epsilon:.4g}"
            raise PolicyRefusal(
                f"--max-local-epsilon {self.max_local_epsilon:g}",
                f"one report of {mechanism.name} {mechanism.params()} leaks epsilon {shown}",
            )
        self.check_collector(collector_config)

    def check_collector(self, collector_config: bytes) -> None:
        if self.collector_configs and collector_config not in self.collector_configs:
            raise PolicyRefusal(
                "--collector-config",
                f"the collector key {collector_config.hex()} is not one this helper seals to",
            )

    def noise_sigma(self, query_sigma: Fraction | None) -> Fraction | None:
        """The sigma the helper adds: the query's, never below its floor."""
        floor = self.min_noise_sigma or None
        if query_sigma is None or (floor is not None and query_sigma < floor):
            return floor
        return query_sigma

    def check_release(self, aggregated: int, min_reports: int) -> None:
        """At release: the helper's own count against its floor and the query's minimum."""
        needed = max(self.min_batch, min_reports)
        if aggregated < needed:
            raise PolicyRefusal(
                f"--min-batch {self.min_batch}, min_reports {min_reports}",
                f"the helper aggregated {aggregated} reports, fewer than the {needed} it "
                "needs before it releases its share",
            )

    def summary(self) -> str:
        """One line for the helper's start-up output (what an operator audits)."""
        noise = f"{self.min_noise_sigma}" if self.min_noise_sigma else "the query's"
        keys = (
            ", ".join(c.hex() for c in self.collector_configs)
            if self.collector_configs
            else "each query's own (recorded)"
        )
        epsilon = ""
        if self.max_local_epsilon is not None:
            epsilon = f", local epsilon <= {self.max_local_epsilon:g}"
        return (
            f"min batch {self.min_batch}, noise sigma >= {noise}, mechanisms "
            f"{'/'.join(self.mechanisms)}, targets <= {self.max_targets}{epsilon}, "
            f"collector keys: {keys}"
        )
