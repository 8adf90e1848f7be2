"""Field64 and Field128: the draft's parameters, field laws, encoding, roots of unity, NTT."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.field import Field, Field64, Field128, vec_add, vec_sub

FIELDS = [Field64, Field128]


def elements(field: Field) -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=field.modulus - 1)


def test_parameters_are_the_drafts() -> None:
    assert Field64.modulus == 2**32 * 4294967295 + 1 == 0xFFFFFFFF00000001
    assert Field128.modulus == 2**66 * 4611686018427387897 + 1
    assert (Field64.encoded_size, Field128.encoded_size) == (8, 16)
    assert Field64.modulus.bit_length() == 64
    assert Field128.modulus.bit_length() == 128


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_modulus_is_prime_by_fermat_and_generator_has_exactly_gen_order(field: Field) -> None:
    p = field.modulus
    for witness in (2, 3, 5, 7, 11, 13):
        assert pow(witness, p - 1, p) == 1
    assert pow(field.generator, field.gen_order, p) == 1
    assert pow(field.generator, field.gen_order // 2, p) == p - 1


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(data=st.data())
def test_inverse_multiplies_to_one(field: Field, data: st.DataObject) -> None:
    x = data.draw(st.integers(min_value=1, max_value=field.modulus - 1))
    assert x * field.inv(x) % field.modulus == 1


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_zero_has_no_inverse(field: Field) -> None:
    with pytest.raises(VdafError, match="zero has no inverse"):
        field.inv(0)


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(data=st.data())
def test_vector_add_and_sub_are_inverse_and_commutative(field: Field, data: st.DataObject) -> None:
    n = data.draw(st.integers(min_value=0, max_value=8))
    a = data.draw(st.lists(elements(field), min_size=n, max_size=n))
    b = data.draw(st.lists(elements(field), min_size=n, max_size=n))
    assert vec_add(field, a, b) == vec_add(field, b, a)
    assert vec_sub(field, vec_add(field, a, b), b) == a
    assert all(0 <= x < field.modulus for x in vec_sub(field, a, b))


def test_vectors_of_different_lengths_are_refused() -> None:
    with pytest.raises(VdafError, match="lengths 2 and 1"):
        vec_add(Field64, [1, 2], [3])


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(data=st.data())
def test_encoding_round_trips_little_endian(field: Field, data: st.DataObject) -> None:
    vec = data.draw(st.lists(elements(field), max_size=6))
    encoded = field.encode_vec(vec)
    assert len(encoded) == len(vec) * field.encoded_size
    assert field.decode_vec(encoded) == vec
    if vec:
        assert int.from_bytes(encoded[: field.encoded_size], "little") == vec[0]


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_decoding_refuses_ragged_input_and_values_past_the_modulus(field: Field) -> None:
    with pytest.raises(VdafError, match="not a whole number"):
        field.decode_vec(bytes(field.encoded_size + 1))
    with pytest.raises(VdafError, match="not below the"):
        field.decode_vec(field.modulus.to_bytes(field.encoded_size, "little"))
    with pytest.raises(VdafError, match="must be 16 bytes"):
        field.decode_vec_of_length(bytes(8), 16 // field.encoded_size, "share")


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@pytest.mark.parametrize("n", [1, 2, 4, 16, 256])
def test_nth_root_is_a_primitive_nth_root_of_unity(field: Field, n: int) -> None:
    w = field.nth_root(n)
    assert pow(w, n, field.modulus) == 1
    if n > 1:
        assert pow(w, n // 2, field.modulus) == field.modulus - 1
    assert field.nth_root_powers(n) == [pow(w, i, field.modulus) for i in range(n)]


def test_roots_are_refused_for_sizes_that_are_not_powers_of_two_or_too_large() -> None:
    with pytest.raises(VdafError, match="not a power of two"):
        Field64.nth_root(12)
    with pytest.raises(VdafError, match="no 8589934592-th root"):
        Field64.nth_root(2**33)


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
@given(data=st.data())
def test_ntt_evaluates_at_the_roots_and_inverts(field: Field, data: st.DataObject) -> None:
    n = data.draw(st.sampled_from([1, 2, 4, 8, 16]))
    coeffs = data.draw(st.lists(elements(field), min_size=1, max_size=n))
    p = field.modulus

    def horner(x: int) -> int:
        return sum(c * pow(x, i, p) for i, c in enumerate(coeffs)) % p

    roots = field.nth_root_powers(n)
    assert field.ntt(coeffs, n) == [horner(w) for w in roots]
    s = field.nth_root(2 * n)
    assert field.ntt(coeffs, n, set_s=True) == [horner(s * w % p) for w in roots]
    assert field.inv_ntt(field.ntt(coeffs, n), n) == coeffs + [0] * (n - len(coeffs))
