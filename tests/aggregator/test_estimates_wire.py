"""A release's estimates encoded with numpy parse to exactly the messages built one by one."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from aggregator.model import ReleaseRecord, TargetRelease
from aggregator.protoconv import release_to_proto, release_to_proto_per_message

U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
FLOATS = st.one_of(
    st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, math.inf, -math.inf, 1e-300])
)


@st.composite
def records(draw: st.DrawFn) -> ReleaseRecord:
    rounds = draw(st.integers(1, 2))
    estimates = draw(
        st.lists(
            st.builds(
                TargetRelease,
                U64,
                FLOATS,
                FLOATS,
                FLOATS,
                FLOATS,
                U64,
                st.tuples(*[I64] * rounds),
            ),
            max_size=20,
        )
    )
    return ReleaseRecord("q-1", draw(U64), 1700000000.5, tuple(estimates), ())


@settings(max_examples=300)
@given(records())
def test_numpy_encoded_estimates_parse_to_the_per_message_release(record: ReleaseRecord) -> None:
    assert release_to_proto(record) == release_to_proto_per_message(record)
