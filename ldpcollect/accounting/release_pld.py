"""Privacy-loss distributions of recorded releases, and their composition for a plan fixed in
advance.

A claim's `source` names what was released (mechanism, parameters, targets, noise, the
participants floor). From it `release_pld` rebuilds one symmetric pair that dominates the
public's view of that release for every move of one device and both directions:

- randomized response with a floor of two or more participants: the count-level candidates
  (`count_level.rr_count_pairs`, every arrangement of the others); otherwise each device's
  own report (`local_pairs.rr_pairs`). With release noise the counts' pair and the noise's pair
  (a count shifted by 1 under discrete Gaussian noise, two counts with two or more targets)
  both dominate (noise is post-processing; given the coins a move shifts at most two counts
  by 1, and the mixture over coins is no worse): the one with the smaller epsilon is used;
- Sampling Privacy with noise: the exact single-device pair (`sp_pair`); without noise the
  selection is revealed with probability s: loss +inf with probability s, else 0;
- the candidates and their reverses are joined by `pld.envelope_pair` (connect the dots), so
  composing the envelopes bounds any sequence of moves.

`planned_epsilon` composes the envelopes of a list of releases. That composition is valid when
which releases are made (each one's mechanism, targets, noise and floor) was fixed before the
first release; what each query asks and what the data are may still depend on earlier results.
When the releases themselves are chosen after seeing results, composing exact privacy-loss
distributions is not known to be valid; the ledger's adaptive odometer (`odometer`) is used for
that.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ldpcollect.accounting.count_level import RELEASE_FLOOR_CAP, rr_count_pairs
from ldpcollect.accounting.discrete_gaussian import (
    discrete_gaussian_log_pmf,
    radius_for_tail,
    tail_bound,
)
from ldpcollect.accounting.local_pairs import BinaryPair, rr_pairs
from ldpcollect.accounting.pld import (
    DEFAULT_INTERVAL,
    LossDistribution,
    PldPair,
    compose_within,
    envelope_pair,
    power_within,
)
from ldpcollect.accounting.sp_pair import MAX_GRID, TAIL, sp_release_pairs
from ldpcollect.errors import ParameterError

SourceKey = tuple[tuple[str, str], ...]
# A plan's composition keeps at most this many loss points: long plans of strong releases
# (losses in the hundreds) move to a coarser grid, costing at most twice its interval.
PLAN_GRID_LIMIT = 1 << 18


def source_key(source: Mapping[str, str]) -> SourceKey:
    return tuple(sorted(source.items()))


def _binary_pld(pair: BinaryPair) -> PldPair:
    """Exact PLDs of Bernoulli(p) against Bernoulli(q) (0 < p, q < 1)."""
    p = np.log(np.array([pair.p, 1.0 - pair.p]))
    q = np.log(np.array([pair.q, 1.0 - pair.q]))
    return PldPair(
        LossDistribution.from_log_pmfs(p, q, DEFAULT_INTERVAL),
        LossDistribution.from_log_pmfs(q, p, DEFAULT_INTERVAL),
    )


def _rr_candidates(source: Mapping[str, str], delta: float) -> list[PldPair]:
    flip1, flip2 = float(Fraction(source["flip1"])), float(Fraction(source["flip2"]))
    targets = int(source["targets"])
    floor = int(source.get("participants", "1"))
    if floor >= 2:
        floor = min(floor, RELEASE_FLOOR_CAP)
        return rr_count_pairs(flip1, flip2, targets, floor, delta)
    candidates = []
    for pair in rr_pairs(flip1, flip2, targets):
        parts = [_binary_pld(b) for b, k in pair.parts for _ in range(k)]
        result = parts[0]
        for part in parts[1:]:
            result = result.compose(part)
        candidates.append(result)
    return candidates


def _noise_pair(sigma: Fraction, targets: int) -> PldPair | None:
    """A count shifted by 1 under discrete Gaussian noise (composed twice with two or more
    targets); None when the grid would be too large."""
    var = float(sigma * sigma)
    radius = radius_for_tail(var, TAIL)
    if 2 * radius + 2 > MAX_GRID:
        return None
    log_g = discrete_gaussian_log_pmf(var, radius)
    minus_inf = np.array([-np.inf])
    at_zero = np.concatenate([log_g, minus_inf])  # x = -r..r+1
    at_one = np.concatenate([minus_inf, log_g])
    tail = tail_bound(var, radius)
    one = PldPair(
        LossDistribution.from_log_pmfs(at_one, at_zero, DEFAULT_INTERVAL, tail),
        LossDistribution.from_log_pmfs(at_zero, at_one, DEFAULT_INTERVAL, tail),
    )
    return one.compose(one) if targets >= 2 else one


def _smaller(first: PldPair, second: PldPair | None, delta: float) -> PldPair:
    if second is None or first.epsilon(delta) <= second.epsilon(delta):
        return first
    return second


def _sp_candidates(source: Mapping[str, str]) -> list[PldPair] | None:
    s = Fraction(source["sampling_rate"])
    targets = int(source["targets"])
    if "noise_sigma" not in source:
        # Selection shows with probability s (loss +inf); otherwise both views are alike.
        revealed = LossDistribution(DEFAULT_INTERVAL, 0, np.array([1.0 - float(s)]), float(s))
        return [PldPair(revealed, revealed)]
    return sp_release_pairs(s, Fraction(source["noise_sigma"]), targets)


@lru_cache(maxsize=128)
def _release_pld(key: SourceKey, delta: float) -> PldPair | None:
    source = dict(key)
    mechanism = source.get("mechanism")
    if mechanism == "rr":
        counts = envelope_pair(_rr_candidates(source, delta))
        if "noise_sigma" not in source:
            return counts
        noise = _noise_pair(Fraction(source["noise_sigma"]), int(source["targets"]))
        return _smaller(counts, noise, delta)
    if mechanism == "sp":
        candidates = _sp_candidates(source)
        return None if candidates is None else envelope_pair(candidates)
    raise ParameterError("source.mechanism", mechanism, "'rr' or 'sp'")


def release_pld(source: Mapping[str, str], delta: float) -> PldPair | None:
    """One symmetric pair dominating the release's public view (None: no exact pair here, e.g.
    Sampling Privacy noise too wide for the exact grid). `delta` only tunes the count-level
    split; the pair is valid at every epsilon."""
    return _release_pld(source_key(source), delta)


@lru_cache(maxsize=4096)
def _restated(key: SourceKey, delta: float, tune: float) -> float:
    pair = _release_pld(key, tune)
    return math.inf if pair is None else pair.epsilon(delta)


def restated_epsilon(source: Mapping[str, str], delta: float, tune: float) -> float:
    """The release's public epsilon at another `delta`, from its pair (built for `tune`, the
    delta its claim was stated at, so the pairs computed for the claim are reused); inf when
    it has none there."""
    return _restated(source_key(source), delta, tune)


@lru_cache(maxsize=64)
def _planned(keys: tuple[tuple[SourceKey, int], ...], delta: float, tune: float) -> float:
    result: PldPair | None = None
    for key, count in keys:
        pair = _release_pld(key, tune)
        if pair is None:
            return math.inf
        power = power_within(pair, count, PLAN_GRID_LIMIT)
        result = power if result is None else compose_within(result, power, PLAN_GRID_LIMIT)
    return math.inf if result is None else result.epsilon(delta)


def planned_epsilon(
    sources: Sequence[Mapping[str, str]], delta: float, tune: float | None = None
) -> float:
    """Epsilon at `delta` of the releases composed by PLD (inf when one has no exact pair);
    valid for releases fixed in advance (module docstring). `tune` (default `delta`) is the
    delta each release's pair is chosen for; the result is valid whatever it is."""
    if not sources:
        return 0.0
    counts = Counter(source_key(s) for s in sources)
    return _planned(tuple(sorted(counts.items())), delta, delta if tune is None else tune)
