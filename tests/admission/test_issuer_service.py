"""The issuer as a real process: directory, enrollment, quota per epoch (durable), refusals."""

from __future__ import annotations

import stat
from pathlib import Path

import grpc
import pytest

from client.tokens import Enrollment, IssuerClient, blind_requests
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.verification import verify_tokens
from ldpcollect.v1 import issuer_pb2 as ipb
from ldpcollect.v1 import issuer_pb2_grpc as ipb_grpc
from tests.admission.issuer_process import enroll, issuing
from tests.serving import run_cli


def test_an_enrolled_device_gets_k_tokens_per_epoch_even_across_a_restart(
    tmp_path: Path,
) -> None:
    state = tmp_path / "issuer"
    secrets = enroll(state, "dev-1", "dev-2")
    with (
        issuing(state, tokens_per_epoch=3) as issuer,
        grpc.insecure_channel(issuer.address) as channel,
    ):
        client = IssuerClient(channel, Enrollment("dev-1", secrets["dev-1"]))
        key = client.key()
        assert key.issuer_name == issuer.address
        challenge = query_challenge(key.issuer_name, "q", 1)
        tokens = client.tokens(key, [challenge, challenge])
        assert verify_tokens(key.key, tokens, challenge.digest()) == [True, True]
        first_key_pem = sorted(state.glob("token-key-epoch-*.pem"))
    # A restart keeps the key and the count: one token left for dev-1, three for dev-2.
    with (
        issuing(state, tokens_per_epoch=3) as issuer,
        grpc.insecure_channel(issuer.address) as channel,
    ):
        client = IssuerClient(channel, Enrollment("dev-1", secrets["dev-1"]))
        assert client.key().key == key.key
        with pytest.raises(grpc.RpcError) as refused:
            client.tokens(key, [challenge, challenge])
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "1 of 3 left" in str(refused.value.details())
        assert len(client.tokens(key, [challenge])) == 1  # the refusal counted nothing
        other = IssuerClient(channel, Enrollment("dev-2", secrets["dev-2"]))
        assert len(other.tokens(key, [challenge] * 3)) == 3
    assert sorted(state.glob("token-key-epoch-*.pem")) == first_key_pem
    for path in [*first_key_pem, state / "enrollment.key", state / "quota.sqlite"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_the_issuer_refuses_unenrolled_callers_and_bad_requests_precisely(
    tmp_path: Path,
) -> None:
    state = tmp_path / "issuer"
    secrets = enroll(state, "dev-1")
    with issuing(state) as issuer, grpc.insecure_channel(issuer.address) as channel:
        stub = ipb_grpc.IssuerStub(channel)
        good = Enrollment("dev-1", secrets["dev-1"])
        client = IssuerClient(channel, good)
        key = client.key()
        challenge = query_challenge(key.issuer_name, "q", 1)

        def code_of(request: ipb.IssueTokensRequest, metadata: tuple[tuple[str, str], ...]) -> str:
            with pytest.raises(grpc.RpcError) as refused:
                stub.IssueTokens(request, metadata=metadata, timeout=30)
            return f"{refused.value.code().name}: {refused.value.details()}"

        request, _ = blind_requests(key, [challenge])
        assert code_of(request, ()).startswith("UNAUTHENTICATED")
        wrong = Enrollment("dev-1", "00" * 32).metadata()
        assert code_of(request, wrong).startswith("PERMISSION_DENIED")
        impostor = Enrollment("dev-2", secrets["dev-1"]).metadata()
        assert code_of(request, impostor).startswith("PERMISSION_DENIED")
        garbage = ipb.IssueTokensRequest(token_requests=[b"\x00\x02\x01"])
        assert "token_requests[0]" in code_of(garbage, good.metadata())
        assert code_of(ipb.IssueTokensRequest(), good.metadata()).startswith("INVALID_ARGUMENT")
        stale = bytearray(request.token_requests[0])
        stale[2] ^= 0xFF  # names another key
        stale_request = ipb.IssueTokensRequest(token_requests=[bytes(stale)])
        assert code_of(stale_request, good.metadata()).startswith("FAILED_PRECONDITION")
        # None of the refusals took a token from dev-1's quota.
        assert len(client.tokens(key, [challenge] * 3)) == 3


def test_the_published_directory_lists_the_current_key(tmp_path: Path) -> None:
    from ldpcollect.admission.directory import IssuerDirectory

    with issuing(tmp_path / "issuer") as issuer, grpc.insecure_channel(issuer.address) as channel:
        response = ipb_grpc.IssuerStub(channel).GetDirectory(ipb.GetDirectoryRequest(), timeout=30)
        written = IssuerDirectory.from_json(issuer.directory.read_text())
        served = IssuerDirectory.from_json(response.directory_json)
        assert written == served
        assert written.issuer_request_uri.startswith(f"grpc://{issuer.address}/")
        assert response.tokens_per_epoch == 3
        # What an aggregator on another machine runs to get the same file.
        fetched = tmp_path / "fetched.json"
        run_cli("", "issuer", "directory", "--issuer", issuer.address, "--out", str(fetched))
        assert IssuerDirectory.from_json(fetched.read_text()) == written


def test_with_mutual_tls_the_client_certificate_is_the_device(tmp_path: Path) -> None:
    from client.channels import ClientIdentity, open_channel
    from client.tokens import CERTIFICATE
    from tests.cli.tls_certs import make_tls_files

    tls = make_tls_files(tmp_path)
    state = tmp_path / "issuer"
    secrets = enroll(state, "dev-1")
    args = ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
    with issuing(state, *args, "--tls-client-ca", str(tls.ca), tokens_per_epoch=2) as issuer:
        identity = ClientIdentity(tls.client_cert, tls.client_key)
        with open_channel(issuer.address, tls.ca, identity=identity) as channel:
            by_certificate = IssuerClient(channel, CERTIFICATE)
            key = by_certificate.key()
            challenge = query_challenge(key.issuer_name, "q", 1)
            assert len(by_certificate.tokens(key, [challenge, challenge])) == 2
            with pytest.raises(grpc.RpcError) as refused:  # the certificate's quota is spent
                by_certificate.tokens(key, [challenge])
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            # An enrollment secret over the same connection is its own device.
            by_secret = IssuerClient(channel, Enrollment("dev-1", secrets["dev-1"]))
            assert len(by_secret.tokens(key, [challenge])) == 1
        with pytest.raises(grpc.RpcError), open_channel(issuer.address, tls.ca) as anonymous:
            IssuerClient(anonymous, CERTIFICATE).key()  # no client certificate: no connection


def test_signing_in_worker_processes_issues_valid_tokens_and_refuses_bad_requests(
    tmp_path: Path,
) -> None:
    state = tmp_path / "issuer"
    secrets = enroll(state, "dev-1")
    with (
        issuing(state, "--sign-processes", "2", tokens_per_epoch=4) as issuer,
        grpc.insecure_channel(issuer.address) as channel,
    ):
        client = IssuerClient(channel, Enrollment("dev-1", secrets["dev-1"]))
        key = client.key()
        challenge = query_challenge(key.issuer_name, "q", 1)
        request, _ = blind_requests(key, [challenge] * 2)
        bad = bytearray(request.token_requests[1])
        bad[3:] = b"\xff" * 256  # not below the modulus: not a blinded message
        mixed = ipb.IssueTokensRequest(token_requests=[request.token_requests[0], bytes(bad)])
        stub = ipb_grpc.IssuerStub(channel)
        metadata = client.enrollment.metadata()
        with pytest.raises(grpc.RpcError) as refused:
            stub.IssueTokens(mixed, metadata=metadata, timeout=60)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        tokens = client.tokens(key, [challenge] * 4)  # the refusal took none of the 4
        assert verify_tokens(key.key, tokens, challenge.digest()) == [True] * 4
