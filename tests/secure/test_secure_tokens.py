"""Admission tokens in secure mode, through real issuer, helper and leader processes: a query
created with --require-tokens counts exactly the reports with fresh valid tokens; each bad
token gets the trusted mode's status at upload and changes nothing; a token the helper
refuses on its own verification adds nothing at either aggregator."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from client.secure_collector import create_secure_query, release_secure_query
from client.secure_device import SecureDevice, report_challenge, upload
from client.tokens import Enrollment, IssuerClient
from ldpcollect.admission.directory import DirectoryKey, IssuerDirectory
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import (
    Token,
    finalize_token,
    request_token,
    sign_token_request,
)
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.secure.sealing import HpkeKeyPair
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from tests.admission.issuer_process import Issuing, enroll, issuing
from tests.secure.roles import ADMIN, ADMIN_AUTH, SMALL_BATCHES, Pair, Role, aggregated
from tests.serving import run_cli

TARGETS = [21, 22, 23, 24]
RR = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})
SP = mechanism_from_params("sp", {"sampling_rate": "0.5"})


@dataclass
class Setup:
    pair: Pair
    issuer: Issuing
    secrets: dict[str, str]
    helper_directory: Path  # the helper's own copy of the issuer's directory
    collector: HpkeKeyPair

    def client(self, channel: grpc.Channel, device: str = "dev-0") -> IssuerClient:
        return IssuerClient(channel, Enrollment(device, self.secrets[device]))


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("sectokens")
    state = tmp / "issuer"
    secrets = enroll(state, "dev-0", "dev-1")
    with issuing(state, tokens_per_epoch=1000) as issuer:
        helper_directory = tmp / "helper-directory.json"
        shutil.copy(issuer.directory, helper_directory)
        helper = Role(
            "helper",
            tmp / "helper.db",
            "127.0.0.1:0",
            extra=("--token-directory", str(helper_directory), *SMALL_BATCHES),
        )
        helper.start()
        leader = Role(
            "leader",
            tmp / "leader.db",
            "127.0.0.1:0",
            helper=helper.address,
            extra=("--token-directory", str(issuer.directory)),
        )
        try:
            leader.start()
            collector = load_or_create_key_pair(tmp / "collector.key")
            yield Setup(Pair(leader, helper), issuer, secrets, helper_directory, collector)
        finally:
            leader.stop()
            helper.stop()


def token_query(setup: Setup, channel: grpc.Channel, mechanism: object = RR) -> SecureDevice:
    assert mechanism is RR or mechanism is SP
    created = create_secure_query(
        channel, ADMIN, setup.collector, mechanism, TARGETS, 1, require_tokens=True
    )
    return setup.pair.device(channel, created.query_id)


def spent_nonces(db: Path, query_id: str) -> set[bytes]:
    with sqlite3.connect(f"file:{db}.secure?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT nonce FROM secure_spent_tokens WHERE query_id = ?", (query_id,)
        ).fetchall()
    return {bytes(row[0]) for row in rows}


def test_a_token_query_counts_exactly_and_a_retry_is_acknowledged_once(setup: Setup) -> None:
    pair = setup.pair
    with pair.channel() as channel, grpc.insecure_channel(setup.issuer.address) as ic:
        device = token_query(setup, channel)
        query = device.query
        assert query.require_tokens and query.token_issuer == setup.issuer.address
        assert list(query.token_origins) == [pair.leader.address, pair.helper.address]
        issuer = setup.client(ic)
        key = issuer.key()
        rng = random.Random(11)
        answers = [[rng.randrange(2) for _ in TARGETS] for _ in range(30)]
        bodies = [device.seal_measurement(a) for a in answers]
        tokens = issuer.tokens(key, [report_challenge(key, query)] * len(bodies))
        done = upload(channel, bodies, tokens=tokens)
        assert (done.accepted, done.duplicates, list(done.rejected)) == (30, 0, [])
        again = upload(channel, bodies, tokens=tokens)  # every ack lost: the same again
        assert (again.accepted, again.duplicates, list(again.rejected)) == (0, 30, [])
        counted = aggregated(channel, query.query_id)
        assert (counted.aggregated_reports, counted.refused_reports) == (30, 0)
        nonces = {Token.decode(t).nonce for t in tokens}
        # Each aggregator spent every nonce in its own store, and only those.
        assert spent_nonces(pair.leader.db, query.query_id) == nonces
        assert spent_nonces(pair.helper.db, query.query_id) == nonces
        release = release_secure_query(channel, ADMIN, setup.collector, query.query_id)
    assert release.reports == 30
    assert release.round_counts == [[sum(col) for col in zip(*answers, strict=True)]]
    # Released: no report can come any more, the nonces are dropped at both.
    assert spent_nonces(pair.leader.db, query.query_id) == set()
    assert spent_nonces(pair.helper.db, query.query_id) == set()


def test_missing_bad_foreign_and_replayed_tokens_get_their_status_and_count_nothing(
    setup: Setup,
) -> None:
    with setup.pair.channel() as channel, grpc.insecure_channel(setup.issuer.address) as ic:
        device = token_query(setup, channel)
        query_id = device.query.query_id
        issuer = setup.client(ic, "dev-1")
        key = issuer.key()
        challenge = report_challenge(key, device.query)
        trusted = query_challenge(key.issuer_name, query_id, 1)  # same id, trusted mode
        leader_only = query_challenge(key.issuer_name, query_id, 1, [setup.pair.leader.address])
        good, for_trusted, for_leader_only = issuer.tokens(key, [challenge, trusted, leader_only])
        tampered = good[:-1] + bytes([good[-1] ^ 1])
        foreign_key = TokenSigningKey.generate()  # not the issuer's: like an expired epoch's
        request, pending = request_token(foreign_key.public, challenge)
        foreign = finalize_token(pending, sign_token_request(foreign_key, request)).encode()
        cases = {
            b"": "UNAUTHENTICATED",
            b"\x00\x02" + bytes(10): "INVALID_ARGUMENT",
            foreign: "FAILED_PRECONDITION",
            tampered: "PERMISSION_DENIED",
            for_trusted: "PERMISSION_DENIED",
            for_leader_only: "PERMISSION_DENIED",
        }
        bodies = [device.seal_measurement([1, 0, 0, 1]) for _ in range(len(cases) + 1)]
        done = upload(channel, bodies, tokens=[*cases, good])
        assert (done.accepted, done.duplicates) == (1, 0)
        names = {code.value[0]: code.name for code in grpc.StatusCode}
        got = {r.index: names[r.code] for r in done.rejected}
        assert got == dict(enumerate(cases.values()))
        assert "requires an admission token" in done.rejected[0].message
        # Another report with the spent token: a replay; the same report again: a duplicate.
        replay = upload(channel, [device.seal_measurement([1, 1, 1, 1])], tokens=[good])
        assert [names[r.code] for r in replay.rejected] == ["ALREADY_EXISTS"]
        assert "already redeemed" in replay.rejected[0].message
        retry = upload(channel, [bodies[-1]], tokens=[good])
        assert (retry.accepted, retry.duplicates, list(retry.rejected)) == (0, 1, [])
        # One token per report or none: anything else refuses the whole call.
        with pytest.raises(grpc.RpcError) as refused:
            upload(channel, bodies[:2], tokens=[good])
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        counted = aggregated(channel, query_id)
        assert (counted.aggregated_reports, counted.refused_reports) == (1, 0)
        release = release_secure_query(channel, ADMIN, setup.collector, query_id)
    assert release.round_counts == [[1, 0, 0, 1]]


def test_a_token_only_the_helper_refuses_adds_nothing_at_either_aggregator(
    setup: Setup,
) -> None:
    original = setup.helper_directory.read_text()
    with setup.pair.channel() as channel, grpc.insecure_channel(setup.issuer.address) as ic:
        device = token_query(setup, channel)
        query_id = device.query.query_id
        issuer = setup.client(ic)
        key = issuer.key()
        tokens = issuer.tokens(key, [report_challenge(key, device.query)] * 5)
        # The helper's directory now lists only another key of the same issuer: the leader
        # accepts the tokens, the helper's own verification does not.
        other = TokenSigningKey.generate().public
        uri = IssuerDirectory.from_json(original).issuer_request_uri
        swapped = IssuerDirectory(uri, (DirectoryKey(other),)).to_json()
        setup.helper_directory.write_text(swapped)
        try:
            refused = [device.seal_measurement([1, 1, 1, 1]) for _ in range(3)]
            done = upload(channel, refused, tokens=tokens[:3])
            assert (done.accepted, list(done.rejected)) == (3, [])  # the leader's checks pass
            counted = aggregated(channel, query_id)
            assert (counted.aggregated_reports, counted.refused_reports) == (0, 3)
        finally:
            setup.helper_directory.write_text(original)
        kept = [device.seal_measurement([0, 1, 0, 0]) for _ in range(2)]
        done = upload(channel, kept, tokens=tokens[3:])
        assert (done.accepted, list(done.rejected)) == (2, [])
        counted = aggregated(channel, query_id)
        assert (counted.aggregated_reports, counted.refused_reports) == (2, 3)
        # Both aggregate shares hold the two kept reports only (the helper checks the
        # leader's count before it releases; the sum is exact).
        release = release_secure_query(channel, ADMIN, setup.collector, query_id)
    assert release.reports == 2
    assert release.round_counts == [[0, 2, 0, 0]]


def test_tokens_of_two_devices_differ_only_in_nonce_and_signature(setup: Setup) -> None:
    with setup.pair.channel() as channel, grpc.insecure_channel(setup.issuer.address) as ic:
        device = token_query(setup, channel, SP)
        decoded = []
        for name in ("dev-0", "dev-1"):
            decoded.append(Token.decode(device.fetch_token(setup.client(ic, name))))
        key = setup.client(ic).key()
    a, b = decoded
    digest = report_challenge(key, device.query).digest()
    assert a.challenge_digest == b.challenge_digest == digest
    assert a.token_key_id == b.token_key_id == key.key.token_key_id
    assert a.nonce != b.nonce and a.authenticator != b.authenticator


def test_secure_simulate_fetches_a_token_per_device_and_the_release_counts_them(
    setup: Setup,
) -> None:
    leader = setup.pair.leader.address
    collector = setup.issuer.state_dir.parent / "cli-collector.key"
    created = run_cli(
        ADMIN, "secure", "create", "--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3",
        "--targets", "21,22", "--min-reports", "12", "--require-tokens",
        "--collector-key", str(collector), "--json", server=leader,
    )  # fmt: skip
    query = json.loads(created.stdout)
    assert query["require_tokens"] is True
    assert query["token_issuer"] == setup.issuer.address
    helper = ("--helper", setup.pair.helper.address)
    without = run_cli(
        ADMIN, "secure", "simulate", "-q", query["query_id"], "-n", "3", *helper,
        server=leader, ok=False,
    )  # fmt: skip
    assert without.returncode != 0 and "--issuer" in without.stderr
    sent = run_cli(
        ADMIN, "secure", "simulate", "-q", query["query_id"], "-n", "12", *helper,
        "--issuer", setup.issuer.address,
        "--enrollment-key", str(setup.issuer.state_dir / "enrollment.key"),
        server=leader,
    )  # fmt: skip
    assert "12 reports acknowledged (0 duplicates)" in sent.stdout, sent.stdout
    released = run_cli(
        ADMIN, "secure", "release", "-q", query["query_id"],
        "--collector-key", str(collector), "--json", server=leader,
    )  # fmt: skip
    assert json.loads(released.stdout)["release"]["participants"] == 12


def test_creating_a_token_query_needs_a_token_directory_at_both(
    tmp_path: Path, setup: Setup
) -> None:
    helper = Role("helper", tmp_path / "h.db", "127.0.0.1:0", extra=SMALL_BATCHES)
    helper.start()
    leader = Role(
        "leader",
        tmp_path / "l.db",
        "127.0.0.1:0",
        helper=helper.address,
        extra=("--token-directory", str(setup.issuer.directory)),
    )
    try:
        leader.start()
        with grpc.insecure_channel(leader.address) as channel:
            with pytest.raises(grpc.RpcError) as refused:
                create_secure_query(
                    channel, ADMIN, setup.collector, RR, TARGETS, 1, require_tokens=True
                )
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "the helper accepts no tokens" in str(refused.value.details())
            plain = create_secure_query(channel, ADMIN, setup.collector, RR, TARGETS, 1)
            assert not plain.require_tokens
        assert isinstance(plain, spb.SecureQuery)
    finally:
        leader.stop()
        helper.stop()


def test_a_spent_token_stays_spent_after_the_leader_is_killed(setup: Setup) -> None:
    pair = setup.pair
    with grpc.insecure_channel(setup.issuer.address) as ic:
        with pair.channel() as channel:
            device = token_query(setup, channel)
            issuer = setup.client(ic)
            key = issuer.key()
            tokens = issuer.tokens(key, [report_challenge(key, device.query)] * 4)
            bodies = [device.seal_measurement([0, 0, 1, 1]) for _ in range(4)]
            done = upload(channel, bodies, tokens=tokens)
            assert (done.accepted, list(done.rejected)) == (4, [])
        pair.leader.kill()  # SIGKILL right after the acknowledgement
        pair.leader.start()
        with pair.channel() as channel:
            names = {code.value[0]: code.name for code in grpc.StatusCode}
            replay = upload(channel, [device.seal_measurement([1, 1, 1, 1])], tokens=tokens[:1])
            assert [names[r.code] for r in replay.rejected] == ["ALREADY_EXISTS"]
            retry = upload(channel, bodies, tokens=tokens)
            assert (retry.accepted, retry.duplicates) == (0, 4)
            counted = aggregated(channel, device.query.query_id)
            assert (counted.aggregated_reports, counted.refused_reports) == (4, 0)
            release = release_secure_query(channel, ADMIN, setup.collector, device.query.query_id)
    assert release.round_counts == [[0, 0, 4, 4]]


def test_a_leader_restarted_without_its_directory_refuses_token_uploads(setup: Setup) -> None:
    leader = setup.pair.leader
    with grpc.insecure_channel(setup.issuer.address) as ic, setup.pair.channel() as channel:
        device = token_query(setup, channel)
        issuer = setup.client(ic)
        key = issuer.key()
        [token] = issuer.tokens(key, [report_challenge(key, device.query)])
    with_directory = leader.extra
    leader.stop()
    leader.extra = ()
    leader.start()
    try:
        with setup.pair.channel() as channel:
            body = device.seal_measurement([1, 0, 1, 0])
            done = upload(channel, [body], tokens=[token])
            names = {code.value[0]: code.name for code in grpc.StatusCode}
            assert [names[r.code] for r in done.rejected] == ["UNAVAILABLE"]
            assert "--token-directory" in done.rejected[0].message
            query = spb_grpc.SecureAdminStub(channel).GetSecureQuery(
                spb.GetSecureQueryRequest(query_id=device.query.query_id), metadata=ADMIN_AUTH
            )
            assert (query.pending_reports, query.aggregated_reports) == (0, 0)
    finally:
        leader.stop()
        leader.extra = with_directory
        leader.start()
    with setup.pair.channel() as channel:  # back with its directory: the same token counts
        done = upload(channel, [body], tokens=[token])
        assert (done.accepted, list(done.rejected)) == (1, [])
        assert aggregated(channel, device.query.query_id).aggregated_reports == 1
