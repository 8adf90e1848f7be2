"""Types of the compiled HPKE Open (ldpcollect/secure/_native_hpke.c)."""

from collections.abc import Sequence

def open_uploads(
    private_key: bytes,
    prefix: bytes,
    query_id: bytes,
    round: int,
    leader_config: int,
    helper_config: int,
    helper_size: int,
    bodies: Sequence[bytes],
) -> list[tuple[bytes, bytes, bytes, bytes] | None]: ...
def open_shares(
    private_key: bytes,
    prefix: bytes,
    query_id: bytes,
    round: int,
    config_id: int,
    items: Sequence[tuple[bytes, bytes, bytes]],
) -> list[bytes | None]: ...
def seal_shares(
    public_key: bytes,
    prefix: bytes,
    query_id: bytes,
    round: int,
    config_id: int,
    items: Sequence[tuple[bytes, bytes, bytes]],
    ikms: bytes,
) -> list[bytes]: ...
def x25519(
    scalars: Sequence[bytes], points: Sequence[bytes], lanes: bool
) -> list[bytes | None]: ...
def set_lanes(enabled: bool) -> bool: ...
def lanes_available() -> bool: ...
