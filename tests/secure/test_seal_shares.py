"""The compiled batch Seal (`sealing.seal_input_shares`, `ldpcollect/secure/hpke_seal_shares.c`)
against the reference seal from the same key material (`hpke_seal.seal_base`, itself checked
against RFC 9180's vectors): the same bytes, with the eight-lane X25519 and without; what it
seals with fresh material opens with `cryptography` and differs every time; and a fleet's
`shard_reports` (and `shard_report`, its one-report case) carries each report's own VDAF
shares."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.secure import _native_hpke
from ldpcollect.secure.sealing import (
    ROLE_HELPER,
    ROLE_LEADER,
    HpkeConfig,
    SealingError,
    generate_key_pair,
    open_input_share,
    seal_input_share,
    seal_input_shares,
)
from ldpcollect.secure.upload import answer_vdaf, shard_report, shard_reports, vdaf_context

LEADER, HELPER = generate_key_pair(3), generate_key_pair(4)

items = st.lists(
    st.tuples(
        st.binary(min_size=16, max_size=16),
        st.binary(max_size=60),
        st.binary(max_size=300),
    ),
    max_size=20,
)


@settings(max_examples=40)
@given(
    batch=items,
    role=st.sampled_from([ROLE_LEADER, ROLE_HELPER]),
    query_id=st.text(min_size=1, max_size=20),
    round_=st.integers(0, 2**32 - 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_batch_seal_gives_the_reference_bytes_with_and_without_lanes(
    batch: list[tuple[bytes, bytes, bytes]], role: int, query_id: str, round_: int, seed: int
) -> None:
    ikms = random.Random(seed).randbytes(32 * len(batch))
    expected = [
        seal_input_share(
            LEADER.config, role, query_id, round_, *item, ikm_e=ikms[32 * i : 32 * i + 32]
        )
        for i, item in enumerate(batch)
    ]
    before = _native_hpke.set_lanes(True)
    try:
        assert seal_input_shares(LEADER.config, role, query_id, round_, batch, ikms) == expected
        _native_hpke.set_lanes(False)
        assert seal_input_shares(LEADER.config, role, query_id, round_, batch, ikms) == expected
    finally:
        _native_hpke.set_lanes(before)


def test_fresh_seals_open_with_cryptography_and_never_repeat() -> None:
    batch = [(bytes([i]) * 16, b"public", b"share %d" % i) for i in range(19)]
    first = seal_input_shares(HELPER.config, ROLE_HELPER, "q", 7, batch)
    second = seal_input_shares(HELPER.config, ROLE_HELPER, "q", 7, batch)
    for (report_id, public, plaintext), a, b in zip(batch, first, second, strict=True):
        assert a[0] == HELPER.config.config_id
        assert a[1:33] != b[1:33]  # a fresh ephemeral key each time
        for sealed in (a, b):
            opened = open_input_share(HELPER, ROLE_HELPER, "q", 7, report_id, public, sealed)
            assert opened == plaintext
        with pytest.raises(SealingError):  # bound to its role, query, round and report
            open_input_share(HELPER, ROLE_LEADER, "q", 7, report_id, public, a)


def test_a_low_order_recipient_and_bad_items_are_refused_by_name() -> None:
    low_order = HpkeConfig(3, bytes(32))
    with pytest.raises(SealingError, match="low-order"):
        seal_input_shares(low_order, ROLE_LEADER, "q", 1, [(bytes(16), b"", b"x")] * 9)
    with pytest.raises(SealingError, match="report id is 16 bytes"):
        seal_input_shares(LEADER.config, ROLE_LEADER, "q", 1, [(bytes(15), b"", b"x")])
    with pytest.raises(SealingError, match="role"):
        seal_input_shares(LEADER.config, 9, "q", 1, [])
    with pytest.raises(SealingError, match="key material"):
        seal_input_shares(LEADER.config, ROLE_LEADER, "q", 1, [(bytes(16), b"", b"")], b"short")
    with pytest.raises(TypeError, match="triple"):
        _native_hpke.seal_shares(
            bytes(32),
            b"p",
            b"q",
            1,
            3,
            [(b"x", b"y")],  # type: ignore[list-item]
            bytes(32),
        )
    assert seal_input_shares(LEADER.config, ROLE_LEADER, "q", 1, []) == []


@pytest.mark.parametrize("count", [1, 8, 13])
def test_a_fleet_batch_carries_each_reports_own_shares(count: int) -> None:
    """Every report of a batch (one alone: `shard_report`) holds the VDAF's own public share,
    and each of its ciphertexts opens, with `cryptography`, to that aggregator's share."""
    vdaf = answer_vdaf(20)
    rng = random.Random(count)
    reports = [
        (rng.randbytes(16), [rng.randrange(2) for _ in range(20)], rng.randbytes(vdaf.rand_size))
        for _ in range(count)
    ]
    batch = shard_reports(vdaf, LEADER.config, HELPER.config, "q", 1, reports)
    if count == 1:
        batch = [shard_report(vdaf, LEADER.config, HELPER.config, "q", 1, *reports[0])]
    for (report_id, values, rand), mine in zip(reports, batch, strict=True):
        public, shares = vdaf.shard_encoded(vdaf_context("q"), values, report_id, rand)
        assert (mine.report_id, mine.public_share) == (report_id, public)
        sealed = (mine.leader_ciphertext, mine.helper_ciphertext)
        for key, role, share, ciphertext in zip(
            (LEADER, HELPER), (ROLE_LEADER, ROLE_HELPER), shares, sealed, strict=True
        ):
            assert open_input_share(key, role, "q", 1, report_id, public, ciphertext) == share
