"""Exact intervals against the plug-in ones: mean width and exact coverage at true counts
5, 20, 100 and 200 (`python -m bench.intervals`). Both figures are exact expectations over
the statistic's law, not simulations; the ratio is exact / plug-in in the same run."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy.stats import binom

from ldpcollect.intervals import exact_intervals, sp_law

Z95 = 1.959963984540054


def sp_rows(rate: Fraction, sigma: Fraction | None) -> list[tuple[int, float, float, float, float]]:
    s = float(rate)
    noise_var = 0.0 if sigma is None else float(sigma) ** 2
    wide = 0 if sigma is None else int(40 * float(sigma)) + 5
    z = np.arange(-wide, wide + 1)
    one = np.exp(-(z**2) / (2 * max(noise_var, 1e-300))) if sigma else np.ones(1)
    one /= one.sum()
    noise = np.convolve(one, one) if sigma else one
    offset = -(noise.size - 1) // 2
    xs = np.arange(offset, 200 + 1 - offset)
    low, high = exact_intervals(sp_law(rate, 10_000, sigma), xs)
    rows = []
    for count in (5, 20, 100, 200):
        pmf = np.convolve(binom.pmf(np.arange(count + 1), count, s), noise)
        x = offset + np.arange(pmf.size)
        index = x - xs[0]
        estimate = x / s
        se = np.sqrt(np.maximum(estimate, 0) * (1 - s) / s + 2 * noise_var / s**2)
        plug_low, plug_high = estimate - Z95 * se, estimate + Z95 * se
        exact_width = float(np.sum(pmf * (high[index] - low[index])))
        plug_width = float(np.sum(pmf * (plug_high - plug_low)))
        exact_cover = float(np.sum(pmf[(low[index] <= count) & (count <= high[index])]))
        plug_cover = float(np.sum(pmf[(plug_low <= count) & (count <= plug_high)]))
        rows.append((count, plug_width, exact_width, plug_cover, exact_cover))
    return rows


def main() -> None:
    print("mean 95% interval width and exact coverage, by true count in the cell")
    print(f"{'case':<22}{'count':>6}{'plug-in':>10}{'exact':>10}{'ratio':>8}{'cover':>16}")
    for rate, sigma in ((Fraction(1, 2), None), (Fraction(1, 2), Fraction(2))):
        name = f"SP s={rate}" + ("" if sigma is None else f" sigma {sigma}")
        for count, plug, exact, plug_cover, exact_cover in sp_rows(rate, sigma):
            print(
                f"{name:<22}{count:>6}{plug:>10.2f}{exact:>10.2f}{exact / plug:>8.3f}"
                f"{plug_cover:>8.2%}{exact_cover:>8.2%}"
            )


if __name__ == "__main__":
    main()
