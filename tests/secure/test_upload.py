"""A round's secure upload end to end: honest reports unshard to the exact bit counts, and
each kind of bad report is refused with its reason while the counts stay those of the honest
ones."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from math import isqrt
from typing import Any

import pytest

from ldpcollect.secure.sealing import (
    ROLE_HELPER,
    ROLE_LEADER,
    HpkeKeyPair,
    generate_key_pair,
    open_aggregate_share,
    seal_aggregate_share,
    seal_input_share,
)
from ldpcollect.secure.share_binding import ShareBinding
from ldpcollect.secure.upload import (
    BitsVdaf,
    Refusal,
    ReportRejected,
    SecureFormatError,
    SecureReport,
    aggregate,
    answer_vdaf,
    open_and_verify_init,
    shard_report,
    unshard,
    vdaf_context,
    verify_batch,
)
from ldpcollect.vdaf.circuits import SumVec
from ldpcollect.vdaf.field import Field128
from ldpcollect.vdaf.flp import Flp
from ldpcollect.vdaf.prio3 import Prio3
from ldpcollect.vdaf.variants import PRIO3_SUM_VEC

T = 20
QUERY = "q-secure"
VERIFY_KEY = bytes(range(32))


@pytest.fixture(scope="module")
def keys() -> tuple[HpkeKeyPair, HpkeKeyPair]:
    return generate_key_pair(1), generate_key_pair(2)


def make_report(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
    rng: random.Random,
    bits: Sequence[int],
    vdaf: BitsVdaf | None = None,
    round_: int = 1,
) -> SecureReport:
    vdaf = vdaf or answer_vdaf(len(bits))
    leader, helper = keys
    return shard_report(
        vdaf,
        leader.config,
        helper.config,
        QUERY,
        round_,
        rng.randbytes(16),
        bits,
        rng.randbytes(vdaf.rand_size),
    )


def counts_of(
    keys: tuple[HpkeKeyPair, HpkeKeyPair], reports: Sequence[SecureReport]
) -> tuple[list[int], list[Refusal | None]]:
    vdaf = answer_vdaf(T)
    result = verify_batch(vdaf, *keys, VERIFY_KEY, reports)
    counts = unshard(vdaf, aggregate(vdaf, result.leader_out), aggregate(vdaf, result.helper_out))
    return counts, result.refusals()


def test_a_thousand_honest_reports_unshard_to_the_exact_bit_counts(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
) -> None:
    rng = random.Random(20261201)
    answers = [[rng.randrange(2) for _ in range(T)] for _ in range(1000)]
    reports = [make_report(keys, rng, bits) for bits in answers]
    counts, refusals = counts_of(keys, reports)
    assert refusals == [None] * 1000
    assert counts == [sum(column) for column in zip(*answers, strict=True)]


def test_a_report_survives_its_byte_encoding(keys: tuple[HpkeKeyPair, HpkeKeyPair]) -> None:
    report = make_report(keys, random.Random(1), [1, 0] * (T // 2))
    assert SecureReport.decode(report.encode()) == report


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (1, "query id needs 8 bytes, only 0 left"),
        (14, "report id needs 16 bytes, only 1 left"),
        (-1, "helper ciphertext needs"),
    ],
)
def test_a_truncated_report_is_refused_naming_the_field(
    keys: tuple[HpkeKeyPair, HpkeKeyPair], cut: int, message: str
) -> None:
    encoded = make_report(keys, random.Random(1), [0] * T).encode()
    with pytest.raises(SecureFormatError, match=message):
        SecureReport.decode(encoded[:cut])
    with pytest.raises(SecureFormatError, match="2 bytes after the helper ciphertext"):
        SecureReport.decode(encoded + b"xx")


def flip_byte(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 0x80
    return bytes(out)


def tampered_cases(
    keys: tuple[HpkeKeyPair, HpkeKeyPair], report: SecureReport, rng: random.Random
) -> dict[str, tuple[SecureReport, Refusal]]:
    other_leader = generate_key_pair(9)
    wrong_length = make_report(keys, rng, [1] * (T - 1), answer_vdaf(T - 1))
    return {
        "leader ciphertext byte": (
            replace(report, leader_ciphertext=flip_byte(report.leader_ciphertext, 40)),
            Refusal.BAD_CIPHERTEXT,
        ),
        "helper ciphertext byte": (
            replace(report, helper_ciphertext=flip_byte(report.helper_ciphertext, -1)),
            Refusal.BAD_CIPHERTEXT,
        ),
        "wrong config id": (
            make_report((other_leader, keys[1]), rng, [1] * T),
            Refusal.WRONG_CONFIG_ID,
        ),
        "other query": (replace(report, query_id="q-other"), Refusal.BAD_CIPHERTEXT),
        "other round": (replace(report, round=2), Refusal.BAD_CIPHERTEXT),
        "other report id": (replace(report, report_id=bytes(16)), Refusal.BAD_CIPHERTEXT),
        "other public share": (
            replace(report, public_share=flip_byte(report.public_share, 0)),
            Refusal.BAD_CIPHERTEXT,
        ),
        "share vector of the wrong length": (wrong_length, Refusal.WRONG_LENGTH),
    }


def test_each_tampered_report_is_refused_with_its_reason_and_counts_nothing(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
) -> None:
    rng = random.Random(7)
    honest = make_report(keys, rng, [1] * T)
    cases = tampered_cases(keys, honest, rng)
    counts, refusals = counts_of(keys, [honest, *(bad for bad, _ in cases.values())])
    assert dict(zip(cases, refusals[1:], strict=True)) == {
        name: reason for name, (_, reason) in cases.items()
    }
    assert refusals[0] is None
    assert counts == [1] * T


class UncheckedSumVec(SumVec):
    """SumVec whose encoding takes any integers: a device that proves an invalid vector
    with the circuit's own prover."""

    def encode(self, measurement: Sequence[int]) -> list[int]:
        return list(measurement)


def test_an_answer_vector_with_an_entry_2_fails_its_proof(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
) -> None:
    circuit = UncheckedSumVec(Field128, T, 1, isqrt(T))  # the chunking answer_vdaf uses
    lying: BitsVdaf = Prio3(PRIO3_SUM_VEC, Flp(circuit), 2)
    rng = random.Random(11)
    bits = [0] * T
    bits[3] = 2
    bad = make_report(keys, rng, bits, lying)
    honest = make_report(keys, rng, [0, 1] * (T // 2), lying)  # the same sharing, honest input
    counts, refusals = counts_of(keys, [bad, honest])
    assert refusals == [Refusal.BAD_PROOF, None]
    assert counts == [0, 1] * (T // 2)


def test_a_replayed_report_verifies_twice_deduplication_is_the_callers(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
) -> None:
    report = make_report(keys, random.Random(3), [1] * T)
    counts, refusals = counts_of(keys, [report, report])
    assert refusals == [None, None]
    assert counts == [2] * T


def test_one_role_refuses_with_a_precise_reason(keys: tuple[HpkeKeyPair, HpkeKeyPair]) -> None:
    report = make_report(keys, random.Random(5), [1] * T)
    vdaf = answer_vdaf(T)
    open_and_verify_init(vdaf, keys[1], ROLE_HELPER, VERIFY_KEY, report)
    with pytest.raises(ReportRejected, match="wrong HPKE config id: config id 1, this") as caught:
        open_and_verify_init(vdaf, keys[1], ROLE_LEADER, VERIFY_KEY, report)
    assert caught.value.reason is Refusal.WRONG_CONFIG_ID
    with pytest.raises(ReportRejected) as caught:
        open_and_verify_init(vdaf, keys[0], ROLE_HELPER, VERIFY_KEY, report)
    assert caught.value.reason is Refusal.WRONG_CONFIG_ID


def test_a_report_with_a_bad_report_id_is_refused_before_sharding(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
) -> None:
    vdaf = answer_vdaf(T)
    with pytest.raises(SecureFormatError, match="report id is 16 bytes, got 15"):
        shard_report(vdaf, keys[0].config, keys[1].config, QUERY, 1, bytes(15), [0] * T, bytes(64))


def test_a_bad_role_or_verify_key_is_the_callers_error_not_a_refusal(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
) -> None:
    report = make_report(keys, random.Random(6), [1] * T)
    vdaf = answer_vdaf(T)
    with pytest.raises(ValueError, match="role must be 0x02 \\(leader\\) or 0x03 \\(helper\\)"):
        open_and_verify_init(vdaf, keys[0], 0x01, VERIFY_KEY, report)
    with pytest.raises(ValueError, match="verify key is 32 bytes, got 16"):
        verify_batch(vdaf, *keys, bytes(16), [report])


def test_aggregate_shares_sealed_to_the_collector_unshard_to_the_counts(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
) -> None:
    rng = random.Random(8)
    answers = [[rng.randrange(2) for _ in range(T)] for _ in range(30)]
    vdaf = answer_vdaf(T)
    result = verify_batch(vdaf, *keys, VERIFY_KEY, [make_report(keys, rng, a) for a in answers])
    collector = generate_key_pair(0)
    shares = []
    for role, outs in ((ROLE_LEADER, result.leader_out), (ROLE_HELPER, result.helper_out)):
        encoded = vdaf.encode_agg_share(aggregate(vdaf, outs))
        binding = ShareBinding(QUERY, 1, "round", T, 30, "rr", 30, "")
        sealed = seal_aggregate_share(collector.config, role, binding, encoded)
        opened = open_aggregate_share(collector, role, binding, sealed)
        shares.append(vdaf.decode_agg_share(opened))
    assert unshard(vdaf, *shares) == [sum(column) for column in zip(*answers, strict=True)]
    # one aggregate share alone is not the counts (it is uniformly random)
    assert shares[0] != [sum(column) for column in zip(*answers, strict=True)]


def test_a_client_that_lies_about_its_joint_randomness_fails_its_proof(
    keys: tuple[HpkeKeyPair, HpkeKeyPair],
) -> None:
    """Sealed consistently with a public share other than the one it proved with: the
    ciphertexts open, the joint randomness check does not pass."""
    rng = random.Random(9)
    vdaf = answer_vdaf(T)
    report_id = rng.randbytes(16)
    public, (leader_share, helper_share) = vdaf.shard(
        vdaf_context(QUERY), [1] * T, report_id, rng.randbytes(vdaf.rand_size)
    )
    lie = flip_byte(vdaf.encode_public_share(public), 0)
    meta = (QUERY, 1, report_id, lie)
    report = SecureReport(
        *meta,
        seal_input_share(keys[0].config, ROLE_LEADER, *meta, vdaf.encode_input_share(leader_share)),
        seal_input_share(keys[1].config, ROLE_HELPER, *meta, vdaf.encode_input_share(helper_share)),
    )
    counts, refusals = counts_of(keys, [report])
    assert refusals == [Refusal.BAD_PROOF]
    assert counts == [0] * T


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("query_id", "", "query id is 1 to 255 bytes"),
        ("round", 2**32, "round must be an integer in \\[0, 2\\*\\*32\\)"),
        ("report_id", bytes(17), "report id is 16 bytes, got 17"),
    ],
)
def test_a_report_with_bad_metadata_cannot_be_built(
    keys: tuple[HpkeKeyPair, HpkeKeyPair], field: str, value: Any, message: str
) -> None:
    report = make_report(keys, random.Random(4), [0] * T)
    with pytest.raises(SecureFormatError, match=message):
        replace(report, **{field: value})
