"""Post-processing of released estimates: clip and the Norm-Sub projection."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect import postprocess
from ldpcollect.errors import ParameterError

vectors = st.lists(
    st.floats(min_value=-1e4, max_value=1e4, allow_nan=False), min_size=1, max_size=40
)


def test_clip_sets_negatives_to_zero() -> None:
    assert postprocess.clip([-3.0, 0.0, 2.5]).tolist() == [0.0, 0.0, 2.5]


def test_norm_sub_subtracts_one_constant_and_keeps_the_total() -> None:
    # total 10; keeping 12 and 4 needs c = 3 (9 + 1 = 10), and -2 - 3 < 0 is dropped
    assert postprocess.norm_sub([12.0, 4.0, -2.0, -4.0]).tolist() == [9.0, 1.0, 0.0, 0.0]


def test_norm_sub_of_a_negative_total_is_all_zero() -> None:
    assert postprocess.norm_sub([1.0, -5.0]).tolist() == [0.0, 0.0]


@given(vectors)
def test_norm_sub_is_the_nearest_nonnegative_vector_with_the_same_total(
    values: list[float],
) -> None:
    """KKT conditions of min |y - x|^2 subject to y >= 0, sum y = max(sum x, 0)."""
    x = np.asarray(values)
    y = postprocess.norm_sub(x)
    total = max(float(x.sum()), 0.0)
    scale = 1e-9 * (1 + float(np.abs(x).sum()))
    assert (y >= 0).all()
    assert float(y.sum()) == pytest.approx(total, abs=scale)
    if total > 0:
        kept = y > 0
        shift = x[kept] - y[kept]
        assert np.ptp(shift) <= scale  # one constant subtracted from the kept cells
        assert (x[~kept] <= shift[0] + scale).all()  # the dropped ones were below it


def test_an_unknown_method_is_refused() -> None:
    with pytest.raises(ParameterError, match="--postprocess must be clip or norm-sub"):
        postprocess.apply("round", [1.0])
