"""Brute-force privacy verifier: exact output distributions of released aggregates for small
populations, under every pair of neighbouring datasets (one device changes location), with the
true delta at each claimed epsilon (hockey-stick divergence). A claim must never be below it.

Probabilities are computed here from p, q, s directly (not through the code under test).
Discrete Gaussian noise is truncated at +-K; the truncated mass is added to the true delta, so
the check stays sound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest
from scipy.signal import convolve
from scipy.stats import binom

from ldpcollect.accounting.release_cost import PrivacyClaim, release_claims
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy

TOL = 1e-13
Pair = tuple[tuple[int, ...], tuple[int, ...]]  # floating-point summation slack on exact deltas


def dg_pmf(sigma: float) -> tuple[np.ndarray, float]:
    """Discrete Gaussian pmf on -K..K and the mass outside it (an upper bound)."""
    k = math.ceil(math.sqrt(2 * sigma * sigma * 50)) + 1  # exp(-50) ~ 2e-22 beyond
    xs = np.arange(-4 * k, 4 * k + 1)
    w = np.exp(-(xs**2) / (2 * sigma * sigma))
    w /= w.sum()
    inside = np.abs(xs) <= k
    return w[inside], float(w[~inside].sum())


def rr_count(n_t: int, n: int, a1: float, a0: float) -> np.ndarray:
    return np.convolve(
        binom.pmf(np.arange(n_t + 1), n_t, a1), binom.pmf(np.arange(n - n_t + 1), n - n_t, a0)
    )


def sp_pair(n_t: int, n: int, s: float) -> np.ndarray:
    """Joint pmf of (Y1, Y2) for one target with n_t devices there, n in all."""
    out = np.zeros((n + 1, n + 1))
    for sel in range(n_t + 1):
        y1 = np.arange(n - sel + 1)
        out[y1, y1 + sel] += binom.pmf(sel, n_t, s) * binom.pmf(y1, n - sel, 0.5)
    return out


def hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


def joint(parts: list[np.ndarray]) -> np.ndarray:
    out = parts[0]
    for part in parts[1:]:
        out = np.multiply.outer(out, part)
    return out


def neighbours(n: int, targets: int) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Datasets as devices per target (the rest elsewhere); one device moves."""
    for counts in itertools.product(range(n + 1), repeat=targets):
        if sum(counts) > n:
            continue
        others = n - sum(counts)
        places: list[int | str] = [*range(targets), "elsewhere"]
        for src, dst in itertools.permutations(places, 2):
            if src == "elsewhere" and others == 0:
                continue
            if src != "elsewhere" and counts[int(src)] == 0:
                continue
            moved = list(counts)
            if src != "elsewhere":
                moved[int(src)] -= 1
            if dst != "elsewhere":
                moved[int(dst)] += 1
            if dst == "elsewhere" or src == "elsewhere" or int(src) < int(dst):
                yield counts, tuple(moved)


def worst_true_delta(
    dists: dict[tuple[int, ...], np.ndarray], pairs: list[Pair], eps: float, tail: float
) -> float:
    return max(
        max(hockey(dists[a], dists[b], eps), hockey(dists[b], dists[a], eps)) + tail
        for a, b in pairs
    )


def assert_claim_holds(
    claim: PrivacyClaim, dists: dict[tuple[int, ...], np.ndarray], pairs: list[Pair], tail: float
) -> None:
    if claim.guarantee == "none":
        return
    if claim.reveal_probability is not None:
        # (0, s) holds, and no finite epsilon holds at the claim's delta: the worst pair keeps
        # more than that delta even at epsilon 50 (the selection shows exactly).
        assert claim.unbounded and math.isinf(claim.epsilon)
        assert worst_true_delta(dists, pairs, 0.0, tail) <= claim.reveal_probability + TOL
        assert worst_true_delta(dists, pairs, 50.0, 0.0) > claim.delta
        return
    true_delta = worst_true_delta(dists, pairs, claim.epsilon, tail)
    assert true_delta <= claim.delta + TOL, (claim.view, claim.epsilon, claim.delta, true_delta)
    if claim.pure_epsilon is not None:
        assert worst_true_delta(dists, pairs, claim.pure_epsilon, tail) <= TOL + tail
    if claim.rho is not None and tail == 0:  # untruncated: Renyi within alpha rho
        for alpha in (1.5, 2.0, 4.0):
            for a, b in pairs:
                p, q = dists[a], dists[b]
                mask = p > 0
                d = math.log(float(np.sum(p[mask] ** alpha * q[mask] ** (1 - alpha)))) / (alpha - 1)
                assert d <= alpha * claim.rho * (1 + 1e-9) + 1e-12


def rr_dists(n: int, targets: int, p: str, q: str, sigma: float | None):  # type: ignore[no-untyped-def]
    a1 = float(Fraction(p) + (1 - Fraction(p)) * Fraction(q))
    a0 = float((1 - Fraction(p)) * Fraction(q))
    noise, tail = dg_pmf(sigma) if sigma else (np.array([1.0]), 0.0)
    pairs = list(neighbours(n, targets))
    dists = {}
    for counts in {c for pair in pairs for c in pair}:
        dists[counts] = joint([np.convolve(rr_count(c, n, a1, a0), noise) for c in counts])
    return dists, pairs, tail * targets


@pytest.mark.parametrize(
    ("n", "targets", "sigma"), [(30, 1, None), (30, 1, 2.0), (16, 2, None), (12, 2, 1.5)]
)
def test_rr_claims_are_upper_bounds(n: int, targets: int, sigma: float | None) -> None:
    dists, pairs, tail = rr_dists(n, targets, "0.85", "0.3", sigma)
    noise = None if sigma is None else Fraction(sigma)
    for claim in release_claims(RandomizedResponse("0.85", "0.3"), targets, noise, 1e-6):
        assert_claim_holds(claim, dists, pairs, tail)
    # A mild mechanism, where the noise bound is the binding one.
    dists, pairs, tail = rr_dists(n, targets, "0.2", "0.5", sigma)
    for claim in release_claims(RandomizedResponse("0.2", "0.5"), targets, noise, 1e-3):
        assert_claim_holds(claim, dists, pairs, tail)


def sp_dists(n: int, targets: int, s: float, sigma: float | None):  # type: ignore[no-untyped-def]
    pairs = list(neighbours(n, targets))
    tail = 0.0
    noise2 = np.array([[1.0]])
    if sigma:
        noise1, tail1 = dg_pmf(sigma)
        noise2 = np.outer(noise1, noise1)
        tail = 2 * targets * tail1
    dists = {}
    for counts in {c for pair in pairs for c in pair}:
        parts = [convolve(sp_pair(c, n, s), noise2) for c in counts]
        dists[counts] = joint(parts)
    return dists, pairs, tail


@pytest.mark.parametrize(
    ("n", "targets", "sigma"), [(30, 1, None), (20, 1, 1.0), (6, 2, None), (4, 2, 0.8)]
)
@pytest.mark.parametrize("s", ["1/2", "1/10"])
def test_sp_claims_are_upper_bounds(n: int, targets: int, sigma: float | None, s: str) -> None:
    dists, pairs, tail = sp_dists(n, targets, float(Fraction(s)), sigma)
    noise = None if sigma is None else Fraction(sigma)
    for claim in release_claims(SamplingPrivacy(s), targets, noise, 1e-4):
        if claim.view == "public":
            assert_claim_holds(claim, dists, pairs, tail)
    if sigma is None:  # the (0, s) claim is tight: a lone device at a target shows with prob s
        assert worst_true_delta(dists, pairs, 30.0, 0.0) == pytest.approx(
            float(Fraction(s)), rel=1e-9
        )


def test_verifier_catches_an_understated_claim() -> None:
    """With flip1 = 1 the counts are exact, so the noise claim is tight: 10% less must fail."""
    for targets in (1, 2):
        dists, pairs, tail = rr_dists(6, targets, "1", "1/2", 1.5)
        public = release_claims(RandomizedResponse("1", "1/2"), targets, Fraction(1.5), 1e-4)[0]
        assert public.view == "public" and public.guarantee == "zcdp"
        assert worst_true_delta(dists, pairs, public.epsilon, tail) <= public.delta + TOL
        assert worst_true_delta(dists, pairs, public.epsilon * 0.9, tail) > public.delta
        assert worst_true_delta(dists, pairs, public.epsilon * 0.999, tail) > public.delta
