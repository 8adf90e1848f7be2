"""Every decoder either returns a structure that re-encodes to its input or raises
EncodingError, whatever the bytes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpcollect.admission.errors import EncodingError
from ldpcollect.admission.token_key import TokenPublicKey
from ldpcollect.admission.tokens import (
    TOKEN_LENGTH,
    Token,
    TokenChallenge,
    TokenRequest,
    TokenResponse,
)
from tests.admission.conftest import ISSUANCE_VECTORS

VECTOR = ISSUANCE_VECTORS[0]


def mutations(valid: bytes) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, and the valid encoding with one byte changed, cut or extended."""
    flipped = st.tuples(st.integers(0, len(valid) - 1), st.integers(1, 255)).map(
        lambda t: valid[: t[0]] + bytes([valid[t[0]] ^ t[1]]) + valid[t[0] + 1 :]
    )
    cut = st.integers(0, len(valid) - 1).map(lambda n: valid[:n])
    extended = st.binary(min_size=1, max_size=4).map(lambda extra: valid + extra)
    return st.one_of(st.binary(max_size=400), flipped, cut, extended)


DECODERS: dict[str, tuple[Callable[[bytes], object], bytes]] = {
    "challenge": (TokenChallenge.decode, bytes.fromhex(VECTOR["token_challenge"])),
    "request": (TokenRequest.decode, bytes.fromhex(VECTOR["token_request"])),
    "response": (TokenResponse.decode, bytes.fromhex(VECTOR["token_response"])),
    "token": (Token.decode, bytes.fromhex(VECTOR["token"])),
    "token key": (TokenPublicKey, bytes.fromhex(VECTOR["pkS"])),
}


def encoded(value: object) -> bytes:
    if isinstance(value, TokenPublicKey):
        return value.spki
    assert isinstance(value, TokenChallenge | TokenRequest | TokenResponse | Token)
    return value.encode()


@pytest.mark.parametrize("name", list(DECODERS))
def test_decoders_accept_exactly_their_encodings(name: str) -> None:
    decode, valid = DECODERS[name]

    @given(mutations(valid))
    def check(data: bytes) -> None:
        try:
            value = decode(data)
        except EncodingError:
            return
        assert encoded(value) == data

    check()


def test_token_length_is_354_bytes() -> None:
    assert TOKEN_LENGTH == 354 == len(bytes.fromhex(VECTOR["token"]))
