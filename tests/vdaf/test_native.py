"""The compiled kernels (ldpcollect/vdaf/native_c) against the pure-Python reference: built
and in use, equal on random inputs (hypothesis, derandomized under CI=true), and every
draft-20 vector reproduced through them."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from Crypto.Hash import TurboSHAKE128
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcollect.secure.sampling_pair import PRIO3_SAMPLING_PAIR, SamplingPair, pair_vdaf
from ldpcollect.secure.upload import answer_vdaf
from ldpcollect.vdaf import _native, native, polynomial
from ldpcollect.vdaf.errors import MalformedShare, VdafError
from ldpcollect.vdaf.field import Field, Field64, Field128, vec_add, vec_sub
from ldpcollect.vdaf.flp import Flp
from ldpcollect.vdaf.prio3 import PreparedShare, Prio3
from ldpcollect.vdaf.test_vectors import check_file
from ldpcollect.vdaf.variants import (
    prio3_count,
    prio3_histogram,
    prio3_multihot_count_vec,
    prio3_sum,
    prio3_sum_vec,
)
from ldpcollect.vdaf.xof import XofTurboShake128

FIELDS = [Field64, Field128]
VECTORS = sorted((Path(__file__).parent / "vectors").glob("*.json"))
AnyPrio3 = Prio3[Any, Any]


def test_the_compiled_module_is_built_and_the_secure_vdafs_use_it() -> None:
    """CI cannot pass on the Python fallback: the extension is a shared object and the two
    secure-mode VDAFs (and the draft's range-check variants) carry its Prio3."""
    assert Path(_native.__file__ or "").suffix == ".so"
    for vdaf in (
        answer_vdaf(100),
        pair_vdaf(100),
        prio3_sum_vec(2, 4, 7, 2),
        prio3_histogram(3, 5, 2),
        prio3_multihot_count_vec(2, 6, 3, 2),
    ):
        assert isinstance(vdaf.kernel, _native.Prio3)
        assert vdaf.reference().kernel is None
    # Field64 circuits with other gadgets stay on the reference code
    assert prio3_count(2).kernel is None
    assert prio3_sum(2, 255).kernel is None


@pytest.mark.parametrize("path", VECTORS, ids=[p.name for p in VECTORS])
def test_every_draft_vector_reproduces_through_the_compiled_path(path: Path) -> None:
    result = check_file(path, compiled=True)
    assert result.passed, result.detail


def elements(field: Field, size: int) -> st.SearchStrategy[list[int]]:
    return st.lists(
        st.integers(min_value=0, max_value=field.modulus - 1), min_size=size, max_size=size
    )


def power_of_two() -> st.SearchStrategy[int]:
    return st.sampled_from([1, 2, 4, 8, 16, 32, 64])


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(data=st.data())
def test_vector_arithmetic_matches_the_reference(field: Field, data: st.DataObject) -> None:
    n = data.draw(st.integers(min_value=0, max_value=40))
    a, b = data.draw(elements(field, n)), data.draw(elements(field, n))
    p = field.modulus
    assert native.vec_add(field, a, b) == vec_add(field, a, b)
    assert native.vec_sub(field, a, b) == vec_sub(field, a, b)
    assert native.vec_mul(field, a, b) == [x * y % p for x, y in zip(a, b, strict=True)]
    assert native.inner_product(field, a, b) == sum(x * y for x, y in zip(a, b, strict=True)) % p


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(data=st.data())
def test_extremes_of_the_field_reduce_like_the_reference(field: Field, data: st.DataObject) -> None:
    """Values next to 0 and p - 1, where carries and final subtractions happen."""
    p = field.modulus
    edge = st.sampled_from([0, 1, 2, p - 1, p - 2, p // 2, p // 2 + 1, 2**63 % p, 2**64 % p])
    a = data.draw(st.lists(edge, min_size=1, max_size=12))
    b = data.draw(st.lists(edge, min_size=len(a), max_size=len(a)))
    assert native.vec_mul(field, a, b) == [x * y % p for x, y in zip(a, b, strict=True)]
    assert native.vec_add(field, a, b) == vec_add(field, a, b)
    assert native.vec_sub(field, a, b) == vec_sub(field, a, b)


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(data=st.data())
def test_ntt_and_its_inverse_match_the_reference(field: Field, data: st.DataObject) -> None:
    n = data.draw(power_of_two())
    coeffs = data.draw(elements(field, data.draw(st.integers(min_value=0, max_value=n))))
    values = data.draw(elements(field, n))
    assert native.ntt(field, coeffs, n) == field.ntt(coeffs, n)
    assert native.ntt(field, coeffs, n, set_s=True) == field.ntt(coeffs, n, set_s=True)
    assert native.inv_ntt(field, values, n) == field.inv_ntt(values, n)


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(data=st.data())
def test_polynomial_kernels_match_the_reference(field: Field, data: st.DataObject) -> None:
    n = data.draw(power_of_two())
    values = data.draw(elements(field, n))
    [x] = data.draw(elements(field, 1))
    assert native.poly_eval(field, values, x) == polynomial.poly_eval(field, values, x)
    assert native.lagrange_eval(field, values, x) == polynomial.lagrange_eval(field, values, x)
    assert native.double_evaluations(field, values) == polynomial.double_evaluations(field, values)
    m = data.draw(st.integers(min_value=1, max_value=n))
    assert native.extend_values(field, values[:m], n) == polynomial.extend_values(
        field, values[:m], n
    )


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(
    seed=st.binary(min_size=0, max_size=64),
    dst=st.binary(max_size=40),
    binder=st.binary(max_size=400),
    length=st.integers(min_value=0, max_value=60),
)
def test_xof_expansion_matches_the_reference(
    field: Field, seed: bytes, dst: bytes, binder: bytes, length: int
) -> None:
    assert native.xof_expand(field, seed, dst, binder, length) == (
        XofTurboShake128.expand_into_vec(field, seed, dst, binder, length)
    )
    assert native.xof_bytes(seed, dst, binder, 32) == XofTurboShake128.derive_seed(
        seed, dst, binder
    )


@given(message=st.binary(max_size=700), domain=st.integers(1, 0x7F), length=st.integers(0, 400))
def test_turboshake128_matches_pycryptodome(message: bytes, domain: int, length: int) -> None:
    expected = TurboSHAKE128.new(data=message, domain=domain).read(length) if length else b""
    assert _native.turboshake128(message, domain, length) == expected


def test_bad_kernel_input_is_refused_with_the_reason() -> None:
    with pytest.raises(VdafError, match="not below the modulus"):
        native.vec_add(Field64, [Field64.modulus], [0])
    with pytest.raises(VdafError, match="not a power of two"):
        native.ntt(Field128, [1, 2, 3], 3)
    with pytest.raises(VdafError, match="do not fit an NTT of size 2"):
        native.ntt(Field128, [1, 2, 3], 2)
    with pytest.raises(VdafError, match="lengths 1 and 2"):
        native.vec_mul(Field128, [1], [1, 2])


# -- Prio3: the compiled batch against the reference, report by report ---------------------

Measure = Callable[[random.Random], Any]

CIRCUITS: list[tuple[str, Callable[[int], AnyPrio3], Measure]] = [
    ("round T=13", lambda shares: answer_vdaf(13), lambda r: [r.randrange(2) for _ in range(13)]),
    ("pair T=9", lambda shares: pair_vdaf(9), lambda r: _pair(r, 9)),
    (
        "sum_vec bits=4",
        lambda shares: prio3_sum_vec(shares, 5, 13, 3),
        lambda r: [r.randrange(14) for _ in range(5)],
    ),
    ("histogram", lambda shares: prio3_histogram(shares, 7, 2), lambda r: r.randrange(7)),
    (
        "multihot",
        lambda shares: prio3_multihot_count_vec(shares, 6, 3, 2),
        lambda r: _multihot(r, 6, 3),
    ),
]


def _pair(rng: random.Random, t: int) -> list[int]:
    r1 = [rng.randrange(2) for _ in range(t)]
    r2 = list(r1)
    zeros = [i for i, x in enumerate(r1) if x == 0]
    if zeros and rng.randrange(2):
        r2[rng.choice(zeros)] = 1
    return r1 + r2


def _multihot(rng: random.Random, length: int, weight: int) -> list[bool]:
    chosen = set(rng.sample(range(length), rng.randrange(weight + 1)))
    return [i in chosen for i in range(length)]


def _tamper(rng: random.Random, data: bytes) -> bytes:
    """One of: a flipped byte, a truncation, an element set to all ones (out of range)."""
    how = rng.randrange(3)
    if how == 0 and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
    if how == 1:
        return data[: rng.randrange(len(data) + 1)]
    return b"\xff" * 16 + data[16:]


def _same(compiled: Sequence[PreparedShare | VdafError], reference: Sequence[object]) -> None:
    """Equal results, and errors of the same kind (a malformed share or a failed proof)."""
    assert len(compiled) == len(reference)
    for ours, theirs in zip(compiled, reference, strict=True):
        if isinstance(theirs, VdafError):
            assert isinstance(ours, VdafError)
            assert isinstance(ours, MalformedShare) == isinstance(theirs, MalformedShare)
        else:
            assert ours == theirs


@pytest.mark.parametrize("name", [c[0] for c in CIRCUITS])
@settings(max_examples=25)
@given(
    seed=st.integers(min_value=0, max_value=2**32),
    shares=st.sampled_from([2, 3]),
    tamper=st.booleans(),
)
def test_prio3_batches_match_the_reference(name: str, seed: int, shares: int, tamper: bool) -> None:
    """Sharding, every aggregator's verify_init over a batch, the verifier messages and the
    aggregate shares: byte for byte the reference's, with tampered shares refused alike."""
    _, build, measure = next(c for c in CIRCUITS if c[0] == name)
    rng = random.Random(seed)
    vdaf = build(shares)
    reference = vdaf.reference()
    ctx, verify_key = rng.randbytes(rng.randrange(20)), rng.randbytes(32)
    sharded = []
    for _ in range(4):
        measurement, nonce = measure(rng), rng.randbytes(16)
        rand = rng.randbytes(vdaf.rand_size)
        ours = vdaf.shard_encoded(ctx, measurement, nonce, rand)
        assert ours == reference.shard_encoded(ctx, measurement, nonce, rand)
        sharded.append((nonce, *ours))
    prepared = []
    for agg_id in range(vdaf.shares):
        batch = [(nonce, public, inputs[agg_id]) for nonce, public, inputs in sharded]
        if tamper:
            i = rng.randrange(len(batch))
            nonce, public, share = batch[i]
            batch[i] = (nonce, public, _tamper(rng, share))
        ours_prep = vdaf.verify_init_encoded(verify_key, ctx, agg_id, batch)
        _same(ours_prep, reference.verify_init_encoded(verify_key, ctx, agg_id, batch))
        prepared.append(ours_prep)
    per_report = []
    for i in range(len(sharded)):
        row = [p[i] for p in prepared]
        per_report += [[r.verifier_share for r in row if isinstance(r, PreparedShare)]]
        if len(per_report[-1]) < vdaf.shares:
            per_report.pop()
    if tamper and per_report and rng.randrange(2):
        per_report[0][0] = _tamper(rng, per_report[0][0])
    messages = vdaf.verifier_messages_encoded(ctx, per_report)
    expected = reference.verifier_messages_encoded(ctx, per_report)
    assert [m if isinstance(m, bytes) else None for m in messages] == [
        m if isinstance(m, bytes) else None for m in expected
    ]
    if not tamper:
        assert all(isinstance(m, bytes) for m in messages)
    for agg_prepared in prepared:
        outs = [p.out_share for p in agg_prepared if isinstance(p, PreparedShare)]
        assert vdaf.agg_encoded(outs) == reference.agg_encoded(outs)


class LyingPair(SamplingPair):
    """Claims weight 3: an encoding outside 0/1, as a dishonest device would send."""

    def encode(self, measurement: Sequence[int]) -> list[int]:
        return [*measurement, 3]


def test_a_lying_measurement_is_sharded_alike_and_refused_alike() -> None:
    vdaf = Prio3(PRIO3_SAMPLING_PAIR, Flp(LyingPair(Field128, 4, 3)), 2)
    reference = vdaf.reference()
    assert vdaf.kernel is not None
    rng = random.Random(5)
    nonce, rand, key = rng.randbytes(16), rng.randbytes(vdaf.rand_size), rng.randbytes(32)
    lie = [0] * 4 + [1] * 4
    public, shares = vdaf.shard_encoded(b"", lie, nonce, rand)
    assert (public, shares) == reference.shard_encoded(b"", lie, nonce, rand)
    verifier_shares = []
    for agg_id, share in enumerate(shares):
        [ours] = vdaf.verify_init_encoded(key, b"", agg_id, [(nonce, public, share)])
        assert isinstance(ours, PreparedShare)
        assert [ours] == reference.verify_init_encoded(key, b"", agg_id, [(nonce, public, share)])
        verifier_shares.append(ours.verifier_share)
    [message] = vdaf.verifier_messages_encoded(b"", [verifier_shares])
    assert isinstance(message, VdafError) and "verifier check failed" in str(message)
    [expected] = reference.verifier_messages_encoded(b"", [verifier_shares])
    assert isinstance(expected, VdafError)


class AnyElementsPair(SamplingPair):
    """Encodes any field elements as they are (weight included): wire values off 0/1, where
    the compiled prover takes none of its shortcuts for an honest measurement, or any 0/1
    pattern, where it takes them in every combination."""

    def encode(self, measurement: Sequence[int]) -> list[int]:
        return list(measurement)


@settings(max_examples=40)
@given(data=st.data())
def test_a_measurement_of_any_field_elements_is_sharded_alike(data: st.DataObject) -> None:
    targets = data.draw(st.integers(min_value=1, max_value=12))
    vdaf = Prio3(PRIO3_SAMPLING_PAIR, Flp(AnyElementsPair(Field128, targets, 3)), 2)
    assert vdaf.kernel is not None
    p = Field128.modulus
    edge = st.sampled_from([0, 1, 2, p - 1, p - 2, 2**64, 2**127])
    element: st.SearchStrategy[int]
    if data.draw(st.booleans()):
        element = st.sampled_from([0, 1])
    else:
        element = st.one_of(edge, st.integers(min_value=0, max_value=p - 1))
    measurement = data.draw(st.lists(element, min_size=2 * targets + 1, max_size=2 * targets + 1))
    nonce = data.draw(st.binary(min_size=16, max_size=16))
    rand = data.draw(st.binary(min_size=vdaf.rand_size, max_size=vdaf.rand_size))
    ours = vdaf.shard_encoded(b"ctx", measurement, nonce, rand)
    assert ours == vdaf.reference().shard_encoded(b"ctx", measurement, nonce, rand)


@settings(max_examples=40)
@given(seed=st.integers(min_value=0, max_value=2**32))
def test_the_leaders_share_check_refuses_exactly_what_decoding_refuses(seed: int) -> None:
    rng = random.Random(seed)
    vdaf = answer_vdaf(13)
    _, shares = vdaf.shard_encoded(b"", [1] * 13, rng.randbytes(16), rng.randbytes(vdaf.rand_size))
    share = _tamper(rng, shares[0]) if rng.randrange(4) else shares[0]
    try:
        vdaf.decode_input_share(0, share)
    except VdafError as error:
        with pytest.raises(VdafError) as raised:
            vdaf.check_input_share(0, share)
        assert str(raised.value) == str(error)
    else:
        vdaf.check_input_share(0, share)
