"""XofTurboShake128: the draft's vector, one continuous stream, domain separation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field64, Field128
from ldpcollect.vdaf.xof import XofTurboShake128, format_dst

VECTOR = json.loads((Path(__file__).parent / "vectors" / "XofTurboShake128.json").read_text())
SEED = bytes.fromhex(VECTOR["seed"])
DST = bytes.fromhex(VECTOR["dst"])
BINDER = bytes.fromhex(VECTOR["binder"])


def test_derived_seed_matches_the_draft_vector() -> None:
    assert XofTurboShake128.derive_seed(SEED, DST, BINDER).hex() == VECTOR["derived_seed"]


def test_expanded_field128_vector_matches_the_draft_vector() -> None:
    vec = XofTurboShake128.expand_into_vec(Field128, SEED, DST, BINDER, VECTOR["length"])
    assert Field128.encode_vec(vec).hex() == VECTOR["expanded_vec_field128"]


@given(cuts=st.lists(st.integers(min_value=0, max_value=70), max_size=5))
def test_successive_reads_continue_one_stream(cuts: list[int]) -> None:
    xof = XofTurboShake128(SEED, DST, BINDER)
    pieces = b"".join(xof.next(n) for n in cuts)
    assert pieces == XofTurboShake128(SEED, DST, BINDER).next(sum(cuts))


def test_seed_dst_and_binder_each_change_the_output() -> None:
    base = XofTurboShake128.derive_seed(SEED, DST, BINDER)
    assert XofTurboShake128.derive_seed(SEED[::-1], DST, BINDER) != base
    assert XofTurboShake128.derive_seed(SEED, DST + b"x", BINDER) != base
    assert XofTurboShake128.derive_seed(SEED, DST, BINDER + b"x") != base
    # The length prefixes keep the dst/seed boundary unambiguous.
    assert XofTurboShake128.derive_seed(SEED, DST[:-1], DST[-1:] + BINDER) != base


def test_next_vec_yields_elements_below_the_modulus() -> None:
    vec = XofTurboShake128(SEED, DST, BINDER).next_vec(Field64, 500)
    assert len(vec) == 500
    assert all(0 <= x < Field64.modulus for x in vec)


def test_oversized_seed_and_dst_are_refused() -> None:
    with pytest.raises(VdafError, match="at most 255 bytes"):
        XofTurboShake128(bytes(256), DST, BINDER)
    with pytest.raises(VdafError, match="at most 65535 bytes"):
        XofTurboShake128(SEED, bytes(65536), BINDER)


def test_domain_separation_tag_layout() -> None:
    # version 18, class 0 (VDAF), algorithm 0x00000004 (Prio3Histogram), usage 7
    assert format_dst(0, 4, 7) == bytes([18, 0, 0, 0, 0, 4, 0, 7])
