"""The compiled batch HPKE Open (`ldpcollect/secure/_native_hpke.c`, through
`sealing.open_bound_shares` and `open_input_shares`) against the reference,
`cryptography`'s HPKE (`sealing.open_input_share`): the same plaintext for every honest
ciphertext, and a refusal for every tampered, truncated, misaddressed or foreign one, whatever
else is in the batch; and the batch opens of both roles (`upload.open_shares`) give what the
one-at-a-time `open_share` gives, refusals included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.secure import _native_hpke
from ldpcollect.secure.hpke_seal import seal_base
from ldpcollect.secure.sealing import (
    ROLE_HELPER,
    ROLE_LEADER,
    HpkeKeyPair,
    SealingError,
    generate_key_pair,
    input_share_info,
    open_bound_shares,
    open_input_share,
    open_input_shares,
    seal_input_share,
)
from ldpcollect.secure.upload import ReportRejected, SecureReport, open_share, open_shares

KEY = generate_key_pair(5)
OTHER = generate_key_pair(5)  # the same config id, another key

Case = tuple[bytes, bytes, bytes, int]  # report id, public share, plaintext, how it is spoiled
SPOILERS = 6  # 0 honest; 1 a flipped bit; 2 cut short; 3 another report id; 4 another key;
# 5 another config id


def sealed(key: HpkeKeyPair, role: int, case: Case) -> tuple[bytes, bytes, bytes]:
    """(report id, public share, ciphertext) as the aggregator receives it."""
    report_id, public, plaintext, spoil = case
    recipient = OTHER if spoil == 4 else key
    sealed_id = bytes([report_id[0] ^ 1]) + report_id[1:] if spoil == 3 else report_id
    ct = seal_input_share(recipient.config, role, "q", 1, sealed_id, public, plaintext)
    if spoil == 1:
        ct = ct[:-1] + bytes([ct[-1] ^ 1])
    elif spoil == 2:
        ct = ct[: len(ct) // 3]
    elif spoil == 5:
        ct = bytes([(ct[0] + 1) % 256]) + ct[1:]
    return report_id, public, ct


def reference(key: HpkeKeyPair, role: int, item: tuple[bytes, bytes, bytes]) -> bytes | str:
    try:
        return open_input_share(key, role, "q", 1, *item)
    except SealingError as error:
        return str(error)


def case_lists(
    max_public: int = 80, max_plaintext: int = 600, max_batch: int = 12
) -> st.SearchStrategy[list[Case]]:
    return st.lists(
        st.tuples(
            st.binary(min_size=16, max_size=16),
            st.binary(max_size=max_public),
            st.binary(max_size=max_plaintext),
            st.integers(0, SPOILERS - 1),
        ),
        max_size=max_batch,
    )


cases = case_lists()


@settings(max_examples=60)
@given(batch=cases, role=st.sampled_from([ROLE_LEADER, ROLE_HELPER]))
def test_the_batch_open_gives_the_reference_plaintext_or_its_refusal(
    batch: list[Case], role: int
) -> None:
    items = [sealed(KEY, role, case) for case in batch]
    native = open_input_shares(KEY, role, "q", 1, items)
    assert [r if isinstance(r, bytes) else str(r) for r in native] == [
        reference(KEY, role, item) for item in items
    ]
    for (_, _, plaintext, spoil), result in zip(batch, native, strict=True):
        assert (result == plaintext) if spoil == 0 else isinstance(result, SealingError)


@settings(max_examples=30)
@given(
    report_id=st.binary(min_size=16, max_size=16),
    public=st.binary(max_size=80),
    plaintext=st.binary(max_size=300),
    ikm=st.binary(min_size=32, max_size=32),
    role=st.sampled_from([ROLE_LEADER, ROLE_HELPER]),
)
def test_the_kernel_opens_what_the_rfc_9180_seal_of_the_vectors_seals(
    report_id: bytes, public: bytes, plaintext: bytes, ikm: bytes, role: int
) -> None:
    info = input_share_info(role, "q", 1, report_id, public)
    ct = bytes([KEY.config.config_id]) + seal_base(KEY.config.public_key, info, b"", plaintext, ikm)
    other_public = public + b"x"
    assert open_bound_shares(KEY, role, "q", 1, [(report_id, public, ct)]) == [plaintext]
    assert open_bound_shares(KEY, role, "q", 1, [(report_id, other_public, ct)]) == [None]
    assert open_bound_shares(KEY, role, "q", 2, [(report_id, public, ct)]) == [None]
    assert open_bound_shares(OTHER, role, "q", 1, [(report_id, public, ct)]) == [None]


def test_an_empty_batch_and_a_low_order_ephemeral_key_are_answered_not_crashed() -> None:
    assert open_bound_shares(KEY, ROLE_LEADER, "q", 1, []) == []
    # enc = the all-zero point: X25519 gives the all-zero secret, which RFC 9180 refuses
    zero = bytes([KEY.config.config_id]) + bytes(32 + 16)
    assert open_bound_shares(KEY, ROLE_LEADER, "q", 1, [(bytes(16), b"", zero)]) == [None]


@settings(max_examples=30)
@given(batch=cases)
def test_open_shares_gives_what_open_share_gives_for_each_role(batch: list[Case]) -> None:
    for role in (ROLE_LEADER, ROLE_HELPER):
        reports = []
        for case in batch:
            report_id, public, ct = sealed(KEY, role, case)
            mine, theirs = (ct, b"\x09") if role == ROLE_LEADER else (b"\x09", ct)
            reports.append(SecureReport("q", 1, report_id, public, mine, theirs))

        def one(report: SecureReport, role: int = role) -> bytes | tuple[str, str]:
            try:
                return open_share(KEY, role, report)
            except ReportRejected as rejected:
                return rejected.reason.name, rejected.detail

        batched = open_shares(KEY, role, reports)
        assert [r if isinstance(r, bytes) else (r.reason.name, r.detail) for r in batched] == [
            one(report) for report in reports
        ]


@settings(max_examples=40)
@given(
    batch=cases,
    role=st.sampled_from([ROLE_LEADER, ROLE_HELPER]),
    query_id=st.text(min_size=1, max_size=20),
    round_=st.integers(0, 2**32 - 1),
    short_id=st.integers(0, 12),
)
def test_the_bound_open_gives_the_reference_plaintext_or_leaves_a_refusal_to_it(
    batch: list[Case], role: int, query_id: str, round_: int, short_id: int
) -> None:
    """`open_bound_shares` (the infos bound in the same compiled call) against the reference:
    every plaintext it gives is the reference's, every item it leaves (None) the reference
    refuses, and every honest item is opened."""
    items = []
    for i, (report_id, public, plaintext, spoil) in enumerate(batch):
        ct = seal_input_share(KEY.config, role, query_id, round_, report_id, public, plaintext)
        if spoil == 1:
            ct = ct[:-1] + bytes([ct[-1] ^ 1])
        elif spoil == 2:
            ct = ct[: len(ct) // 3]
        elif spoil == 3:  # sealed for another query: the info differs
            ct = seal_input_share(KEY.config, role, query_id + "x", round_, report_id, public, b"")
        elif spoil == 4:
            ct = seal_input_share(OTHER.config, role, query_id, round_, report_id, public, b"")
        elif spoil == 5:
            ct = bytes([(ct[0] + 1) % 256]) + ct[1:]
        items.append((report_id[: 15 if i == short_id else 16], public, ct))
    bound = open_bound_shares(KEY, role, query_id, round_, items)
    for (_, _, plaintext, spoil), item, result in zip(batch, items, bound, strict=True):
        try:
            expected: bytes | None = open_input_share(KEY, role, query_id, round_, *item)
        except SealingError:
            expected = None
        assert result == expected
        if spoil == 0 and len(item[0]) == 16:
            assert result == plaintext


def test_the_kernels_refuse_malformed_arguments_by_name() -> None:
    key, prefix = KEY.private_bytes(), b"p"
    with pytest.raises(TypeError, match="triple"):
        _native_hpke.open_shares(key, prefix, b"q", 1, 5, [(b"x", b"y")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="bytes"):
        _native_hpke.open_uploads(key, prefix, b"q", 1, 5, 6, 81, ["not bytes"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="is 32 bytes"):
        _native_hpke.open_shares(key[:31], prefix, b"q", 1, 5, [])
    with pytest.raises(ValueError, match="query id"):
        _native_hpke.open_shares(key, prefix, b"", 1, 5, [])
    with pytest.raises(ValueError, match="round"):
        _native_hpke.open_uploads(key, prefix, b"q", 2**32, 5, 6, 81, [])
