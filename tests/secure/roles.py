"""The secure mode's two roles as child processes for tests: `ldpcollect serve --role helper`
and `--role leader`, on real sockets and real database files."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grpc

from client.secure_device import SecureDevice, fetch_query
from client.secure_keys import fetch_helper_config
from ldpcollect.secure.sealing import HpkeConfig
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from ldpcollect_cli.secure_serving import secure_ready_prefix
from tests.serving import cli_env

ADMIN = "admin-token"
PEER = "peer-token"
ADMIN_AUTH = (("authorization", f"Bearer {ADMIN}"),)
T = TypeVar("T")


@dataclass
class Role:
    role: str
    db: Path
    listen: str
    helper: str | None = None
    extra: tuple[str, ...] = ()
    # A leader's budget decision (`serve --budget E,D` or the explicit opt-out, the default
    # here: most tests are not about budgets); () gives it neither, as an operator might.
    budget: tuple[str, ...] = ("--no-budget",)
    proc: subprocess.Popen[str] | None = None
    address: str = ""
    ready_line: str = ""

    def start(self) -> None:
        command = [sys.executable, "-m", "ldpcollect_cli.main", "serve", "--role", self.role]
        command += ["--db", str(self.db), "--listen", self.listen]
        if self.helper is not None:
            command += ["--helper", self.helper]
        command += self.extra
        if self.role == "leader":
            command += self.budget
        env = cli_env(ADMIN, LDPCOLLECT_PEER_TOKEN=PEER)
        self.proc = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        line = self.proc.stdout.readline()
        prefix = secure_ready_prefix(self.role)
        if not line.startswith(prefix):
            self.proc.kill()
            raise AssertionError(f"{self.role} did not start: {line}{self.proc.stderr.read()}")
        self.ready_line = line
        self.address = line[len(prefix) :].split()[0]
        self.listen = self.address  # a restart binds the same port

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            assert self.proc.wait(timeout=30) == 0
            self.proc = None


@dataclass
class Pair:
    leader: Role
    helper: Role

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(self.leader.address)

    def helper_config(self) -> HpkeConfig:
        """The helper's key as the helper itself publishes it."""
        with grpc.insecure_channel(self.helper.address) as channel:
            return fetch_helper_config(channel)

    def device(self, channel: grpc.Channel, query_id: str) -> SecureDevice:
        """A device for the query: the query from the leader, the helper's key from the
        helper."""
        return SecureDevice(fetch_query(channel, query_id), self.helper_config())


# The tests' helper takes part in queries of any size (the default policy wants 100).
SMALL_BATCHES = ("--min-batch", "1")


@contextmanager
def secure_pair(
    tmp_path: Path,
    helper_args: tuple[str, ...] = SMALL_BATCHES,
    budget: tuple[str, ...] = ("--no-budget",),
) -> Iterator[Pair]:
    """A helper (started with `helper_args`), then a leader pointed at it (with `budget`,
    `Role.budget`); both stopped (SIGTERM, exit 0) after."""
    helper = Role("helper", tmp_path / "helper.db", "127.0.0.1:0", extra=helper_args)
    helper.start()
    leader = Role(
        "leader", tmp_path / "leader.db", "127.0.0.1:0", helper=helper.address, budget=budget
    )
    try:
        leader.start()
        yield Pair(leader, helper)
    finally:
        leader.stop()
        helper.stop()


def wait_until(probe: Callable[[], T | None], timeout: float = 120.0) -> T:
    """Poll `probe` until it returns something (not a timed assertion: the limit only stops a
    hung test)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("gave up waiting")
        time.sleep(0.1)


def admin_stub(channel: grpc.Channel) -> spb_grpc.SecureAdminStub:
    return spb_grpc.SecureAdminStub(channel)


def aggregated(channel: grpc.Channel, query_id: str) -> spb.SecureQuery:
    """The query once nothing is pending at the leader (progress is the admin's to see)."""

    def probe() -> spb.SecureQuery | None:
        query = spb_grpc.SecureAdminStub(channel).GetSecureQuery(
            spb.GetSecureQueryRequest(query_id=query_id), metadata=ADMIN_AUTH, timeout=30
        )
        return None if query.pending_reports else query

    return wait_until(probe)
