"""Privacy events and their composition, in the spirit of dp-accounting's `DpEvent`s.

Four kinds of event describe what one mechanism (or release) guarantees:

- `PureDp(epsilon)`: epsilon-DP. Its Renyi curve is that of binary randomized response with
  ratio e^epsilon, which every epsilon-DP pair is a post-processing of (so this is the sharp
  curve); we take the pointwise minimum with the two textbook bounds epsilon and
  alpha * epsilon tanh(epsilon/2) (the sharp zCDP rho of pure DP), all valid.
- `Zcdp(rho)`: rho-zCDP, Renyi curve alpha * rho.
- `RenyiCurve(orders, epsilons)`: RDP epsilon at each order. Between orders the curve is read
  upwards (D_alpha is nondecreasing in alpha, so the value at the next order above is a valid
  bound); above the largest order nothing is known (infinity).
- `ApproxDp(epsilon, delta)`: (epsilon, delta)-DP, which has no Renyi curve.

A `Composition` adds the Renyi curves of everything that has one (on `DEFAULT_ORDERS` plus
every order a `RenyiCurve` brings), the zCDP rhos (when every curve-bearing part is pure or
zCDP), the pure epsilons, and the approximate pairs. Its (epsilon, delta) figures are reported
side by side; approximate parts are always added on top by basic composition: their epsilons
add to the figure and their deltas are taken out of the delta budget first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

from ldpcollect.accounting.conversions import (
    bun_steinke_epsilon,
    cks_delta,
    cks_epsilon,
    cks_term,
    pure_to_rho,
)
from ldpcollect.accounting.release_cost import ORDERS
from ldpcollect.errors import ParameterError

# dp-accounting's default grid (RdpAccountant), so ours is never coarser than the oracle's.
_DP_ACCOUNTING_ORDERS = (
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024]
)
DEFAULT_ORDERS: tuple[float, ...] = tuple(
    sorted({*ORDERS, *(float(a) for a in _DP_ACCOUNTING_ORDERS)})
)


def _nonnegative(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterError(name, value, "[0, inf)", "a real number")
    if not (value >= 0 and math.isfinite(value)):
        raise ParameterError(name, value, "[0, inf)")
    return float(value)


@dataclass(frozen=True)
class PureDp:
    """epsilon-DP (delta = 0)."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _nonnegative("epsilon", self.epsilon))

    def renyi(self, orders: np.ndarray) -> np.ndarray:
        """RDP at each order: D_alpha of binary RR with ratio e^eps, capped by eps and alpha rho.

        D_alpha = eps + log1p(q expm1(-2 (alpha-1) eps)) / (alpha-1), q = 1 / (1 + e^eps),
        written so that it stays accurate as alpha -> 1 (where it tends to eps tanh(eps/2)).
        """
        eps = self.epsilon
        if eps == 0:
            return np.zeros_like(orders)
        t = orders - 1.0
        q = float(expit(-eps))
        exact = eps + np.log1p(q * np.expm1(-2.0 * t * eps)) / t
        return np.minimum(np.minimum(np.maximum(exact, 0.0), eps), orders * pure_to_rho(eps))


@dataclass(frozen=True)
class Zcdp:
    """rho-zCDP: Renyi divergence at most alpha * rho at every order alpha > 1."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _nonnegative("rho", self.rho))

    def renyi(self, orders: np.ndarray) -> np.ndarray:
        return orders * self.rho


@dataclass(frozen=True)
class RenyiCurve:
    """(alpha, epsilons[i])-RDP at each alpha = orders[i]; orders distinct, each in (1, inf)."""

    orders: tuple[float, ...]
    epsilons: tuple[float, ...]
    _sorted: np.ndarray = field(init=False, repr=False, compare=False)
    _suffix_min: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        orders, epsilons = tuple(self.orders), tuple(self.epsilons)
        if not orders:
            raise ParameterError("orders", orders, "a non-empty tuple of orders in (1, inf)")
        if len(epsilons) != len(orders):
            raise ParameterError(
                "epsilons",
                epsilons,
                f"a tuple of {len(orders)} values in [0, inf]",
                "one per order",
            )
        for alpha in orders:
            if isinstance(alpha, bool) or not isinstance(alpha, int | float):
                raise ParameterError("orders", alpha, "(1, inf)", "a real number")
            if not (alpha > 1 and math.isfinite(alpha)):
                raise ParameterError("orders", alpha, "(1, inf)")
        if len(set(orders)) != len(orders):
            raise ParameterError("orders", orders, "distinct orders in (1, inf)")
        for value in epsilons:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParameterError("epsilons", value, "[0, inf]", "a real number")
            if not value >= 0:  # infinity allowed: no bound at that order
                raise ParameterError("epsilons", value, "[0, inf]")
        order = np.argsort(np.array(orders, dtype=float))
        sorted_orders = np.array(orders, dtype=float)[order]
        values = np.array(epsilons, dtype=float)[order]
        object.__setattr__(self, "orders", tuple(float(a) for a in orders))
        object.__setattr__(self, "epsilons", tuple(float(e) for e in epsilons))
        object.__setattr__(self, "_sorted", sorted_orders)
        object.__setattr__(self, "_suffix_min", np.minimum.accumulate(values[::-1])[::-1])

    def renyi(self, orders: np.ndarray) -> np.ndarray:
        """The smallest given value at any order >= alpha (D is nondecreasing), else inf."""
        index = np.searchsorted(self._sorted, orders, side="left")
        padded = np.append(self._suffix_min, math.inf)
        result: np.ndarray = padded[index]
        return result


@dataclass(frozen=True)
class ApproxDp:
    """(epsilon, delta)-DP; no Renyi curve, so it composes only by basic composition."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _nonnegative("epsilon", self.epsilon))
        delta = self.delta
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 <= delta <= 1:
            raise ParameterError("delta", delta, "[0, 1]")
        object.__setattr__(self, "delta", float(delta))


DpEvent = PureDp | Zcdp | RenyiCurve | ApproxDp


@dataclass(frozen=True)
class EpsilonReport:
    """Every (epsilon, delta) figure of a composition at one delta; `epsilon` is the least.

    A figure is None where the method does not apply (no zCDP rho when a `RenyiCurve` is
    composed) and math.inf where it gives no finite bound. Every figure includes the approximate
    parts' `approx_epsilon`, and its conversion works at delta - `approx_delta`.
    """

    delta: float
    epsilon: float
    renyi: float
    renyi_order: float
    zcdp_cks: float | None
    zcdp_bun_steinke: float | None
    basic: float
    approx_epsilon: float
    approx_delta: float


@dataclass(frozen=True)
class DeltaReport:
    """Every delta figure of a composition at one epsilon (capped at 1); `delta` is the least."""

    epsilon: float
    delta: float
    renyi: float
    zcdp_cks: float | None
    zcdp_bun_steinke: float | None
    basic: float
    approx_epsilon: float
    approx_delta: float


def _curve_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """CKS (Prop. 12) over the grid, with dp-accounting's KL shortcut; (epsilon, order)."""
    best, best_order = math.inf, math.nan
    for alpha, r in zip(orders.tolist(), rdp.tolist(), strict=True):
        if math.isinf(r):
            continue
        if delta * delta + math.expm1(-r) > 0:  # TV <= sqrt(1 - e^-KL) <= delta, KL <= D_alpha
            return 0.0, alpha
        eps = r + cks_term(alpha, delta)
        if eps < best:
            best, best_order = eps, alpha
    return max(0.0, best), best_order


def _curve_delta(orders: np.ndarray, rdp: np.ndarray, epsilon: float) -> float:
    """CKS (Prop. 12) delta over the grid, or the KL bound sqrt(1 - e^-D_alpha); capped at 1."""
    best = 0.0  # log of the least delta so far (log 1)
    for alpha, r in zip(orders.tolist(), rdp.tolist(), strict=True):
        if math.isinf(r):
            continue
        if r == 0:
            return 0.0
        log_delta = min(
            0.5 * math.log(-math.expm1(-r)),
            (alpha - 1) * (r - epsilon + math.log1p(-1 / alpha)) - math.log(alpha),
        )
        best = min(best, log_delta)
    return math.exp(best)


def _bun_steinke_delta(rho: float, epsilon: float) -> float:
    """Inverse of eps = rho + 2 sqrt(rho ln(1/delta)): delta = exp(-(eps - rho)^2 / (4 rho))."""
    if rho == 0:
        return 0.0
    if epsilon <= rho:
        return 1.0
    return math.exp(-((epsilon - rho) ** 2) / (4 * rho))


@dataclass(frozen=True)
class Composition:
    """An immutable record of composed events (each with a repetition count)."""

    parts: tuple[tuple[DpEvent, int], ...] = ()
    base_orders: tuple[float, ...] = DEFAULT_ORDERS

    def compose(self, event: DpEvent, count: int = 1) -> Composition:
        """This composition followed by `count` runs of `event`."""
        if not isinstance(event, PureDp | Zcdp | RenyiCurve | ApproxDp):
            raise ParameterError("event", event, "PureDp, Zcdp, RenyiCurve or ApproxDp")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ParameterError("count", count, "[0, inf) (an integer)")
        return Composition((*self.parts, (event, count)), self.base_orders)

    # -- what the parts add up to -------------------------------------------------------------

    @property
    def orders(self) -> np.ndarray:
        extra = [a for e, _ in self.parts if isinstance(e, RenyiCurve) for a in e.orders]
        return np.unique(np.array([*self.base_orders, *extra], dtype=float))

    def rdp(self, include_pure: bool = True) -> np.ndarray:
        """Summed Renyi curve at `orders` of every part that has one (zero if none)."""
        orders = self.orders
        total = np.zeros_like(orders)
        for event, count in self.parts:
            if count == 0 or isinstance(event, ApproxDp):
                continue
            if isinstance(event, PureDp) and not include_pure:
                continue
            total = total + count * event.renyi(orders)
        return total

    def _rho(self, include_pure: bool = True) -> float | None:
        terms: list[float] = []
        for event, count in self.parts:
            if count == 0 or isinstance(event, ApproxDp):
                continue
            if isinstance(event, RenyiCurve):
                return None
            if isinstance(event, Zcdp):
                terms.append(count * event.rho)
            elif include_pure:
                terms.append(count * pure_to_rho(event.epsilon))
        return math.fsum(terms)

    @property
    def rho(self) -> float | None:
        """Total zCDP rho (pure parts at eps tanh(eps/2)); None when a RenyiCurve is composed."""
        return self._rho()

    @property
    def pure_epsilon(self) -> float:
        """Sum of the PureDp epsilons (basic composition)."""
        return math.fsum(c * e.epsilon for e, c in self.parts if isinstance(e, PureDp))

    @property
    def approx(self) -> tuple[float, float]:
        """(sum of epsilons, sum of deltas) of the ApproxDp parts."""
        pairs = [(c * e.epsilon, c * e.delta) for e, c in self.parts if isinstance(e, ApproxDp)]
        return math.fsum(p[0] for p in pairs), math.fsum(p[1] for p in pairs)

    def _has_rest(self) -> bool:
        """Any zCDP or Renyi-curve part (something that needs delta > 0 to convert)."""
        return any(isinstance(e, Zcdp | RenyiCurve) and c > 0 for e, c in self.parts)

    # -- conversions ---------------------------------------------------------------------------

    def epsilon_report(self, delta: float) -> EpsilonReport:
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
            raise ParameterError("delta", delta, "(0, 1)")
        eps_a, delta_a = self.approx
        left = delta - delta_a
        orders = self.orders
        rho = self.rho
        if left <= 0:
            # No delta left for conversions: only pure parts (basic composition) can be afforded.
            affordable = left == 0 and not self._has_rest()
            basic = eps_a + self.pure_epsilon if affordable else math.inf
            return EpsilonReport(
                delta=delta,
                epsilon=basic,
                renyi=math.inf,
                renyi_order=math.nan,
                zcdp_cks=None if rho is None else math.inf,
                zcdp_bun_steinke=None if rho is None else math.inf,
                basic=basic,
                approx_epsilon=eps_a,
                approx_delta=delta_a,
            )
        renyi, order = _curve_epsilon(orders, self.rdp(), left)
        cks = None if rho is None else eps_a + cks_epsilon(rho, left)
        bun = None if rho is None else eps_a + bun_steinke_epsilon(rho, left)
        basic = eps_a + self.pure_epsilon + self._rest_epsilon(left)
        figures = [eps_a + renyi, basic, *(x for x in (cks, bun) if x is not None)]
        return EpsilonReport(
            delta=delta,
            epsilon=min(figures),
            renyi=eps_a + renyi,
            renyi_order=order,
            zcdp_cks=cks,
            zcdp_bun_steinke=bun,
            basic=basic,
            approx_epsilon=eps_a,
            approx_delta=delta_a,
        )

    def _rest_epsilon(self, delta: float) -> float:
        """Least epsilon at `delta` of the zCDP and Renyi-curve parts alone (0 if none)."""
        if not self._has_rest():
            return 0.0
        best, _ = _curve_epsilon(self.orders, self.rdp(include_pure=False), delta)
        rho = self._rho(include_pure=False)
        return best if rho is None else min(best, cks_epsilon(rho, delta))

    def _rest_delta(self, epsilon: float) -> float:
        if not self._has_rest():
            return 0.0
        best = _curve_delta(self.orders, self.rdp(include_pure=False), epsilon)
        rho = self._rho(include_pure=False)
        return best if rho is None else min(best, cks_delta(rho, epsilon))

    def epsilon(self, delta: float) -> float:
        """The tightest valid epsilon at `delta` (inf when none is finite)."""
        return self.epsilon_report(delta).epsilon

    def delta_report(self, epsilon: float) -> DeltaReport:
        if isinstance(epsilon, bool) or not isinstance(epsilon, int | float):
            raise ParameterError("epsilon", epsilon, "[0, inf)", "a real number")
        if not (epsilon >= 0 and math.isfinite(epsilon)):
            raise ParameterError("epsilon", epsilon, "[0, inf)")
        eps_a, delta_a = self.approx
        left = epsilon - eps_a
        rho = self.rho
        if left < 0:
            value = 1.0
            return DeltaReport(epsilon, value, value, None, None, value, eps_a, delta_a)
        renyi = min(1.0, delta_a + _curve_delta(self.orders, self.rdp(), left))
        cks = None if rho is None else min(1.0, delta_a + cks_delta(rho, left))
        bun = None if rho is None else min(1.0, delta_a + _bun_steinke_delta(rho, left))
        after_pure = left - self.pure_epsilon
        basic = 1.0 if after_pure < 0 else min(1.0, delta_a + self._rest_delta(after_pure))
        figures = [renyi, basic, *(x for x in (cks, bun) if x is not None)]
        return DeltaReport(epsilon, min(figures), renyi, cks, bun, basic, eps_a, delta_a)

    def delta(self, epsilon: float) -> float:
        """The tightest valid delta at `epsilon` (1 when no bound below 1 is known)."""
        return self.delta_report(epsilon).delta


def compose(*events: DpEvent, orders: Iterable[float] = DEFAULT_ORDERS) -> Composition:
    """The composition of `events`, each run once (use `Composition.compose` for counts)."""
    grid = tuple(float(a) for a in orders)
    if not grid or not all(a > 1 and math.isfinite(a) for a in grid):
        raise ParameterError("orders", grid, "a non-empty collection of orders in (1, inf)")
    result = Composition((), grid)
    for event in events:
        result = result.compose(event)
    return result
