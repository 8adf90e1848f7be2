"""HPKE sealing of the secure mode's shares (single-shot base mode, RFC 9180), with DAP's
mandatory suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM.

`cryptography`'s public HPKE API has no aad argument, so the report metadata is bound
through `info` instead: a domain-separation label, the recipient's role byte, and the
SHA-256 of a length-prefixed encoding of the metadata. The key schedule derives the AEAD key
from `info`, so a ciphertext sealed for one (role, query, round, report, public share) fails
to open under any other: the metadata need not be secret, only agreed on.

Ciphertext layout: config id (1 byte) || enc (32 bytes) || AEAD payload (plaintext + 16).

An aggregator opens a batch of input shares in one compiled call (`open_bound_shares`, on
OpenSSL, without the interpreter lock, each share's info bound in the same call:
`_native_hpke.c`); `cryptography`'s HPKE (`open_input_share`) is the reference it is tested
against.
"""

from __future__ import annotations

import hashlib
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hpke, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from ldpcollect.secure import _native_hpke
from ldpcollect.secure.hpke_seal import IKM_SIZE, seal_base
from ldpcollect.secure.share_binding import ShareBinding

SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
PUBLIC_KEY_SIZE = 32
PRIVATE_KEY_SIZE = 32
ENC_SIZE = 32
TAG_SIZE = 16
CONFIG_SIZE = 1 + PUBLIC_KEY_SIZE

ROLE_COLLECTOR = 0x01
ROLE_LEADER = 0x02
ROLE_HELPER = 0x03
ROLES = {ROLE_LEADER: "leader", ROLE_HELPER: "helper", ROLE_COLLECTOR: "collector"}

INPUT_SHARE_LABEL = b"ldpcollect-secure-v1 input share"
AGGREGATE_SHARE_LABEL = b"ldpcollect-secure-v2 aggregate share"


class SealingError(ValueError):
    """A config, key or ciphertext that must be refused. The message names what is wrong in
    size or form, never which bound metadata field differed (a failed open says only that)."""


@dataclass(frozen=True)
class HpkeConfig:
    """What an aggregator (or the collector) publishes: a 1-byte config id and its X25519
    public key."""

    config_id: int
    public_key: bytes

    def __post_init__(self) -> None:
        _check_config_id(self.config_id)
        _check_size("an X25519 public key", self.public_key, PUBLIC_KEY_SIZE)

    def encode(self) -> bytes:
        return bytes([self.config_id]) + self.public_key

    @classmethod
    def decode(cls, encoded: bytes) -> HpkeConfig:
        _check_size("an HPKE config", encoded, CONFIG_SIZE)
        return cls(encoded[0], encoded[1:])


@dataclass(frozen=True)
class HpkeKeyPair:
    """A config with its private key. A server persists `private_bytes()` (or the PEM) and
    the config id, and reloads them with `from_private_bytes` / `from_pem`."""

    config: HpkeConfig
    private_key: X25519PrivateKey

    def private_bytes(self) -> bytes:
        return self.private_key.private_bytes_raw()

    def private_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @classmethod
    def from_private_bytes(cls, config_id: int, raw: bytes) -> HpkeKeyPair:
        _check_size("an X25519 private key", raw, PRIVATE_KEY_SIZE)
        return cls._of(config_id, X25519PrivateKey.from_private_bytes(raw))

    @classmethod
    def from_pem(cls, config_id: int, pem: bytes) -> HpkeKeyPair:
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as error:
            raise SealingError(f"not an unencrypted PEM private key: {error}") from None
        if not isinstance(key, X25519PrivateKey):
            raise SealingError(f"the PEM key must be X25519, got {type(key).__name__}")
        return cls._of(config_id, key)

    @classmethod
    def _of(cls, config_id: int, key: X25519PrivateKey) -> HpkeKeyPair:
        return cls(HpkeConfig(config_id, key.public_key().public_bytes_raw()), key)


def generate_key_pair(config_id: int) -> HpkeKeyPair:
    _check_config_id(config_id)
    return HpkeKeyPair._of(config_id, X25519PrivateKey.generate())


# -- device -> aggregator ---------------------------------------------------------------


def input_share_info(
    role: int, query_id: str, round: int, report_id: bytes, public_share: bytes
) -> bytes:
    """The HPKE info binding an input share to its recipient and report."""
    _check_role(role, (ROLE_LEADER, ROLE_HELPER))
    digest = _metadata_digest(query_id.encode(), _round_bytes(round), report_id, public_share)
    return INPUT_SHARE_LABEL + bytes([role]) + digest


def seal_input_share(
    config: HpkeConfig,
    role: int,
    query_id: str,
    round: int,
    report_id: bytes,
    public_share: bytes,
    plaintext: bytes,
    ikm_e: bytes | None = None,
) -> bytes:
    """`ikm_e`: the ephemeral key's input keying material, given only to reproduce a
    conformance vector (`hpke_seal`); None draws a fresh ephemeral key."""
    info = input_share_info(role, query_id, round, report_id, public_share)
    return _seal(config, info, plaintext, ikm_e)


def seal_input_shares(
    config: HpkeConfig,
    role: int,
    query_id: str,
    round: int,
    items: Sequence[tuple[bytes, bytes, bytes]],
    ikms: bytes | None = None,
) -> list[bytes]:
    """`seal_input_share` for many (report id, public share, plaintext) triples of one query
    and round to one recipient, in one compiled call (a fleet's batch: the ephemeral keys'
    X25519s eight at a time where the CPU can). `ikms`: each ephemeral key's 32 bytes of
    input keying material, given only to reproduce vectors; None draws them fresh."""
    _check_role(role, (ROLE_LEADER, ROLE_HELPER))
    _round_bytes(round)
    for report_id, _, _ in items:
        _check_size("a report id", report_id, 16)
    if ikms is None:
        ikms = secrets.token_bytes(IKM_SIZE * len(items))
    prefix = INPUT_SHARE_LABEL + bytes([role])
    try:
        return _native_hpke.seal_shares(
            config.public_key, prefix, query_id.encode(), round, config.config_id, items, ikms
        )
    except ValueError as error:
        raise SealingError(str(error)) from None


def open_input_share(
    key_pair: HpkeKeyPair,
    role: int,
    query_id: str,
    round: int,
    report_id: bytes,
    public_share: bytes,
    ciphertext: bytes,
) -> bytes:
    info = input_share_info(role, query_id, round, report_id, public_share)
    return _open(key_pair, info, ciphertext)


def open_input_shares(
    key_pair: HpkeKeyPair,
    role: int,
    query_id: str,
    round: int,
    items: Sequence[tuple[bytes, bytes, bytes]],
) -> list[bytes | SealingError]:
    """`open_input_share` for a batch of one query's (report id, public share, ciphertext)
    triples: per item its plaintext, or the error `open_input_share` raises for it. The batch
    is opened in one compiled call (`open_bound_shares`); an item it leaves is opened again
    by the reference, which names the error."""
    results: list[bytes | SealingError] = []
    opened = open_bound_shares(key_pair, role, query_id, round, items)
    for item, share in zip(items, opened, strict=True):
        if share is None:
            try:
                share = open_input_share(key_pair, role, query_id, round, *item)
            except SealingError as error:
                results.append(error)
                continue
        results.append(share)
    return results


def open_bound_shares(
    key_pair: HpkeKeyPair,
    role: int,
    query_id: str,
    round: int,
    items: Sequence[tuple[bytes, bytes, bytes]],
) -> list[bytes | None]:
    """(report id, public share, ciphertext) triples of one query and round opened in one
    compiled call, each share's info bound in the same call: per item its plaintext, or None
    where the reference must decide (an id that is not 16 bytes, a short ciphertext, another
    config id, or one that does not open)."""
    _check_role(role, (ROLE_LEADER, ROLE_HELPER))
    _round_bytes(round)  # in range, or the reference's error
    prefix = INPUT_SHARE_LABEL + bytes([role])
    return _native_hpke.open_shares(
        key_pair.private_bytes(), prefix, query_id.encode(), round, key_pair.config.config_id, items
    )


# -- aggregator -> collector ------------------------------------------------------------


def aggregate_share_info(role: int, binding: ShareBinding) -> bytes:
    """The HPKE info binding an aggregate share to the aggregator that made it and to what
    the collector relies on: the query and its parameters, the report count and the noise
    this aggregator added (`share_binding`)."""
    _check_role(role, (ROLE_LEADER, ROLE_HELPER))
    _round_bytes(binding.round)
    return AGGREGATE_SHARE_LABEL + bytes([role]) + _metadata_digest(binding.encode())


def seal_aggregate_share(
    collector: HpkeConfig, role: int, binding: ShareBinding, plaintext: bytes
) -> bytes:
    return _seal(collector, aggregate_share_info(role, binding), plaintext)


def open_aggregate_share(
    collector: HpkeKeyPair, role: int, binding: ShareBinding, ciphertext: bytes
) -> bytes:
    return _open(collector, aggregate_share_info(role, binding), ciphertext)


# -- internals --------------------------------------------------------------------------


def config_id_of(ciphertext: bytes) -> int:
    """The config id a ciphertext names (its first byte), so a server can pick its key."""
    if not ciphertext:
        raise SealingError("an empty ciphertext has no config id")
    return ciphertext[0]


def _seal(config: HpkeConfig, info: bytes, plaintext: bytes, ikm_e: bytes | None = None) -> bytes:
    if ikm_e is not None:
        return bytes([config.config_id]) + seal_base(config.public_key, info, b"", plaintext, ikm_e)
    public_key = X25519PublicKey.from_public_bytes(config.public_key)
    return bytes([config.config_id]) + SUITE.encrypt(plaintext, public_key, info=info)


DOES_NOT_OPEN = (
    "the ciphertext does not open: tampered, or sealed for another recipient, "
    "query, round, report or public share"
)


def _check_ciphertext(key_pair: HpkeKeyPair, ciphertext: bytes) -> None:
    minimum = 1 + ENC_SIZE + TAG_SIZE
    if len(ciphertext) < minimum:
        raise SealingError(f"a ciphertext is at least {minimum} bytes, got {len(ciphertext)}")
    config_id = ciphertext[0]
    if config_id != key_pair.config.config_id:
        raise SealingError(
            f"unknown HPKE config id {config_id} (this key's id is {key_pair.config.config_id})"
        )


def _open(key_pair: HpkeKeyPair, info: bytes, ciphertext: bytes) -> bytes:
    _check_ciphertext(key_pair, ciphertext)
    try:
        return SUITE.decrypt(ciphertext[1:], key_pair.private_key, info=info)
    except InvalidTag:
        raise SealingError(DOES_NOT_OPEN) from None


_U32 = struct.Struct(">I")


def _metadata_digest(*fields: bytes) -> bytes:
    """SHA-256 over the fields, each prefixed with its 4-byte big-endian length, so no two
    different tuples encode alike."""
    h = hashlib.sha256()
    for field in fields:
        h.update(struct.pack(">I", len(field)))
        h.update(field)
    return h.digest()


def _round_bytes(round: int) -> bytes:
    if isinstance(round, bool) or not 0 <= round < 2**32:
        raise SealingError(f"round must be an integer in [0, 2**32), got {round!r}")
    return struct.pack(">I", round)


def _check_role(role: int, allowed: tuple[int, ...]) -> None:
    if role not in allowed:
        names = ", ".join(f"{r:#04x} ({ROLES[r]})" for r in allowed)
        raise SealingError(f"role must be one of {names}, got {role!r}")


def _check_config_id(config_id: int) -> None:
    if isinstance(config_id, bool) or not 0 <= config_id < 256:
        raise SealingError(f"config id must be an integer in [0, 256), got {config_id!r}")


def _check_size(what: str, data: bytes, expected: int) -> None:
    if len(data) != expected:
        raise SealingError(f"{what} is {expected} bytes, got {len(data)}")
