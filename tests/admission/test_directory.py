"""The issuer directory of RFC 9578 section 4: encoding, key choice, refusals."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from ldpcollect.admission.directory import DirectoryKey, IssuerDirectory
from ldpcollect.admission.errors import EncodingError, UnknownKeyError
from ldpcollect.admission.issuer import Issuer
from ldpcollect.admission.token_key import TokenPublicKey, TokenSigningKey

# The complete "token-key" of the draft's directory example (section 4), line breaks removed.
DRAFT_EXAMPLE_KEY = (
    "MIIBUjA9BgkqhkiG9w0BAQowMKANMAsGCWCGSAFlAwQCAqEaMBgGCSqGSIb3DQEBCDALBglghkgBZQMEAgKiAwIB"
    "MAOCAQ8AMIIBCgKCAQEAmKHGAMyeoJt1pj3n7xTtqAPr_DhZAPhJM7Pc8ENR2BzdZwPTTF7KFKms5wt-mL01at0S"
    "C-cdBuIj6WYK8Ovz0AyaBuvTvW6SKCh7ZPXEqCGRsq5I0nthREtrYkGo113oMVPVp3sy4VHPgzd8KdzTLGzOrjiU"
    "OsSFWbjf21iaVjXJ2VdwdS-8O-430wkucYjGeOJwi8rWx_ZkcHtav0S67Q_SlExJel6nyRzpuuID9OQm1nxfs1Z4"
    "PhWBzt93T2ozTnda3OklF5n0pIXD6bttmTekIw_8Xx2LMis0jfJ1QL99aA-muXRFN4ZUwORrF7cAcCUD_-56_6fh"
    "9s34FmqBGwIDAQAB"
)
NOT_BEFORE = 1686913811


def draft_example(second_key: TokenPublicKey) -> str:
    """The draft's example directory: a staged key first, the one in use second."""
    return json.dumps(
        {
            "issuer-request-uri": "https://issuer.example.net/request",
            "token-keys": [
                {"token-type": 2, "token-key": DRAFT_EXAMPLE_KEY, "not-before": NOT_BEFORE},
                {
                    "token-type": 2,
                    "token-key": base64.urlsafe_b64encode(second_key.spki).decode(),
                },
            ],
        }
    )


def test_the_drafts_example_picks_the_staged_key_only_from_its_not_before(
    signing_key: TokenSigningKey,
) -> None:
    directory = IssuerDirectory.from_json(draft_example(signing_key.public))
    staged = directory.token_keys[0].token_key
    assert staged.spki == base64.urlsafe_b64decode(DRAFT_EXAMPLE_KEY)
    assert directory.key_at(NOT_BEFORE - 1) == signing_key.public
    assert directory.key_at(NOT_BEFORE) == staged
    assert IssuerDirectory.from_json(directory.to_json()) == directory


def test_an_issuer_publishes_its_epoch_key(signing_key: TokenSigningKey) -> None:
    issuer = Issuer(tokens_per_epoch=2, key=signing_key)
    published = IssuerDirectory.from_json(issuer.directory("https://issuer.test/request").to_json())
    assert published.key_at(0) == issuer.public_key
    assert published.issuer_request_uri == "https://issuer.test/request"


def test_keys_of_other_token_types_are_skipped(signing_key: TokenSigningKey) -> None:
    document = json.loads(draft_example(signing_key.public))
    document["token-keys"].insert(0, {"token-type": 1, "token-key": "AAAA"})
    directory = IssuerDirectory.from_json(json.dumps(document))
    assert len(directory.token_keys) == 2


def test_no_usable_key_is_an_error(signing_key: TokenSigningKey) -> None:
    directory = IssuerDirectory("https://i.test/", (DirectoryKey(signing_key.public, 100),))
    with pytest.raises(UnknownKeyError, match="no token key usable at 99"):
        directory.key_at(99)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: "not json", "not JSON"),
        (lambda d: "[]", "must be a JSON object"),
        (lambda d: json.dumps({**d, "issuer-request-uri": 3}), "issuer-request-uri"),
        (lambda d: json.dumps({**d, "token-keys": {}}), "token-keys list"),
        (lambda d: json.dumps({**d, "token-keys": [1]}), r"token-keys\[0\] must be"),
        (
            lambda d: json.dumps({**d, "token-keys": [{"token-type": "2"}]}),
            r"token-keys\[0\].token-type must be an integer",
        ),
        (
            lambda d: json.dumps(
                {**d, "token-keys": [{"token-type": 2, "token-key": DRAFT_EXAMPLE_KEY[:-1]}]}
            ),
            "base64url with padding",
        ),
        (
            lambda d: json.dumps(
                {
                    **d,
                    "token-keys": [
                        {"token-type": 2, "token-key": DRAFT_EXAMPLE_KEY.replace("_", "/")}
                    ],
                }
            ),
            "base64url string",
        ),
        (
            lambda d: json.dumps(
                {
                    **d,
                    "token-keys": [
                        {"token-type": 2, "token-key": DRAFT_EXAMPLE_KEY, "not-before": "soon"}
                    ],
                }
            ),
            "not-before must be an integer",
        ),
        (
            lambda d: json.dumps({**d, "token-keys": [{"token-type": 2, "token-key": "AAAA"}]}),
            "expected DER tag",
        ),
    ],
)
def test_malformed_directories_are_refused_with_the_field_named(
    change: Callable[[dict[str, Any]], str], message: str, signing_key: TokenSigningKey
) -> None:
    document = json.loads(draft_example(signing_key.public))
    with pytest.raises(EncodingError, match=message):
        IssuerDirectory.from_json(change(document))
