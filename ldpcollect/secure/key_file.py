"""An HPKE key pair kept in a 0600 file: one config id byte then the 32-byte X25519 private
key. Aggregators keep theirs beside their database, the collector (the operator's CLI) in
its own file."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ldpcollect.secure.sealing import PRIVATE_KEY_SIZE, HpkeConfig, HpkeKeyPair, generate_key_pair


def load_or_create_key_pair(path: Path) -> HpkeKeyPair:
    """The key pair in `path`, or a fresh one (random config id) written there atomically with
    mode 0600. A file of the wrong size, or readable by others, is refused (OSError)."""
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise OSError(
                f"the HPKE key file {path} is readable by others (mode {mode:o}); chmod 600 it"
            )
        data = path.read_bytes()
        if len(data) != 1 + PRIVATE_KEY_SIZE:
            raise OSError(f"the HPKE key file {path} is {len(data)} bytes, not 33")
        return HpkeKeyPair.from_private_bytes(data[0], data[1:])
    pair = generate_key_pair(secrets.randbelow(256))
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, bytes([pair.config.config_id]) + pair.private_bytes())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return pair


def public_config_path(key_file: Path) -> Path:
    """Where an aggregator publishes its config beside its key: `X.key` -> `X.config`."""
    return key_file.with_suffix(".config")


def write_public_config(path: Path, config: HpkeConfig) -> None:
    """The config as one hex line (public: devices may ship it pinned), written atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(config.encode().hex() + "\n")
    os.replace(tmp, path)


def read_public_config(path: Path) -> HpkeConfig:
    """A published config (one hex line); OSError naming the file when it is not one."""
    try:
        text = path.read_text().strip()
        return HpkeConfig.decode(bytes.fromhex(text))
    except (ValueError, UnicodeDecodeError) as error:
        raise OSError(
            f"{path} is not an HPKE config (one line: config id and X25519 public key in "
            f"hex, 66 characters): {error}"
        ) from None
