"""Post-processing of released estimates: free for privacy, sometimes better for accuracy.

Anything computed from a release alone costs no privacy (post-processing), so a person may
look at the estimates made consistent with what counts can be:

- `clip`: negative estimates become 0 (a count is never negative). Lowers the error of every
  cell that was negative, but adds positive bias and raises the total.
- `norm_sub`: the Euclidean projection onto non-negative vectors with the same total (Wang et
  al., "Locally Differentially Private Frequency Estimation with Consistency", NDSS 2020):
  subtract one constant from every estimate and clip at 0, the constant chosen so the sum
  stays the released sum. Best when most cells are near zero.

The released estimates, intervals and privacy claims are unchanged; these are extra columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError

METHODS: Final = ("clip", "norm-sub")

FloatArray = npt.NDArray[np.float64]


def clip(estimates: Sequence[float] | FloatArray) -> FloatArray:
    """Every estimate below zero set to zero."""
    return np.maximum(_as_vector(estimates), 0.0)


def norm_sub(estimates: Sequence[float] | FloatArray) -> FloatArray:
    """max(estimate - c, 0) with c such that the result sums to max(sum of estimates, 0).

    This is the point nearest (in L2) the estimates among non-negative vectors of that sum.
    """
    values = _as_vector(estimates)
    total = float(values.sum())
    if values.size == 0 or total <= 0:
        return np.zeros_like(values)
    ordered = np.sort(values)[::-1]
    # With the k largest kept, c = (their sum - total) / k; the right k is the largest one
    # whose smallest kept value still exceeds its c.
    kept_sums = np.cumsum(ordered)
    ks = np.arange(1, values.size + 1)
    shifts = (kept_sums - total) / ks
    k = int(np.flatnonzero(ordered > shifts)[-1]) + 1
    shift = float(shifts[k - 1])
    return np.maximum(values - shift, 0.0)


def apply(method: str, estimates: Sequence[float] | FloatArray) -> FloatArray:
    """`clip` or `norm-sub` by name."""
    if method == "clip":
        return clip(estimates)
    if method == "norm-sub":
        return norm_sub(estimates)
    raise ParameterError("--postprocess", method, "clip or norm-sub")


def _as_vector(estimates: Sequence[float] | FloatArray) -> FloatArray:
    values = np.asarray(estimates, dtype=np.float64)
    if values.ndim != 1 or not np.isfinite(values).all():
        raise ParameterError("estimates", "(vector)", "a 1-D vector of finite numbers")
    return values
