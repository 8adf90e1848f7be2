"""Mechanisms that give no privacy at all, refused unless the operator says so explicitly.

RR with flip1 = 1 (always truthful) or flip2 in {0, 1} (a Yes or a No report is then certain
evidence), and SP with sampling_rate = 1 (every device at a target is selected, so its two
rounds name its location), have an infinite local epsilon: whoever sees a report can learn the
answer with certainty. Such a query is a plain census, which may be what a test wants, but it
must never be created by a typo.
"""

from __future__ import annotations

import math

from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms.registry import Mechanism


def gives_no_privacy(mechanism: Mechanism) -> bool:
    return math.isinf(mechanism.local_epsilon())


def refuse_no_privacy(mechanism: Mechanism) -> None:
    """ParameterError when `mechanism` gives no privacy (see the module docstring)."""
    if not gives_no_privacy(mechanism):
        return
    params = ", ".join(f"{k}={v}" for k, v in mechanism.params().items())
    raise ParameterError(
        "mechanism",
        f"{mechanism.name} with {params}",
        "a mechanism with a finite local epsilon",
        "these parameters give no privacy at all (a report can reveal a device's answer with "
        "certainty); pass --allow-no-privacy (allow_no_privacy in CreateQuery) to create it "
        "anyway, and the ledger will say that no privacy was promised",
    )
