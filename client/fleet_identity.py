"""Stable device identities for file fleets: the same person in a corrected file is the same
device, so a rerun is deduplicated (or refused) by the aggregator, never counted again.

Each row of a file fleet has a *name*: its device id column when the file has one, else a hash
of the row's content (the two coordinates as an unordered pair, so a file fixed for swapped
lat/lon names the same devices; the other cells as written; the k-th copy of an identical row
is its own device) and the --seed. A name alone is guessable from a location, so what reaches
the aggregator is keyed by a per-query secret, HMAC(fleet key, query id): a device's pseudonym
and report ids are HMACs of its name under that secret, unlinkable across queries and
unguessable by the server. The fleet key is a random file kept by the operator
(`default_fleet_key_path`); a rerun from another machine needs a copy of it.

Answers are drawn per bucket of names (the first byte of each device's keyed hash, 256
buckets), each bucket from a generator seeded by the secret and the bucket's sorted names: the
same devices draw the same answers in any row order. A device's draws depend on its own
location and its place in its bucket only (the mechanisms consume a generator alike whatever
the locations), so with a device id column a corrected location changes that device's answers
alone, and the aggregator refuses just that device as "already reported". Without one, a
corrected row is a new name: its bucket (about 1/256 of the file) draws anew, and the
aggregator refuses that bucket's other devices too rather than counting anyone twice.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ldpcollect.errors import ParameterError

NAME_BYTES = 32
KEY_FILE_BYTES = 32
BUCKETS = 256
Names = npt.NDArray[np.uint8]  # (n, NAME_BYTES)


def state_dir() -> Path:
    """Where the CLI keeps an operator's fleet key and default fleet states:
    $LDPCOLLECT_STATE_DIR, else $XDG_STATE_HOME/ldpcollect, else ~/.local/state/ldpcollect."""
    explicit = os.environ.get("LDPCOLLECT_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ldpcollect"


def cache_dir() -> Path:
    """Where the CLI keeps what it can make again (the land mask): $LDPCOLLECT_CACHE_DIR, else
    $XDG_CACHE_HOME/ldpcollect, else ~/.cache/ldpcollect."""
    explicit = os.environ.get("LDPCOLLECT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ldpcollect"


def default_fleet_key_path() -> Path:
    return state_dir() / "fleet.key"


def load_or_create_fleet_key(path: Path) -> bytes:
    """The operator's fleet key: read it, or create it (random, 0600) on first use."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = os.urandom(KEY_FILE_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another run created it meanwhile: use that one
            return load_or_create_fleet_key(path)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        return key
    except OSError as exc:
        raise ParameterError("--fleet-key", str(path), "a readable key file", str(exc)) from exc
    if len(key) != KEY_FILE_BYTES:
        raise ParameterError(
            "--fleet-key", str(path), f"a {KEY_FILE_BYTES}-byte key file", f"{len(key)} bytes"
        )
    return key


def row_names(contents: list[bytes], seed: int | None) -> Names:
    """Each row's name: SHA-256 of its canonical content, its copy number among identical rows
    and the seed (another --seed is another set of devices)."""
    seen: dict[bytes, int] = {}
    out = np.empty((len(contents), NAME_BYTES), dtype=np.uint8)
    salt = str(seed or 0).encode()
    for i, content in enumerate(contents):
        copy = seen.get(content, 0)
        seen[content] = copy + 1
        digest = hashlib.sha256(
            b"ldpcollect device\0" + salt + b"\0" + content + b"\0" + str(copy).encode()
        ).digest()
        out[i] = np.frombuffer(digest, dtype=np.uint8)
    return out


def query_secret(fleet_key: bytes, query_id: str) -> bytes:
    return hmac.new(fleet_key, b"query\0" + query_id.encode(), hashlib.sha256).digest()


def keyed(secret: bytes, names: Names, purpose: bytes, size: int) -> npt.NDArray[np.uint8]:
    """HMAC(secret, purpose || name)[:size] of every name: (n, size) bytes."""
    out = np.empty((names.shape[0], size), dtype=np.uint8)
    for i in range(names.shape[0]):
        mac = hmac.new(secret, purpose + b"\0" + names[i].tobytes(), hashlib.sha256).digest()
        out[i] = np.frombuffer(mac[:size], dtype=np.uint8)
    return out


def answer_buckets(secret: bytes, names: Names) -> list[tuple[npt.NDArray[np.intp], bytes]]:
    """Devices grouped into BUCKETS by a keyed hash, each group in name order with the seed
    material of its generator (the secret and the group's names)."""
    bucket_of = keyed(secret, names, b"bucket", 1)[:, 0]
    groups: list[tuple[npt.NDArray[np.intp], bytes]] = []
    for b in np.unique(bucket_of):
        members = np.flatnonzero(bucket_of == b)
        order = np.lexsort(names[members].T[::-1])
        members = members[order]
        digest = hmac.new(secret, b"answers\0" + names[members].tobytes(), hashlib.sha256)
        groups.append((members, digest.digest()))
    return groups


def derived_rng(material: bytes) -> np.random.Generator:
    return np.random.Generator(np.random.Philox(np.random.SeedSequence(list(material))))
