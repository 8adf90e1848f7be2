"""Types of the compiled HPKE Open (ldpcollect/secure/_native_hpke.c)."""

from collections.abc import Sequence

def open_base(private_key: bytes, items: Sequence[tuple[bytes, bytes]]) -> list[bytes | None]: ...
