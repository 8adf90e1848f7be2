"""Enrollment secrets: each device id's secret is HMAC-SHA256(enrollment key, device id).

The operator keeps one enrollment key (a 0600 file beside the issuer's keys) and hands each
device its secret when enrolling it (`ldpcollect issuer enroll DEVICE_ID`); the issuer checks
a presented secret by recomputing it, so it stores nothing per device but the quota. A device
id is what the quota counts: one secret, one identity, K tokens per epoch.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path

from ldpcollect.admission.private_file import write_private

MAX_DEVICE_ID_CHARS = 128


def load_or_create_key(path: Path | str) -> bytes:
    """The enrollment key at `path`, created (32 random bytes, mode 0600) if absent."""
    path = Path(path)
    if path.exists():
        data = path.read_bytes()
        if len(data) < 32:
            raise ValueError(f"the enrollment key {path} is shorter than 32 bytes")
        return data
    key = secrets.token_bytes(32)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(path, key)
    return key


def device_secret(key: bytes, device_id: str) -> str:
    """The secret a device presents (hex)."""
    return hmac.new(key, device_id.encode("utf-8"), hashlib.sha256).hexdigest()


def valid_device_id(device_id: str) -> bool:
    return 0 < len(device_id) <= MAX_DEVICE_ID_CHARS and device_id.isprintable()


def check_secret(key: bytes, device_id: str, secret: str) -> bool:
    return valid_device_id(device_id) and hmac.compare_digest(
        device_secret(key, device_id).encode(), secret.strip().encode()
    )
