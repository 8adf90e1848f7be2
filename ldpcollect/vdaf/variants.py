"""The Prio3 variants of draft section 7.4, with their codepoints (section 10) and fields."""

from __future__ import annotations

from collections.abc import Sequence

from ldpcollect.vdaf.circuits import Count, Histogram, MultihotCountVec, Sum, SumVec
from ldpcollect.vdaf.field import Field64, Field128
from ldpcollect.vdaf.flp import Flp
from ldpcollect.vdaf.prio3 import Prio3

PRIO3_COUNT = 0x00000001
PRIO3_SUM = 0x00000002
PRIO3_SUM_VEC = 0x00000003
PRIO3_HISTOGRAM = 0x00000004
PRIO3_MULTIHOT_COUNT_VEC = 0x00000005


def prio3_count(shares: int) -> Prio3[int, int]:
    return Prio3(PRIO3_COUNT, Flp(Count(Field64)), shares)


def prio3_sum(shares: int, max_measurement: int) -> Prio3[int, int]:
    return Prio3(PRIO3_SUM, Flp(Sum(Field64, max_measurement)), shares)


def prio3_sum_vec(
    shares: int, length: int, max_measurement: int, chunk_length: int
) -> Prio3[Sequence[int], list[int]]:
    circuit = SumVec(Field128, length, max_measurement, chunk_length)
    return Prio3(PRIO3_SUM_VEC, Flp(circuit), shares)


def prio3_histogram(shares: int, length: int, chunk_length: int) -> Prio3[int, list[int]]:
    return Prio3(PRIO3_HISTOGRAM, Flp(Histogram(Field128, length, chunk_length)), shares)


def prio3_multihot_count_vec(
    shares: int, length: int, max_weight: int, chunk_length: int
) -> Prio3[Sequence[bool], list[int]]:
    circuit = MultihotCountVec(Field128, length, max_weight, chunk_length)
    return Prio3(PRIO3_MULTIHOT_COUNT_VEC, Flp(circuit), shares)
