"""Keys and vectors the admission tests share: the RFC 9578 issuer key, and one fresh key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ldpcollect.admission.token_key import TokenSigningKey

VECTORS = Path(__file__).parent / "vectors"


def load_vectors(name: str) -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = json.loads((VECTORS / name).read_text())
    return vectors


ISSUANCE_VECTORS = load_vectors("privacypass-issuance-type2.json")


@pytest.fixture(scope="session")
def signing_key() -> TokenSigningKey:
    """The issuer key of the RFC 9578 type-2 test vectors (all five share it)."""
    return TokenSigningKey.from_pem(bytes.fromhex(ISSUANCE_VECTORS[0]["skS"]))


@pytest.fixture(scope="session")
def other_key() -> TokenSigningKey:
    return TokenSigningKey.generate()
