"""One standard for every server role (`roles.ROLES`: trusted on SQLite, trusted replica on
PostgreSQL, leader, helper, issuer), each a real process on 127.0.0.1, checked on every RPC
of every service it serves:

- malformed bytes (random, truncated) are INVALID_ARGUMENT, or UNAUTHENTICATED first where
  the method needs credentials; never UNKNOWN or INTERNAL, never a class name;
- a request over its method's limit is RESOURCE_EXHAUSTED before it is read, credentials
  still checked first, and the role's memory returns to its level afterwards;
- a sustained storm of the role's own calls is answered OK, or RESOURCE_EXHAUSTED /
  UNAVAILABLE with a retry hint, never CANCELLED, and every acknowledged report is counted;
- client streams that go silent are ended;
- every file the role creates is 0600 and every directory 0700;
- a damaged database file is reported as damaged.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import stat
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from google.protobuf.descriptor import MethodDescriptor

from tests.conformance.roles import ROLES, RoleSpec, Running, Served, running_role

NEVER = {"UNKNOWN", "INTERNAL", "CANCELLED", "DEADLINE_EXCEEDED"}
TELLTALES = ("Traceback", "<class", "Exception", "Error:", 'File "', "DecodeError")
REFUSED_CREDENTIALS = {"UNAUTHENTICATED", "PERMISSION_DENIED"}
# Bytes no protobuf message decodes: a length-delimited field 1 cut short, an invalid wire
# type, a varint that never ends.
MALFORMED = (b"\x0a\x10abc", b"\xff\xff\xff\xff", b"\x08" + b"\xff" * 11)
MIB = 1 << 20


@pytest.fixture(scope="module", params=ROLES, ids=str)
def role(request: pytest.FixtureRequest) -> RoleSpec:
    spec: RoleSpec = request.param
    return spec


@pytest.fixture(scope="module")
def running(role: RoleSpec, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    if role.name == "trusted-postgres":
        request_postgres(tmp_path_factory)
    with running_role(role, tmp_path_factory.mktemp(role.name) / "role") as started:
        yield started


def request_postgres(_: pytest.TempPathFactory) -> None:
    """Skips (or, with LDPCOLLECT_REQUIRE_POSTGRES=1, fails) when no PostgreSQL answers."""
    from tests.postgres_db import REQUIRED, SERVER_URL, create_database, drop_database

    try:
        drop_database(create_database("ldpc_probe"))
    except Exception as exc:
        if REQUIRED:
            pytest.fail(f"LDPCOLLECT_REQUIRE_POSTGRES=1 but no PostgreSQL at {SERVER_URL}")
        pytest.skip(f"no PostgreSQL reachable at {SERVER_URL}: {exc}")


def methods(role: RoleSpec) -> Iterator[tuple[Served, MethodDescriptor]]:
    for served in role.services:
        for method in served.descriptor.methods:
            yield served, method


def call(
    address: str,
    served: Served,
    method: MethodDescriptor,
    messages: list[bytes],
    metadata: tuple[tuple[str, str], ...],
) -> tuple[str, str]:
    """Send the bytes as they are (no serializer); (status name, details)."""
    path = f"/{served.descriptor.full_name}/{method.name}"
    options = [("grpc.max_send_message_length", 64 * MIB)]
    with grpc.insecure_channel(address, options=options) as channel:
        try:
            if method.client_streaming:
                channel.stream_unary(path, None, None)(
                    iter(messages), metadata=metadata, timeout=60
                )
            else:
                channel.unary_unary(path, None, None)(messages[0], metadata=metadata, timeout=60)
        except grpc.RpcError as err:
            return err.code().name, err.details() or ""
    return "OK", ""


def test_malformed_bytes_are_invalid_argument_after_credentials(
    role: RoleSpec, running: Running
) -> None:
    rng = random.Random(role.name)
    for served, method in methods(role):
        name = f"{served.descriptor.name}/{method.name}"
        metadata = running.metadata(served, method.name)
        for data in MALFORMED:
            code, details = call(running.address, served, method, [data], metadata)
            assert code == "INVALID_ARGUMENT", (name, data, code, details)
            assert method.input_type.full_name in details, (name, details)
            if served.needs_credentials(method.name):
                code, details = call(running.address, served, method, [data], ())
                assert code == "UNAUTHENTICATED", (name, code, details)
        for _ in range(12):  # random bytes may decode: any precise answer, never a crash
            data = rng.randbytes(rng.randrange(1, 64))
            code, details = call(running.address, served, method, [data], metadata)
            assert code not in NEVER, (name, data, code, details)
            assert not any(word in details for word in TELLTALES), (name, details)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_oversized_requests_are_refused_before_parsing(role: RoleSpec, running: Running) -> None:
    for served, method in methods(role):
        name = f"{served.descriptor.name}/{method.name}"
        limit = role.limits.limit(name)
        metadata = running.metadata(served, method.name)
        code, details = call(running.address, served, method, [bytes(limit + 1)], metadata)
        assert code == "RESOURCE_EXHAUSTED", (name, code, details)
        if served.needs_credentials(method.name):
            code, details = call(running.address, served, method, [bytes(limit + 1)], ())
            assert code in REFUSED_CREDENTIALS | {"RESOURCE_EXHAUSTED"}, (name, code, details)


def test_memory_returns_after_oversized_and_full_size_requests(
    role: RoleSpec, running: Running
) -> None:
    """Four 30 MB requests at once, then four just under the largest limit, to the method
    taking the largest requests: the process's resident memory ends within 200 MB of where
    it started (before: one 30 MB upload took the leader from 158 to 787 MB)."""
    served, method = max(
        methods(role),
        key=lambda sm: role.limits.limit(f"{sm[0].descriptor.name}/{sm[1].name}"),
    )
    limit = role.limits.limit(f"{served.descriptor.name}/{method.name}")
    metadata = running.metadata(served, method.name)
    before = rss_mb(running.pid)
    with ThreadPoolExecutor(4) as pool:
        huge = list(
            pool.map(
                lambda data: call(running.address, served, method, [data], metadata),
                [os.urandom(30 * MIB) for _ in range(4)],
            )
        )
        full = list(
            pool.map(
                lambda data: call(running.address, served, method, [data], metadata),
                [b"\xff" * (limit - 64) for _ in range(4)],
            )
        )
    assert {code for code, _ in huge} == {"RESOURCE_EXHAUSTED"}, huge
    assert not {code for code, _ in full} & NEVER, full
    time.sleep(1.0)
    after = rss_mb(running.pid)
    print(f"\n{role.name}: RSS {before:.0f} MB -> {after:.0f} MB")
    assert after < before + 200, (before, after)


def test_sustained_overload_is_answered_with_a_retry_hint(role: RoleSpec, running: Running) -> None:
    result = asyncio.run(role.storm(running))
    print(f"\n{role.name}: {dict(result.statuses)}; acknowledged {result.acknowledged}")
    assert result.statuses["OK"] > 0, result.statuses
    assert set(result.statuses) <= {"OK", "RESOURCE_EXHAUSTED", "UNAVAILABLE"}, result.statuses
    assert not result.without_hint, result.without_hint
    if result.counted is not None:
        assert result.counted == result.acknowledged, (result.counted, result.acknowledged)


def test_silent_client_streams_are_ended(role: RoleSpec, running: Running) -> None:
    """Every client-streaming method ends a stream that goes silent (the trusted roles run
    with a 2 s idle timeout here; 30 s by default). Roles without one have nothing to hold."""
    streaming = [(s, m) for s, m in methods(role) if m.client_streaming]
    for served, method in streaming:
        path = f"/{served.descriptor.full_name}/{method.name}"

        def silent() -> Iterator[bytes]:
            time.sleep(30)
            yield b""

        started = time.monotonic()
        metadata = running.metadata(served, method.name)
        with (
            grpc.insecure_channel(running.address) as channel,
            pytest.raises(grpc.RpcError) as ended,
        ):
            channel.stream_unary(path, None, None)(silent(), metadata=metadata, timeout=20)
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE, ended.value
        assert time.monotonic() - started < 20


def test_files_are_private(role: RoleSpec, running: Running) -> None:
    seen = 0
    for path in running.directory.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o700, (str(path), oct(mode))
        elif path.name not in running.public_files:
            assert mode == 0o600, (str(path), oct(mode))
            seen += 1
    if role.damaged_file is not None:
        assert seen >= 3, "the database, its -wal and -shm at least"


def damage(path: Path, how: str) -> None:
    """A real SQLite file, then damaged: its format bytes, or a page of its schema."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x BLOB)")
        db.executemany("INSERT INTO t VALUES (?)", [(os.urandom(500),) for _ in range(40)])
    db.close()
    data = bytearray(path.read_bytes())
    if how == "format":
        data[18:20] = b"\xfe\xfe"
    else:
        data[100:4096] = b"\xa5" * (4096 - 100)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["format", "page"])
def test_a_damaged_database_is_reported_as_damaged(
    role: RoleSpec, how: str, tmp_path: Path
) -> None:
    if role.damaged_file is None:
        pytest.skip(f"{role.name} keeps no SQLite file (its store's own tests cover damage)")
    directory = tmp_path / "role"
    directory.mkdir(mode=0o700)
    damage(directory / role.damaged_file, how)
    with pytest.raises(AssertionError) as refused, running_role(role, directory):
        pass
    assert "damaged" in str(refused.value), str(refused.value)[-2000:]
    assert "may read and write" not in str(refused.value)
