"""Sampling Privacy (two rounds): device half, fleet half and aggregator half in one place.

A device whose true location is target t is *selected* for t with probability s: it answers
0 in round 1 and 1 in round 2 for t. Every other (device, target) pair answers a uniform bit
in round 1 and the same bit in round 2. So Y2 - Y1 counts the selected devices, S ~ Bin(n_t, s),
and (Y2 - Y1)/s estimates n_t with variance n_t (1-s)/s, whatever the number of No devices.
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
    log_lower,
    probability,
)

_UINT64_MAX = (1 << 64) - 1


@dataclass(frozen=True, init=False)
class SamplingPrivacy:
    """Sampling Privacy with sampling rate s in (0, 1], kept exact."""

    sampling_rate: Fraction

    name: ClassVar[str] = "sp"
    rounds: ClassVar[int] = 2

    def __init__(self, sampling_rate: RationalLike) -> None:
        s = probability("sampling_rate", sampling_rate, zero_allowed=False)
        object.__setattr__(self, "sampling_rate", s)

    # -- shared facts -------------------------------------------------------------------------
    def params(self) -> dict[str, str]:
        return {"sampling_rate": str(self.sampling_rate)}

    def local_epsilon(self) -> float:
        """-ln(1-s): leakage of ONE round's answer seen alone (inf when s = 1).

        Both rounds of one device together reveal selection exactly: no party may see both.
        """
        if self.sampling_rate == 1:
            return math.inf
        return -log_lower(1 - self.sampling_rate)

    # -- device half --------------------------------------------------------------------------
    def draw(
        self, location_id: int, targets: Sequence[int], source: RandomSource = OS_RANDOM
    ) -> DeviceDraw:
        """Both rounds' answers (CSPRNG, exact probabilities), decided once for the query:
        round 1's packed bytes first, then (at a target only) the selection Bernoulli(s)
        (docs/device-protocol.md, "Drawing")."""
        location = validate_location(location_id)
        ts = validate_targets(targets)
        n = len(ts)
        round1 = bytearray(source.token_bytes(bits.packed_length(n)))
        round1[-1] &= bits.padding_mask(n)
        round2 = bytearray(round1)
        if location in ts and csprng_bernoulli(self.sampling_rate, source):
            i = ts.index(location)
            mask = 0x80 >> (i % 8)
            round1[i // 8] &= ~mask & 0xFF
            round2[i // 8] |= mask
        return DeviceDraw(self.name, self.params(), n, (bytes(round1), bytes(round2)))

    # -- fleet half ---------------------------------------------------------------------------
    def _chunk(
        self,
        locations: NDArray[np.uint64],
        index: TargetIndex,
        n_targets: int,
        rng: np.random.Generator,
    ) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]]:
        """Round-1 packed answers of a chunk of devices; the selected rows and their targets.

        Every device draws its selection Bernoulli, used only when it is at a target: the
        generator is consumed alike whatever the locations, so a device's answers depend on
        its own location and position alone."""
        n_bytes = bits.packed_length(n_targets)
        cells = locations.size * n_bytes
        words = rng.integers(0, _UINT64_MAX, size=-(-cells // 8), dtype=np.uint64, endpoint=True)
        round1 = words.view(np.uint8)[:cells].reshape(locations.size, n_bytes)
        round1[:, -1] &= np.uint8(bits.padding_mask(n_targets))
        at = index(locations)
        rows = np.flatnonzero(at >= 0)
        selected = rows[bernoulli_array(self.sampling_rate, locations.size, rng)[rows]]
        columns = at[selected]
        round1[selected, columns >> 3] &= ~_bit_masks(columns)
        return round1, selected, columns

    def fleet_answers(
        self,
        locations: NDArray[np.integer] | Iterable[int],
        targets: NDArray[np.integer] | Iterable[int],
        rng: np.random.Generator,
    ) -> NDArray[np.uint8]:
        """Packed answers of many devices: uint8 of shape (2, n_devices, ceil(T/8))."""
        locs, ts = locations_array(locations), targets_array(targets)
        index = TargetIndex(ts)
        out = np.empty((2, locs.size, bits.packed_length(ts.size)), dtype=np.uint8)
        for chunk in device_chunks(locs.size, ts.size):
            round1, selected, columns = self._chunk(locs[chunk], index, ts.size, rng)
            round2 = round1.copy()
            round2[selected, columns >> 3] |= _bit_masks(columns)
            out[0, chunk] = round1
            out[1, chunk] = round2
        return out

    def fleet_counts(
        self,
        locations: NDArray[np.integer] | Iterable[int],
        targets: NDArray[np.integer] | Iterable[int],
        rng: np.random.Generator,
    ) -> NDArray[np.int64]:
        """Yes counts of both rounds for many devices: int64 of shape (2, T)."""
        locs, ts = locations_array(locations), targets_array(targets)
        index = TargetIndex(ts)
        counts = np.zeros((2, ts.size), dtype=np.int64)
        for chunk in device_chunks(locs.size, ts.size):
            round1, _, columns = self._chunk(locs[chunk], index, ts.size, rng)
            unpacked = np.unpackbits(round1, axis=1, count=ts.size).view(np.bool_)
            counts[0] += column_counts(unpacked)
            counts[1] += np.bincount(columns, minlength=ts.size)
        counts[1] += counts[0]
        return counts

    def sample_aggregate(
        self, true_counts: NDArray[np.integer] | list[int], n_devices: int, rng: np.random.Generator
    ) -> NDArray[np.int64]:
        """Round counts drawn exactly in distribution: S ~ Bin(n_t, s), Y1 = Bin(N - S, 1/2)."""
        truth = check_true_counts(true_counts, n_devices)
        selected = rng.binomial(truth, float(self.sampling_rate))
        round1 = rng.binomial(int(n_devices) - selected, 0.5)
        return np.stack([round1, round1 + selected]).astype(np.int64)

    # -- aggregator half ----------------------------------------------------------------------
    def estimate(
        self,
        round_counts: NDArray[np.integer] | NDArray[np.floating],
        n_devices: int,
        count_noise_variance: float = 0.0,
    ) -> Estimates:
        """(Y2 - Y1)/s per target; variance n_t (1-s)/s (+ 2 noise / s^2), n_t = max(est, 0).

        `n_devices` counts devices that answered both rounds; the counts are over those only.
        """
        counts = check_round_counts(round_counts, self.rounds, n_devices, count_noise_variance)
        s = float(self.sampling_rate)
        estimate = (counts[1] - counts[0]) / s
        plug_in = np.maximum(estimate, 0.0)
        variance = plug_in * (1 - s) / s + 2 * float(count_noise_variance) / s**2
        return Estimates.from_variance(estimate, variance, int(n_devices))

    def predicted_sd(
        self, true_count: float, n_devices: int, count_noise_variance: float = 0.0
    ) -> float:
        """Standard deviation of the estimate: sqrt(n_t (1-s)/s) (+ release noise)."""
        t, _ = check_true_count(true_count, n_devices)
        s = float(self.sampling_rate)
        return math.sqrt(t * (1 - s) / s + 2 * float(count_noise_variance) / s**2)


def _bit_masks(columns: NDArray[np.int64]) -> NDArray[np.uint8]:
    """The byte mask of each target index's bit in packed answers (MSB first)."""
    return (np.uint8(0x80) >> (columns & 7).astype(np.uint8)).astype(np.uint8)
