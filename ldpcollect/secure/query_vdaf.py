"""Which VDAF a secure query uses, from its mechanism: one round's answer bits for
randomized response, the round pair for Sampling Privacy (docs/secure-mode.md)."""

from __future__ import annotations

from collections.abc import Sequence

from ldpcollect.secure.sampling_pair import PAIR_ROUND, pair_vdaf
from ldpcollect.secure.upload import BitsVdaf, answer_vdaf

ROUND_VDAF = "round"
PAIR_VDAF = "sampling_pair"
VDAF_KINDS = (ROUND_VDAF, PAIR_VDAF)

_CACHE: dict[tuple[str, int], BitsVdaf] = {}


def vdaf_kind(mechanism_name: str) -> str:
    """ROUND_VDAF for randomized response (one round), PAIR_VDAF for Sampling Privacy."""
    return PAIR_VDAF if mechanism_name == "sp" else ROUND_VDAF


def upload_round(kind: str) -> int:
    """The round a report is sealed for: 1, or 2 for the pair (sent once round 2 is open)."""
    return PAIR_ROUND if kind == PAIR_VDAF else 1


def query_vdaf(kind: str, targets: int) -> BitsVdaf:
    """The (cached) VDAF for `kind` over `targets` cells."""
    if kind not in VDAF_KINDS:
        raise ValueError(f"VDAF kind must be one of {', '.join(VDAF_KINDS)}, got {kind!r}")
    key = (kind, targets)
    if key not in _CACHE:
        _CACHE[key] = pair_vdaf(targets) if kind == PAIR_VDAF else answer_vdaf(targets)
    return _CACHE[key]


def measurement(kind: str, rounds: Sequence[Sequence[int]]) -> list[int]:
    """A device's measurement from its per-round answer bits: round 1's bits, or round 1's
    then round 2's for the pair."""
    if kind == PAIR_VDAF:
        if len(rounds) != 2:
            raise ValueError(f"a Sampling Privacy pair needs two rounds, got {len(rounds)}")
        return [*rounds[0], *rounds[1]]
    return list(rounds[0])


def round_counts(kind: str, counts: Sequence[int], targets: int) -> list[list[int]]:
    """Unsharded counts as per-round rows (round 1 first)."""
    if kind == PAIR_VDAF:
        return [list(counts[:targets]), list(counts[targets : 2 * targets])]
    return [list(counts)]
