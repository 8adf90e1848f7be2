"""Randomized response: device half, fleet half and aggregator half in one place.

A device answers truthfully with probability p = flip1; otherwise it answers Yes with
probability q = flip2. So P(Yes|Yes) = a1 = p + (1-p)q and P(Yes|No) = a0 = (1-p)q; each
answer bit is drawn as one exact Bernoulli(a1) or Bernoulli(a0), which is the same
distribution as the two coins.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from ldpcollect import bits
from ldpcollect.mechanisms.draw import DeviceDraw
from ldpcollect.mechanisms.estimates import (
    Estimates,
    check_round_counts,
    check_true_count,
    check_true_counts,
)
from ldpcollect.mechanisms.targets import (
    TargetIndex,
    column_counts,
    device_chunks,
    locations_array,
    targets_array,
    validate_location,
    validate_targets,
)
from ldpcollect.randomness import OS_RANDOM, RandomSource
from ldpcollect.rational import (
    RationalLike,
    bernoulli_array,
    csprng_bernoulli,
    log_upper,
    probability,
)


@dataclass(frozen=True, init=False)
class RandomizedResponse:
    """Randomized response with flip1 = p in (0, 1] and flip2 = q in [0, 1], kept exact."""

    flip1: Fraction
    flip2: Fraction

    name: ClassVar[str] = "rr"
    rounds: ClassVar[int] = 1

    def __init__(self, flip1: RationalLike, flip2: RationalLike) -> None:
        object.__setattr__(self, "flip1", probability("flip1", flip1, zero_allowed=False))
        object.__setattr__(self, "flip2", probability("flip2", flip2, zero_allowed=True))

    # -- shared facts -------------------------------------------------------------------------
    @property
    def yes_given_yes(self) -> Fraction:
        """a1 = p + (1-p) q."""
        return self.flip1 + (1 - self.flip1) * self.flip2

    @property
    def yes_given_no(self) -> Fraction:
        """a0 = (1-p) q."""
        return (1 - self.flip1) * self.flip2

    def params(self) -> dict[str, str]:
        return {"flip1": str(self.flip1), "flip2": str(self.flip2)}

    def local_epsilon(self) -> float:
        """eps0 = ln(1 + p / ((1-p) min(q, 1-q))): the leakage of one report (inf if unbounded)."""
        p, q = self.flip1, self.flip2
        denominator = (1 - p) * min(q, 1 - q)
        if denominator == 0:
            return math.inf
        return log_upper(1 + p / denominator)

    # -- device half --------------------------------------------------------------------------
    def draw(
        self, location_id: int, targets: Sequence[int], source: RandomSource = OS_RANDOM
    ) -> DeviceDraw:
        """One device's answers (CSPRNG, exact probabilities), decided once for the query:
        one Bernoulli per target, in target order (docs/device-protocol.md, "Drawing")."""
        location = validate_location(location_id)
        ts = validate_targets(targets)
        a1, a0 = self.yes_given_yes, self.yes_given_no
        answer = [csprng_bernoulli(a1 if t == location else a0, source) for t in ts]
        return DeviceDraw(self.name, self.params(), len(ts), (bits.pack(answer),))

    # -- fleet half ---------------------------------------------------------------------------
    def _chunk_bits(
        self,
        locations: NDArray[np.uint64],
        index: TargetIndex,
        n_targets: int,
        rng: np.random.Generator,
    ) -> NDArray[np.bool_]:
        """Every device draws one Bernoulli per target and one more for its own cell, used only
        when that cell is a target: the generator is consumed alike whatever the locations, so
        a device's answers depend on its own location and position alone (a corrected row in
        a file fleet changes no other device's draws, `client.fleet_identity`)."""
        answers = bernoulli_array(self.yes_given_no, (locations.size, n_targets), rng)
        own_cell = bernoulli_array(self.yes_given_yes, locations.size, rng)
        at = index(locations)
        rows = np.flatnonzero(at >= 0)
        answers[rows, at[rows]] = own_cell[rows]
        return answers

    def fleet_answers(
        self,
        locations: NDArray[np.integer] | Iterable[int],
        targets: NDArray[np.integer] | Iterable[int],
        rng: np.random.Generator,
    ) -> NDArray[np.uint8]:
        """Packed answers of many devices: uint8 of shape (1, n_devices, ceil(T/8))."""
        locs, ts = locations_array(locations), targets_array(targets)
        index = TargetIndex(ts)
        out = np.empty((1, locs.size, bits.packed_length(ts.size)), dtype=np.uint8)
        for chunk in device_chunks(locs.size, ts.size):
            out[0, chunk] = np.packbits(self._chunk_bits(locs[chunk], index, ts.size, rng), axis=1)
        return out

    def fleet_counts(
        self,
        locations: NDArray[np.integer] | Iterable[int],
        targets: NDArray[np.integer] | Iterable[int],
        rng: np.random.Generator,
    ) -> NDArray[np.int64]:
        """Yes counts of many independently randomized devices: int64 of shape (1, T)."""
        locs, ts = locations_array(locations), targets_array(targets)
        index = TargetIndex(ts)
        counts = np.zeros((1, ts.size), dtype=np.int64)
        for chunk in device_chunks(locs.size, ts.size):
            counts[0] += column_counts(self._chunk_bits(locs[chunk], index, ts.size, rng))
        return counts

    def sample_aggregate(
        self, true_counts: NDArray[np.integer] | list[int], n_devices: int, rng: np.random.Generator
    ) -> NDArray[np.int64]:
        """Round counts drawn exactly in distribution: Y = Bin(T, a1) + Bin(N - T, a0)."""
        truth = check_true_counts(true_counts, n_devices)
        yes = rng.binomial(truth, float(self.yes_given_yes))
        no = rng.binomial(int(n_devices) - truth, float(self.yes_given_no))
        return (yes + no).astype(np.int64).reshape(1, -1)

    # -- aggregator half ----------------------------------------------------------------------
    def _variance(
        self, true_count: NDArray[np.float64] | float, n_devices: int
    ) -> NDArray[np.float64]:
        p, a1, a0 = float(self.flip1), float(self.yes_given_yes), float(self.yes_given_no)
        spread = true_count * a1 * (1 - a1) + (n_devices - true_count) * a0 * (1 - a0)
        return np.asarray(spread / p**2, dtype=np.float64)

    def estimate(
        self,
        round_counts: NDArray[np.integer] | NDArray[np.floating],
        n_devices: int,
        count_noise_variance: float = 0.0,
    ) -> Estimates:
        """(C - a0 N)/p per target, variance [T a1(1-a1) + (N-T) a0(1-a0) + noise]/p^2."""
        counts = check_round_counts(round_counts, self.rounds, n_devices, count_noise_variance)
        n = int(n_devices)
        p = float(self.flip1)
        estimate = (counts[0] - float(self.yes_given_no) * n) / p
        plug_in = np.clip(estimate, 0.0, float(n))
        variance = self._variance(plug_in, n) + float(count_noise_variance) / p**2
        return Estimates.from_variance(estimate, variance, n)

    def predicted_sd(
        self, true_count: float, n_devices: int, count_noise_variance: float = 0.0
    ) -> float:
        """Standard deviation of the estimate when true_count of n_devices are truly Yes."""
        t, n = check_true_count(true_count, n_devices)
        variance = float(self._variance(t, n))
        return math.sqrt(variance + float(count_noise_variance) / float(self.flip1) ** 2)
