"""Unlinkability through the real issuer process: a token carries nothing from its issuance
but the published key id, and the issuer keeps nothing of what it signed."""

from __future__ import annotations

from pathlib import Path

import grpc

from client.tokens import Enrollment, IssuerClient, blind_requests, finish_tokens
from ldpcollect.admission.directory import IssuerDirectory
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.tokens import Token
from ldpcollect.v1 import issuer_pb2_grpc as ipb_grpc
from tests.admission.issuer_process import enroll, issuing


def test_a_token_holds_only_the_device_nonce_public_challenge_key_id_and_signature(
    tmp_path: Path,
) -> None:
    state = tmp_path / "issuer"
    secrets = enroll(state, "dev-a", "dev-b")
    with issuing(state) as issuer, grpc.insecure_channel(issuer.address) as channel:
        stub = ipb_grpc.IssuerStub(channel)
        seen_by_issuer: list[bytes] = []
        tokens: list[Token] = []
        for device in ("dev-a", "dev-b"):
            enrollment = Enrollment(device, secrets[device])
            key = IssuerClient(channel, enrollment).key()
            challenge = query_challenge(key.issuer_name, "q", 1)
            request, pending = blind_requests(key, [challenge])
            response = stub.IssueTokens(request, metadata=enrollment.metadata(), timeout=30)
            seen_by_issuer += [*request.token_requests, *response.token_responses]
            [finished] = finish_tokens(pending, response)
            tokens.append(Token.decode(finished))
        published = IssuerDirectory.from_json(issuer.directory.read_text()).token_keys[0]
    a, b = tokens
    # Everything but the nonce (the device's) and the signature is the same for both
    # devices: the public challenge digest and the published key id.
    assert a.token_type == b.token_type == 0x0002
    assert a.challenge_digest == b.challenge_digest == challenge.digest()
    assert a.token_key_id == b.token_key_id == published.token_key.token_key_id
    assert a.nonce != b.nonce and a.authenticator != b.authenticator
    # Nothing the issuer saw or sent (blinded messages, blind signatures) is in a token, and
    # nothing of a token (nonce, signature) is in what the issuer saw or keeps on disk.
    for token in tokens:
        encoded = token.encode()
        for message in seen_by_issuer:
            assert message[-256:] not in encoded
            assert token.nonce not in message and token.authenticator not in message
        for path in state.iterdir():
            data = path.read_bytes()
            assert token.nonce not in data and token.authenticator not in data, path
