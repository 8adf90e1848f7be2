"""Privacy accounting: events and composition, conversions, release costs, the ledger and
device budgets."""

from ldpcollect.accounting.conversions import rho_for_target, sigma_for_target
from ldpcollect.accounting.events import (
    DEFAULT_ORDERS,
    ApproxDp,
    Composition,
    DeltaReport,
    DpEvent,
    EpsilonReport,
    PureDp,
    RenyiCurve,
    Zcdp,
    compose,
)

__all__ = [
    "DEFAULT_ORDERS",
    "ApproxDp",
    "Composition",
    "DeltaReport",
    "DpEvent",
    "EpsilonReport",
    "PureDp",
    "RenyiCurve",
    "Zcdp",
    "compose",
    "rho_for_target",
    "sigma_for_target",
]
