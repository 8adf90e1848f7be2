"""Leaders and helpers as several `ldpcollect serve --role ... --store postgresql://...`
replicas on one database (a database the test creates and drops): the same uploads sent to
two leaders at once are held once, both leaders' drivers aggregate with both helpers and
count each report once, a release through either leader is the same and charged once; a
leader SIGKILLed under upload load loses nothing it acknowledged (its unfinished job is
resumed by the other)."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from client.secure_collector import create_secure_query, release_secure_query
from client.secure_device import SecureDevice, fetch_query
from client.secure_keys import fetch_helper_config
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from tests.secure.roles import ADMIN, ADMIN_AUTH, SMALL_BATCHES, Role, aggregated
from tests.serving import run_cli

TARGETS = [1, 2, 3, 4, 5]
BATCH = 25
RR = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})


@contextmanager
def replicas(
    tmp_path: Path, url: str, helpers: int, leaders: int
) -> Iterator[tuple[list[Role], list[Role]]]:
    """`helpers` helper replicas, then `leaders` leader replicas (each given every helper:
    `--helper h1:p1,h2:p2`), all on `url`; those still running are stopped (SIGTERM, exit 0)
    after."""
    store = ("--store", url)
    started: list[Role] = []
    try:
        for i in range(helpers):
            role = Role("helper", tmp_path / f"h{i}.db", "127.0.0.1:0", extra=SMALL_BATCHES + store)
            role.start()
            started.append(role)
        helper = ",".join(role.address for role in started)
        for i in range(leaders):
            role = Role("leader", tmp_path / f"l{i}.db", "127.0.0.1:0", helper, extra=store)
            role.start()
            started.append(role)
        yield started[helpers:], started[:helpers]
    finally:
        for role in reversed(started):
            role.stop()


def device_for(leader: Role, helpers: list[Role], query_id: str) -> SecureDevice:
    """A device: the query from a leader, the helper's key from every helper replica (they
    hold one key pair, shared through the database)."""
    configs = []
    for helper in helpers:
        with grpc.insecure_channel(helper.address) as channel:
            configs.append(fetch_helper_config(channel))
    assert len({c.encode() for c in configs}) == 1
    with grpc.insecure_channel(leader.address) as channel:
        return SecureDevice(fetch_query(channel, query_id), configs[0])


def expected(answers: list[list[int]]) -> list[list[int]]:
    return [[sum(col) for col in zip(*answers, strict=True)]]


def test_two_leaders_and_two_helpers_count_every_report_once(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    collector = load_or_create_key_pair(tmp_path / "collector.key")
    rng = random.Random(25)
    answers = [[rng.randrange(2) for _ in TARGETS] for _ in range(BATCH * 16)]
    with replicas(tmp_path, fresh_postgres_url, helpers=2, leaders=2) as (leaders, helpers):
        first, second = (grpc.insecure_channel(r.address) for r in leaders)
        with first, second:
            query = create_secure_query(first, ADMIN, collector, RR, TARGETS, 1)
            device = device_for(leaders[1], helpers, query.query_id)
            bodies = [device.seal_measurement(a) for a in answers]
            batches = [bodies[i : i + BATCH] for i in range(0, len(bodies), BATCH)]
            stubs = [spb_grpc.SecureCollectorStub(c) for c in (first, second)]
            for batch in batches:  # every batch to both leaders at once
                calls = [
                    stub.UploadSecureReports.future(
                        spb.UploadSecureReportsRequest(reports=batch), timeout=30
                    )
                    for stub in stubs
                ]
                done = [call.result() for call in calls]
                assert [list(d.rejected) for d in done] == [[], []]
                assert sum(d.accepted for d in done) == BATCH  # held once, a duplicate once
                assert sum(d.duplicates for d in done) == BATCH
            final = aggregated(second, query.query_id)
            assert (final.aggregated_reports, final.refused_reports) == (len(answers), 0)
            released = release_secure_query(second, ADMIN, collector, query.query_id)
            again = release_secure_query(first, ADMIN, collector, query.query_id)
            ledger = spb_grpc.SecureAdminStub(first).GetSecureLedger(
                pb.GetLedgerRequest(), metadata=ADMIN_AUTH
            )
    assert released.round_counts == expected(answers)
    assert again.round_counts == released.round_counts  # the same sealed shares
    assert len(ledger.entries) == 1  # charged once, whichever leader released


@pytest.mark.parametrize("victim", ["leader", "helper"])
def test_sigkill_of_a_replica_under_load_loses_nothing_acknowledged(
    tmp_path: Path, fresh_postgres_url: str, victim: str
) -> None:
    """Two device threads upload, one to each leader; a third of the way through, one leader
    replica (or one helper replica) is SIGKILLed. A batch the dead leader did not acknowledge
    is sent again to the other (same bytes); jobs the dead helper had are retried on the
    other helper. Every report is counted exactly once, in the release."""
    collector = load_or_create_key_pair(tmp_path / "collector.key")
    rng = random.Random(26)
    answers = [[rng.randrange(2) for _ in TARGETS] for _ in range(BATCH * 24)]
    with replicas(tmp_path, fresh_postgres_url, helpers=2, leaders=2) as (leaders, helpers):
        survivor = leaders[1]
        killed = leaders[0] if victim == "leader" else helpers[0]
        with grpc.insecure_channel(survivor.address) as channel:
            query = create_secure_query(channel, ADMIN, collector, RR, TARGETS, 1)
        device = device_for(survivor, helpers, query.query_id)
        bodies = [device.seal_measurement(a) for a in answers]
        batches = [bodies[i : i + BATCH] for i in range(0, len(bodies), BATCH)]
        sent = threading.Semaphore(0)
        acknowledged_by_first: list[int] = []
        retried: list[int] = []
        lock = threading.Lock()

        def upload(indices: list[int]) -> None:
            with (
                grpc.insecure_channel(leaders[0].address) as to_first,
                grpc.insecure_channel(survivor.address) as to_survivor,
            ):
                stubs = [spb_grpc.SecureCollectorStub(c) for c in (to_first, to_survivor)]
                for i in indices:
                    request = spb.UploadSecureReportsRequest(reports=batches[i])
                    try:
                        done = stubs[i % 2].UploadSecureReports(request, timeout=10)
                        assert list(done.rejected) == []
                        if i % 2 == 0:
                            with lock:
                                acknowledged_by_first.append(i)
                    except grpc.RpcError:  # the leader is gone: the device retries elsewhere
                        with lock:
                            retried.append(i)
                        done = stubs[1].UploadSecureReports(request, timeout=30)
                        assert list(done.rejected) == []
                    sent.release()

        workers = [
            threading.Thread(target=upload, args=(list(range(k, len(batches), 2)),)) for k in (0, 1)
        ]
        for worker in workers:
            worker.start()
        for _ in range(len(batches) // 3):
            sent.acquire()
        killed.kill()
        for worker in workers:
            worker.join(timeout=120)
        assert acknowledged_by_first  # the first leader acknowledged some
        assert bool(retried) == (victim == "leader")  # and, killed, refused the others
        with grpc.insecure_channel(survivor.address) as channel:
            final = aggregated(channel, query.query_id)
            assert (final.aggregated_reports, final.refused_reports) == (len(answers), 0)
            released = release_secure_query(channel, ADMIN, collector, query.query_id)
    assert released.round_counts == expected(answers)


@pytest.mark.parametrize("role", ["leader", "helper"])
def test_serve_names_a_bad_or_unreachable_store(tmp_path: Path, role: str) -> None:
    """The trusted server's validation and messages, for either role."""
    base = ["serve", "--role", role, "--db", str(tmp_path / "x.db"), "--listen", "127.0.0.1:0"]
    base += ["--peer-token", "p"] + (["--helper", "127.0.0.1:1"] if role == "leader" else [])
    bad = run_cli(ADMIN, *base, "--store", "mysql://x/y", ok=False)
    assert bad.returncode == 2
    assert "--store must be a PostgreSQL URL: postgresql://USER@HOST:PORT/DB" in bad.stderr
    url = "postgresql://someone:secret@127.0.0.1:1/nowhere"
    down = run_cli(ADMIN, *base, "--store", url, ok=False)
    assert down.returncode == 1
    assert "cannot use the PostgreSQL database postgresql://someone:***@127.0.0.1:1/nowhere" in (
        down.stderr
    )
    assert "secret" not in down.stderr + down.stdout


def test_store_migrate_creates_a_roles_schema_once(fresh_postgres_url: str) -> None:
    first = run_cli(ADMIN, "store", "migrate", "--store", fresh_postgres_url, "--role", "leader")
    assert first.stdout == "applied ldpcollect_secure_leader version(s) 1; now at 1\n"
    again = run_cli(
        ADMIN, "store", "migrate", "--store", fresh_postgres_url, "--role", "leader", "--json"
    )
    assert json.loads(again.stdout) == {
        "schema": "ldpcollect_secure_leader",
        "schema_version": 1,
        "applied": [],
    }
    bad = run_cli(ADMIN, "store", "migrate", "--store", fresh_postgres_url, "--role", "x", ok=False)
    assert bad.returncode == 2 and "--role must be trusted, leader or helper" in bad.stderr


def test_a_csv_fleet_runs_through_the_query_commands_on_replicas(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    """Issue 25's walk, on PostgreSQL replicas, with the real CLI: `query create --secure` at
    one leader, a real-location CSV fleet through `fleet run --csv` at the other (then again
    at the first: every report a duplicate), `query close` and `release --map --geojson --csv
    --json` through either leader, with the same counts and one ledger entry."""
    import numpy as np

    from ldpcollect import geo

    lats, lons = geo.sample_locations(600, geo.DEFAULT_CENTER, np.random.default_rng(8))
    city = tmp_path / "city.csv"
    rows = (f"{a:.6f},{b:.6f}\n" for a, b in zip(lats, lons, strict=True))
    city.write_text("lat,lon\n" + "".join(rows))
    key = str(tmp_path / "collector.key")
    with replicas(tmp_path, fresh_postgres_url, helpers=2, leaders=2) as (leaders, helpers):
        first, second = (leader.address for leader in leaders)

        def cli(*args: str, server: str) -> str:
            return run_cli(ADMIN, *args, server=server).stdout

        cli("query", "create", "--secure", "--collector-key", key, "--id", "sp", "--mechanism",
            "sp", "--sampling-rate", "0.5", "--bbox", "48.85,2.28,48.87,2.31", "--scheme",
            "h3:8", "--min-reports", "100", "--noise-sigma", "2", server=first)  # fmt: skip
        listed = json.loads(cli("query", "list", "--json", server=second))
        assert [(q["query_id"], q["secure"]) for q in listed] == [("sp", True)]
        fleet = ("fleet", "run", "--query", "sp", "--csv", str(city), "--no-progress", "--json",
                 "--helper", helpers[1].address)  # fmt: skip
        ran = json.loads(cli(*fleet, server=second))
        [upload] = ran["rounds"]
        assert (upload["accepted"], upload["failed"], ran["completed"]) == (600, 0, 600)
        (tmp_path / "fleet.json").write_text(json.dumps(ran))
        [again] = json.loads(cli(*fleet, server=first))["rounds"]
        assert (again["accepted"], again["duplicates"]) == (0, 600)
        cli("query", "close", "--query", "sp", server=first)
        files = [str(tmp_path / name) for name in ("m.png", "m.html", "m.geojson", "m.csv")]
        shown = cli("release", "--query", "sp", "--collector-key", key, "--map", files[0],
                    "--map", files[1], "--geojson", files[2], "--csv", files[3], "--truth",
                    str(tmp_path / "fleet.json"), server=second)  # fmt: skip
        assert all(f"wrote {path}" in shown.replace("\n", "") for path in files)
        released = [
            json.loads(
                cli("release", "--query", "sp", "--collector-key", key, "--json", server=leader)
            )
            for leader in (first, second)
        ]
        ledgers = [json.loads(cli("ledger", "--json", server=s)) for s in (first, second)]
    assert released[0]["estimates"] == released[1]["estimates"]  # released once, the same
    assert released[0]["participants"] == 600 and released[0]["secure"] is True
    assert [[e["query_id"] for e in ledger["entries"]] for ledger in ledgers] == [["sp"]] * 2
    truth = {g["location_id"]: g["true_count"] for g in ran["ground_truth"]}
    held = sum(
        e["ci_low"] <= truth[e["location_id"]] <= e["ci_high"] for e in released[0]["estimates"]
    )
    assert held >= 0.7 * len(truth)  # exact 95% intervals; a loose floor over a few cells
