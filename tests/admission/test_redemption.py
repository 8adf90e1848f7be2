"""Redemption end to end, real processes: the issuer, `ldpcollect serve --token-directory`,
`query create --require-tokens`, a `Device` enrolled at the issuer, and every refusal."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from client.device import Device
from client.tokens import Enrollment, IssuerClient
from ldpcollect import geo
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import finalize_token, request_token, sign_token_request
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from tests.admission.issuer_process import enroll, issuing
from tests.serving import run_cli, serving

TOKEN = "admin-secret"
HOME = geo.GridScheme().locate(*geo.DEFAULT_CENTER)


@dataclass
class Setup:
    aggregator: str
    issuer: str
    secrets: dict[str, str]
    db: Path
    directory: Path
    state_dir: Path


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    state = tmp_path / "issuer"
    devices = enroll(state, *(f"dev-{i}" for i in range(4)))
    with issuing(state, tokens_per_epoch=5) as issuer:
        db = tmp_path / "agg.db"
        with serving(db, TOKEN, "--token-directory", str(issuer.directory)) as served:
            yield Setup(served.address, issuer.address, devices, db, issuer.directory, state)


def create(server: str, query_id: str, *extra: str) -> dict[str, object]:
    done = run_cli(
        TOKEN, "query", "create", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3",
        "--targets", str(HOME), "--id", query_id, "--json", *extra, server=server,
    )  # fmt: skip
    created: dict[str, object] = json.loads(done.stdout)
    return created


def report(query_id: str, token: bytes, round_: int = 1) -> pb.Report:
    return pb.Report(
        query_id=query_id,
        round=round_,
        device_pseudonym=secrets.token_bytes(16),
        report_id=secrets.token_bytes(16),
        answers=b"\x80",
        token=token,
    )


def submit(stub: pb_grpc.CollectorStub, r: pb.Report) -> str:
    try:
        ack = stub.SubmitReport(pb.SubmitReportRequest(report=r), timeout=30).ack
    except grpc.RpcError as err:
        return f"{err.code().name}: {err.details()}"
    return "duplicate" if ack.duplicate else "accepted"


def reports_of(stub: pb_grpc.CollectorStub, query_id: str) -> list[int]:
    query = stub.GetQuery(pb.GetQueryRequest(query_id=query_id), timeout=30)
    return list(query.reports_per_round)


def test_a_device_enrolled_at_the_issuer_answers_a_token_query(
    setup: Setup, tmp_path: Path
) -> None:
    created = create(setup.aggregator, "tq", "--require-tokens")
    assert created["require_tokens"] is True and created["token_issuer"] == setup.issuer
    with grpc.insecure_channel(setup.issuer) as ic, grpc.insecure_channel(setup.aggregator) as ac:
        issuer = IssuerClient(ic, Enrollment("dev-0", setup.secrets["dev-0"]))
        device = Device(tmp_path / "d.json", *geo.DEFAULT_CENTER, issuer=issuer)
        [outcome] = device.participate(ac, query_ids=["tq"])
        assert outcome.status == "accepted", outcome
        record = device.state.queries["tq"]
        assert len(record.token(1)) == 354  # saved with the state
        # A device without an issuer cannot answer; a plain query needs no token.
        bare = Device(tmp_path / "bare.json", *geo.DEFAULT_CENTER)
        [refused] = bare.participate(ac, query_ids=["tq"])
        assert refused.status == "failed" and refused.code == "UNAUTHENTICATED"
        create(setup.aggregator, "plain")
        [plain] = bare.participate(ac, query_ids=["plain"])
        assert plain.status == "accepted"
        # The same report and token again (a lost ack): acknowledged once, counted once.
        stub = pb_grpc.CollectorStub(ac)
        again = Device.report(record, 1)
        assert submit(stub, again) == "duplicate"
        assert reports_of(stub, "tq") == [1]


def test_missing_bad_foreign_and_replayed_tokens_get_their_status_and_count_nothing(
    setup: Setup,
) -> None:
    create(setup.aggregator, "tq", "--require-tokens")
    with grpc.insecure_channel(setup.issuer) as ic, grpc.insecure_channel(setup.aggregator) as ac:
        issuer = IssuerClient(ic, Enrollment("dev-1", setup.secrets["dev-1"]))
        key = issuer.key()
        stub = pb_grpc.CollectorStub(ac)
        round1 = query_challenge(key.issuer_name, "tq", 1)
        round2 = query_challenge(key.issuer_name, "tq", 2)
        other_query = query_challenge(key.issuer_name, "other", 1)
        good, for_round2, for_other = issuer.tokens(key, [round1, round2, other_query])
        tampered = good[:-1] + bytes([good[-1] ^ 1])
        foreign_key = TokenSigningKey.generate()  # not the issuer's: like an expired epoch's
        request, pending = request_token(foreign_key.public, round1)
        foreign = finalize_token(pending, sign_token_request(foreign_key, request)).encode()

        assert submit(stub, report("tq", b"")).startswith("UNAUTHENTICATED: query 'tq' requires")
        assert submit(stub, report("tq", b"\x00\x02" + bytes(10))).startswith("INVALID_ARGUMENT")
        assert submit(stub, report("tq", tampered)).startswith("PERMISSION_DENIED")
        assert submit(stub, report("tq", for_round2)).startswith("PERMISSION_DENIED")
        assert submit(stub, report("tq", for_other)).startswith("PERMISSION_DENIED")
        assert submit(stub, report("tq", foreign)).startswith("FAILED_PRECONDITION")
        assert reports_of(stub, "tq") == [0]

        first = report("tq", good)
        assert submit(stub, first) == "accepted"
        replay = report("tq", good)  # another report (id, pseudonym) with the spent token
        assert submit(stub, replay).startswith("ALREADY_EXISTS: the admission token was")
        assert reports_of(stub, "tq") == [1]

        # A batch: each report refused on its own, the others counted.
        fresh = issuer.tokens(key, [round1])[0]
        batch = [report("tq", fresh), report("tq", b""), report("tq", good), report("tq", fresh)]
        response = stub.SubmitBatch(pb.SubmitBatchRequest(reports=batch), timeout=30)
        assert response.accepted == 1 and response.duplicates == 0
        codes = {r.index: grpc.StatusCode.UNAUTHENTICATED.value[0] for r in response.rejected}
        assert [r.index for r in response.rejected] == [1, 2, 3]
        assert [r.code for r in response.rejected] == [
            grpc.StatusCode.UNAUTHENTICATED.value[0],
            grpc.StatusCode.ALREADY_EXISTS.value[0],
            grpc.StatusCode.ALREADY_EXISTS.value[0],
        ], codes
        assert reports_of(stub, "tq") == [2]


def test_spent_tokens_stay_spent_across_an_aggregator_restart(tmp_path: Path) -> None:
    state = tmp_path / "issuer"
    secret = enroll(state, "dev-0")["dev-0"]
    db = tmp_path / "agg.db"
    with issuing(state) as issuing_proc, grpc.insecure_channel(issuing_proc.address) as ic:
        issuer = IssuerClient(ic, Enrollment("dev-0", secret))
        key = issuer.key()
        [token] = issuer.tokens(key, [query_challenge(key.issuer_name, "tq", 1)])
        first, replay = report("tq", token), report("tq", token)
        directory = ("--token-directory", str(issuing_proc.directory))
        with serving(db, TOKEN, *directory) as served:
            create(served.address, "tq", "--require-tokens")
            with grpc.insecure_channel(served.address) as ac:
                assert submit(pb_grpc.CollectorStub(ac), first) == "accepted"
        with serving(db, TOKEN, *directory) as served, grpc.insecure_channel(served.address) as ac:
            stub = pb_grpc.CollectorStub(ac)
            assert stub.GetQuery(pb.GetQueryRequest(query_id="tq"), timeout=30).require_tokens
            assert submit(stub, replay).startswith("ALREADY_EXISTS")
            assert submit(stub, first) == "duplicate"
            assert reports_of(stub, "tq") == [1]


def test_a_token_query_needs_an_aggregator_with_the_token_directory(tmp_path: Path) -> None:
    with serving(tmp_path / "plain.db", TOKEN) as served:
        done = run_cli(
            TOKEN, "query", "create", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3",
            "--targets", str(HOME), "--require-tokens", server=served.address, ok=False,
        )  # fmt: skip
        assert done.returncode == 1
        assert "FAILED_PRECONDITION" in done.stderr and "--token-directory" in done.stderr


def test_a_report_stream_redeems_each_report_on_its_own(setup: Setup) -> None:
    create(setup.aggregator, "tq", "--require-tokens")
    with grpc.insecure_channel(setup.issuer) as ic, grpc.insecure_channel(setup.aggregator) as ac:
        issuer = IssuerClient(ic, Enrollment("dev-3", setup.secrets["dev-3"]))
        key = issuer.key()
        a, b = issuer.tokens(key, [query_challenge(key.issuer_name, "tq", 1)] * 2)
        stream = [report("tq", a), report("tq", b""), report("tq", a), report("tq", b)]
        stub = pb_grpc.CollectorStub(ac)
        response = stub.StreamReports(
            iter([pb.SubmitReportRequest(report=r) for r in stream]), timeout=30
        )
        assert response.accepted == 2
        assert [(r.index, r.code) for r in response.rejected] == [
            (1, grpc.StatusCode.UNAUTHENTICATED.value[0]),
            (2, grpc.StatusCode.ALREADY_EXISTS.value[0]),
        ]
        assert reports_of(stub, "tq") == [2]


def test_tokens_verified_in_worker_processes_get_the_same_verdicts(tmp_path: Path) -> None:
    state = tmp_path / "issuer"
    secret = enroll(state, "dev-0")["dev-0"]
    with issuing(state) as issuing_proc, grpc.insecure_channel(issuing_proc.address) as ic:
        issuer = IssuerClient(ic, Enrollment("dev-0", secret))
        key = issuer.key()
        good = issuer.tokens(key, [query_challenge(key.issuer_name, "tq", 1)] * 3)
        tampered = good[0][:-1] + bytes([good[0][-1] ^ 1])
        args = ("--token-directory", str(issuing_proc.directory), "--token-verify-processes", "2")
        with serving(tmp_path / "agg.db", TOKEN, *args) as served:
            create(served.address, "tq", "--require-tokens")
            batch = [report("tq", t) for t in (good[0], tampered, good[1], good[2], good[1])]
            with grpc.insecure_channel(served.address) as ac:
                stub = pb_grpc.CollectorStub(ac)
                response = stub.SubmitBatch(pb.SubmitBatchRequest(reports=batch), timeout=60)
                assert response.accepted == 3
                assert [(r.index, r.code) for r in response.rejected] == [
                    (1, grpc.StatusCode.PERMISSION_DENIED.value[0]),
                    (4, grpc.StatusCode.ALREADY_EXISTS.value[0]),
                ]
                assert reports_of(stub, "tq") == [3]


def test_a_device_keeps_its_token_across_a_restart_and_sends_it_again(
    setup: Setup, tmp_path: Path
) -> None:
    from client.retry import RetryPolicy

    create(setup.aggregator, "tq", "--require-tokens")
    state = tmp_path / "device.json"
    quick = RetryPolicy(max_attempts=2, initial_backoff=0.01, max_backoff=0.01, rpc_timeout=2)
    with grpc.insecure_channel(setup.issuer) as ic, grpc.insecure_channel(setup.aggregator) as ac:
        query = pb_grpc.CollectorStub(ac).GetQuery(pb.GetQueryRequest(query_id="tq"), timeout=30)
        issuer = IssuerClient(ic, Enrollment("dev-0", setup.secrets["dev-0"]))
        # The aggregator cannot be reached when the device first answers: the token it fetched
        # is saved with its report id, and nothing is acknowledged.
        with grpc.insecure_channel("127.0.0.1:1") as dead:
            first = Device(state, *geo.DEFAULT_CENTER, issuer=issuer, retry=quick)
            outcome = first.answer(pb_grpc.CollectorStub(dead), query)
            assert outcome.status == "failed" and outcome.code == "UNAVAILABLE"
        saved = first.state.queries["tq"].token(1)
        assert len(saved) == 354
        # Restarted, the device sends the same report with the same token: no new token.
        again = Device(state, *geo.DEFAULT_CENTER, issuer=issuer)
        assert again.state.queries["tq"].token(1) == saved
        [outcome] = again.participate(ac, query_ids=["tq"])
        assert outcome.status == "accepted"
        key = issuer.key()
        challenge = query_challenge(key.issuer_name, "tq", 1)
        assert len(issuer.tokens(key, [challenge] * 4)) == 4  # K = 5: only one was taken
