"""Each aggregator's HPKE key pair, generated once and kept in a 0600 file beside its
database (`ldpcollect.secure.key_file`)."""

from __future__ import annotations

from pathlib import Path

from ldpcollect.secure.key_file import load_or_create_key_pair

__all__ = ["key_path", "load_or_create_key_pair"]


def key_path(main_db: str | Path, role: str) -> Path:
    path = Path(main_db)
    return path.with_name(f"{path.name}.hpke-{role}.key")
