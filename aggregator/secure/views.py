"""Both roles: a secure release's privacy, per view, in words and numbers (the leader's
ledger charges the public view; the helper's own ledger charges the same at its own noise).

- "aggregator": one aggregator alone. Before the release it sees uniformly random input
  shares, the public share and which reports were valid: nothing about any device's answers
  (as long as the two do not collude). Once the release is public it can subtract its own
  aggregate share and noise from the published counts, so it sees the counts through the
  OTHER aggregator's noise only: the same bound as the collector colluding with one
  aggregator. A release is public, so this is the claim stated.
- "collector+aggregator": the collector with one aggregator can subtract that aggregator's
  share (and noise) and sees the counts plus the OTHER aggregator's discrete Gaussian noise:
  the release's bound at one aggregator's sigma (`release_claims`).
- "public": the released estimates carry both aggregators' noise. We state the same bound
  as above (a second, independent noise can only help, by post-processing), so it is an upper
  bound, not tight. The secure ledger charges this view.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from aggregator.errors import FailedPrecondition
from ldpcollect.accounting.release_cost import PrivacyClaim, release_claims
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism

# One aggregator before anything is released (docs/secure-mode.md's table; not a release's
# claim, since a release makes the counts public).
BEFORE_RELEASE = PrivacyClaim(
    view="aggregator",
    guarantee="pure",
    epsilon=0.0,
    delta=0.0,
    epsilon_bun_steinke=0.0,
    rho=0.0,
    pure_epsilon=0.0,
    explanation=(
        "One aggregator alone sees only uniformly random secret shares of each device's "
        "answers, the report ids and which reports were valid: nothing about any answer, "
        "provided the leader and helper operators do not collude (together they see every "
        "answer)."
    ),
    headline="secret_sharing",
)


def secure_claims(
    mechanism: Mechanism, targets: int, noise: Fraction | None, delta: float, min_reports: int
) -> list[PrivacyClaim]:
    """The three views of one secure release, at `delta` (`noise`: one aggregator's sigma)."""
    try:
        claims = release_claims(mechanism, targets, noise, delta, participants=min_reports)
    except ParameterError as error:
        raise FailedPrecondition(f"cannot account for this release: {error}") from error
    public = next(c for c in claims if c.view == "public")
    one_noise = "one aggregator's" if noise else "no (the query has no noise sigma)"
    one_aggregator = replace(
        public,
        view="aggregator",
        explanation=(
            "Before the release one aggregator alone sees only uniformly random secret shares "
            "(nothing about any answer). Once the estimates are public it can subtract its own "
            "share and noise from them and sees the round counts through the other "
            f"aggregator's noise only, {one_noise} discrete Gaussian: this bound, the same as "
            "the collector colluding with one aggregator. " + public.explanation
        ),
    )
    colluding = replace(
        public,
        view="collector+aggregator",
        explanation=(
            "The collector colluding with one aggregator sees the round counts plus the other "
            f"aggregator's noise, {one_noise} discrete Gaussian: this bound. " + public.explanation
        ),
    )
    stated = replace(
        public,
        explanation=(
            "The released estimates carry both aggregators' noise; stated here at one "
            "aggregator's noise (an upper bound: the second noise only helps). "
            + public.explanation
        ),
    )
    return [one_aggregator, colluding, stated]
