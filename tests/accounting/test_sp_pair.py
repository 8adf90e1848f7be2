"""The exact single-device pair of noisy Sampling Privacy releases: the issue's independent
values, dp-accounting's PLD as the oracle, exact enumeration of small populations, and a
verifier that rejects a lowered claim."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as oracle

from ldpcollect.accounting import sp_pair
from ldpcollect.accounting.pld import on_off_mixes, worst_epsilon
from ldpcollect.accounting.release_cost import FILTER_ORDERS, release_claims, sp_noised_epsilon
from ldpcollect.accounting.sp_pair import (
    pld_renyi_bound,
    sp_release_pairs,
    sp_release_renyi,
    sp_target_pair,
)
from ldpcollect.mechanisms import SamplingPrivacy
from tests.accounting.test_enumeration import TOL, sp_dists, worst_true_delta

HALF = Fraction(1, 2)


def oracle_pmfs(s: float, sigma: float) -> tuple[dict[Any, float], dict[Any, float]]:
    """log pmfs of one target's noisy (Y1, Y2): device there (A) and elsewhere (U), written
    out here from the mechanism's definition (not through the code under test)."""
    radius = math.ceil(12 * sigma)
    xs = np.arange(-radius - 2, radius + 3)
    w = np.exp(-(xs**2) / (2 * sigma * sigma))
    g = dict(zip(xs.tolist(), (w / w.sum()).tolist(), strict=True))
    a, u = {}, {}
    for x in range(-radius, radius + 2):
        for y in range(-radius, radius + 2):
            same = 0.5 * (g[x] * g[y] + g[x - 1] * g[y - 1])
            a[(x, y)] = math.log(s * g[x] * g[y - 1] + (1 - s) * same)
            u[(x, y)] = math.log(same)
    return a, u


def oracle_epsilon(
    sigma: float, targets: int, queries: int, pessimistic: bool, delta: float = 1e-6
) -> float:
    a, u = oracle_pmfs(0.5, sigma)
    on = oracle.from_two_probability_mass_functions(
        u, a, pessimistic_estimate=pessimistic, symmetric=False
    )
    if targets >= 2:
        off = oracle.from_two_probability_mass_functions(
            a, u, pessimistic_estimate=pessimistic, symmetric=False
        )
        on = on.compose(off)
    composed = on if queries == 1 else on.self_compose(queries)
    return float(composed.get_epsilon_for_delta(delta))


@pytest.mark.parametrize(
    ("sigma", "targets", "queries", "issue"),
    [(2, 2, 1, 1.195), (5, 2, 1, 0.406), (5, 1, 1, 0.315), (5, 2, 10, 1.379)],
)
def test_issue_values_and_the_dp_accounting_oracle(
    sigma: int, targets: int, queries: int, issue: float
) -> None:
    ours = sp_noised_epsilon(HALF, Fraction(sigma), targets, 1e-6, queries)
    assert ours == pytest.approx(issue, abs=6e-4)  # the issue's values, to 3 decimals
    lower = oracle_epsilon(sigma, targets, queries, pessimistic=False)
    upper = oracle_epsilon(sigma, targets, queries, pessimistic=True)
    assert lower <= ours  # never below the oracle's optimistic (lower) estimate
    # The same pessimistic discretization; ours also carries the trimmed tails and a bound on
    # the FFT's rounding error as mass at +inf, so it may sit slightly above, never below.
    assert upper - 1e-9 <= ours <= upper + 1e-4


def test_release_uses_the_exact_pair_and_names_the_other_figure() -> None:
    public = release_claims(SamplingPrivacy("1/2"), 2, Fraction(5), 1e-6)[0]
    assert public.view == "public" and public.headline == "sp_exact_pair"
    assert public.epsilon == public.figures["sp_exact_pair"] == pytest.approx(0.4063, abs=1e-4)
    assert public.figures["gaussian_sensitivity"] == pytest.approx(1.213, abs=1e-3)  # before
    assert public.rho == 1 / 25  # the zCDP figure the filter charges is unchanged


@pytest.mark.parametrize(("n", "targets"), [(1, 1), (3, 1), (1, 2), (2, 2)])
def test_claims_hold_under_exact_enumeration(n: int, targets: int) -> None:
    """Every neighbouring pair of a small population: the true delta at the claimed epsilon."""
    dists, pairs, tail = sp_dists(n, targets, 0.5, 1.0)
    public = release_claims(SamplingPrivacy("1/2"), targets, Fraction(1), 1e-4)[0]
    assert public.headline == "sp_exact_pair"
    assert worst_true_delta(dists, pairs, public.epsilon, tail) <= public.delta + TOL
    if n == 1:  # one device alone is the worst case, and the claim is tight for it
        assert worst_true_delta(dists, pairs, public.epsilon * 0.99, tail) > public.delta


def test_verifier_catches_a_lowered_sp_claim() -> None:
    """Two targets charged as one (a move changing one count, sensitivity understated): the
    enumeration finds a true delta above the claim."""
    dists, pairs, tail = sp_dists(1, 2, 0.5, 1.0)
    honest = sp_noised_epsilon(HALF, Fraction(1), 2, 1e-4)
    lowered = sp_noised_epsilon(HALF, Fraction(1), 1, 1e-4)
    assert lowered < honest
    assert worst_true_delta(dists, pairs, honest, tail) <= 1e-4 + TOL
    assert worst_true_delta(dists, pairs, lowered, tail) > 1e-4


def test_one_target_composes_the_envelope_within_one_percent_of_every_mix() -> None:
    """One target: the device moves onto the target in some queries and off it in others.
    The envelope of the pair and its reverse, composed, bounds every mix (all composed here
    exactly) and is within 1% of the worst; it needs no limit on the number of queries (the
    two-target pair used beyond 20 queries was 1.42x at 30)."""
    one = sp_target_pair(HALF, Fraction(25))
    assert one is not None
    mixes = worst_epsilon(on_off_mixes(one, 8), 1e-6)
    ours = sp_noised_epsilon(HALF, Fraction(5), 1, 1e-6, 8)
    assert mixes <= ours <= 1.01 * mixes
    thirty = sp_noised_epsilon(HALF, Fraction(5), 1, 1e-6, 30)
    assert thirty * 1.3 < sp_noised_epsilon(HALF, Fraction(5), 2, 1e-6, 30)


@pytest.mark.parametrize(("sigma", "targets"), [(5, 2), (2, 2), (5, 1)])
def test_small_delta_uses_the_exact_pair_against_the_oracle(sigma: int, targets: int) -> None:
    """At delta 10^-12 the FFT's error bound used to swamp delta and the figure fell back to
    the noise's 2.5-3x; the convolution is now exact there, and matches dp-accounting."""
    delta = 1e-12
    ours = sp_noised_epsilon(HALF, Fraction(sigma), targets, delta)
    bounds = [
        oracle_epsilon(sigma, targets, 1, pessimistic, delta) for pessimistic in (False, True)
    ]
    assert bounds[0] <= ours <= bounds[1] + 1e-3
    public = release_claims(SamplingPrivacy("1/2"), targets, Fraction(sigma), delta)[0]
    assert public.headline == "sp_exact_pair" and public.epsilon == ours


def test_tiny_noise_is_bounded_by_the_pair_not_twice_the_noise() -> None:
    """sigma 0.1, two targets: the selection shows (loss about 1/(2 sigma^2) + ln 2, the
    device's other target repeating its bit) with probability 1/2: about 50, where the
    noise's sensitivity gives 100. The grid keeps radius 3 so the truncated U is never 0
    where A is not."""
    public = release_claims(SamplingPrivacy("1/2"), 2, Fraction(1, 10), 1e-6)[0]
    assert public.headline == "sp_exact_pair"
    assert 49.9 < public.epsilon < 50.1 < 99 < public.figures["gaussian_sensitivity"]


def test_wide_noise_is_built_in_blocks_and_equals_the_whole_grid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole = sp_target_pair(HALF, Fraction(400))
    assert whole is not None
    monkeypatch.setattr(sp_pair, "MAX_GRID", 1000)
    blocks = sp_pair._chunked_target_pair(HALF, Fraction(400), whole.forward.interval)
    assert blocks is not None
    for a, b in ((whole.forward, blocks.forward), (whole.backward, blocks.backward)):
        assert (a.offset, a.probs.size) == (b.offset, b.probs.size)
        assert np.allclose(a.probs, b.probs, rtol=1e-12, atol=1e-300)
    # sigma 150: the exact pair, a third of the noise's figure (was that figure).
    public = release_claims(SamplingPrivacy("1/2"), 1, Fraction(150), 1e-6)[0]
    assert public.headline == "sp_exact_pair"
    assert 3 * public.epsilon < public.figures["gaussian_sensitivity"]


def test_larger_sigma_still_falls_back_to_the_gaussian_bound() -> None:
    assert sp_release_pairs(HALF, Fraction(400), 2) is None
    public = release_claims(SamplingPrivacy("1/2"), 2, Fraction(400), 1e-6)[0]
    assert public.headline == "gaussian_sensitivity" and math.isfinite(public.epsilon)
    assert public.to_json()["figures"]["sp_exact_pair"] is None


def oracle_renyi(a: dict[Any, float], u: dict[Any, float], alpha: float) -> float:
    """D_alpha(A || U) summed directly over the oracle's wide grid (log pmfs)."""
    terms = [alpha * a[x] + (1 - alpha) * u[x] for x in a]
    top = max(terms)
    return (top + math.log(math.fsum(math.exp(t - top) for t in terms))) / (alpha - 1)


@pytest.mark.parametrize(("sigma", "targets"), [(2, 1), (2, 2), (5, 2)])
def test_renyi_divergences_bound_the_direct_sum(sigma: int, targets: int) -> None:
    """The divergences the filter and the odometer charge, against the same sum written out
    over a wider grid: never below it, equal where the off-grid term is negligible, and never
    above the noise's own alpha * rho."""
    a, u = oracle_pmfs(0.5, sigma)
    ours = sp_release_renyi(HALF, Fraction(sigma), targets, FILTER_ORDERS)
    assert ours is not None
    rho = 1 / (2 * sigma * sigma)
    for alpha, value in zip(FILTER_ORDERS, ours, strict=True):
        forward, backward = oracle_renyi(a, u, alpha), oracle_renyi(u, a, alpha)
        truth = forward + backward if targets >= 2 else max(forward, backward)
        assert value >= truth * (1 - 1e-9) - 1e-12
        noise = alpha * rho * (2 if targets >= 2 else 1)
        assert value <= noise * (1 + 1e-12)
        if alpha <= 8:  # the off-grid term is negligible here: the sum is the divergence
            assert value == pytest.approx(truth, rel=1e-6)
    public = release_claims(SamplingPrivacy("1/2"), targets, Fraction(sigma), 1e-6)[0]
    assert public.renyi == {f"{a:g}": d for a, d in zip(FILTER_ORDERS, ours, strict=True)}


def test_renyi_divergences_catch_a_lowered_claim() -> None:
    """Charging a two-target release the one-target divergences would understate it: the direct
    sum exceeds them at every order."""
    a, u = oracle_pmfs(0.5, 2)
    lowered = sp_release_renyi(HALF, Fraction(2), 1, FILTER_ORDERS)
    assert lowered is not None
    for alpha, value in zip(FILTER_ORDERS[:6], lowered[:6], strict=True):
        assert oracle_renyi(a, u, alpha) + oracle_renyi(u, a, alpha) > value


def test_wide_noise_divergences_from_the_pld_bound_the_grid_ones() -> None:
    """Past the wide grid (sigma above about 50) the divergences come from the pair's PLD:
    at sigma 5, where both exist, the PLD route is never below the grid route, and close."""
    pair = sp_target_pair(HALF, Fraction(25))
    grid = sp_release_renyi(HALF, Fraction(5), 1, FILTER_ORDERS)
    assert pair is not None and grid is not None
    rho = 1 / 50
    forward = pld_renyi_bound(pair.forward, FILTER_ORDERS, rho)
    backward = pld_renyi_bound(pair.backward, FILTER_ORDERS, rho)
    for alpha, f, b, g in zip(FILTER_ORDERS, forward, backward, grid, strict=True):
        assert max(f, b) >= g * (1 - 1e-9)
        if alpha <= 8:
            assert max(f, b) <= g + 2e-4 * alpha
    wide = sp_release_renyi(HALF, Fraction(100), 2, FILTER_ORDERS)
    assert wide is not None and wide[-1] < 64 / 100**2 / 4  # far below the noise's alpha rho


def enumerated_renyi(p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    """D_alpha over the enumerated outputs where both are above 1e-15 (there the truncated
    noise changes nothing that matters: it drops mass below e^-50); leaving out the rest only
    lowers the sum, so this is at most the true divergence."""
    mask = (p > 1e-15) & (q > 1e-15)
    terms = alpha * np.log(p[mask]) + (1 - alpha) * np.log(q[mask])
    top = float(terms.max())
    return (top + math.log(float(np.exp(terms - top).sum()))) / (alpha - 1)


@pytest.mark.parametrize(("n", "s"), [(1, "1"), (2, "1"), (2, "1/2")])
def test_renyi_claims_hold_and_a_halved_rho_is_caught(n: int, s: str) -> None:
    """Every neighbouring pair of a small population, two targets, sigma 1: the divergences
    the filter charges (rho = 1 / sigma^2 and the exact pair's curve) are never below the
    enumerated ones. With s = 1 (every device at a target selected) charging the noise at
    sensitivity 1 (rho halved) is caught; at s = 1/2 the selection coin hides so much that
    even half the rho still holds (the exact curve is far below it)."""
    dists, pairs, _ = sp_dists(n, 2, float(Fraction(s)), 1.0)
    public = release_claims(SamplingPrivacy(s), 2, Fraction(1), 1e-4)[0]
    assert public.rho == 1.0
    caught = False
    for alpha in (1.5, 2.0, 4.0):
        worst = max(
            max(
                enumerated_renyi(dists[a], dists[b], alpha),
                enumerated_renyi(dists[b], dists[a], alpha),
            )
            for a, b in pairs
        )
        assert worst <= alpha * public.rho * (1 + 1e-9)
        assert worst <= public.renyi[f"{alpha:g}"] * (1 + 1e-9) + 1e-12
        caught = caught or worst > alpha * public.rho / 2
    assert caught is (s == "1")
