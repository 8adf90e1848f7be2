"""gRPC channels to the aggregator: TLS when a CA file is given, plaintext otherwise.

    with open_channel("collector.example:50051", tls_ca="ca.pem") as channel:   # sync
        device.participate(channel)
    async with open_aio_channel(server, tls_ca=ca) as channel:                  # asyncio
        await run_query(channel, ...)

`tls_ca` is a PEM file of the CA certificate(s) that signed the server's certificate (the CLI's
`--tls-ca` / env LDPCOLLECT_TLS_CA). The server's certificate must name the host in `target`
(subject alternative name: DNS name or IP address). Plaintext is meant for 127.0.0.1 only.

Against a server that requires client certificates (`ldpcollect serve --tls-client-ca`), a
client also presents its `ClientIdentity`: a PEM certificate signed by that CA and its key (the
CLI reads them from LDPCOLLECT_TLS_CLIENT_CERT and LDPCOLLECT_TLS_CLIENT_KEY).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from client.targets import channel_target
from ldpcollect.errors import ParameterError

ChannelOptions = Sequence[tuple[str, int | str]]


CLIENT_CERT_ENV = "LDPCOLLECT_TLS_CLIENT_CERT"
CLIENT_KEY_ENV = "LDPCOLLECT_TLS_CLIENT_KEY"


@dataclass(frozen=True)
class ClientIdentity:
    """A client certificate (PEM, chain allowed) and its private key, for mutual TLS."""

    cert: Path
    key: Path

    @staticmethod
    def from_environment(environ: Mapping[str, str] = os.environ) -> ClientIdentity | None:
        """The identity LDPCOLLECT_TLS_CLIENT_CERT / _KEY name; None when neither is set."""
        cert, key = environ.get(CLIENT_CERT_ENV, ""), environ.get(CLIENT_KEY_ENV, "")
        if not cert and not key:
            return None
        if not cert or not key:
            raise ParameterError(
                f"{CLIENT_CERT_ENV}/{CLIENT_KEY_ENV}",
                (cert, key),
                "both set (client certificate and its private key) or neither",
            )
        return ClientIdentity(Path(cert), Path(key))

    def pem(self) -> tuple[bytes, bytes]:
        """(private key, certificate chain) as gRPC wants them; ParameterError naming the file."""
        return (
            _read_pem(CLIENT_KEY_ENV, self.key, b"PRIVATE KEY-----", "a PEM private key"),
            _read_pem(
                CLIENT_CERT_ENV, self.cert, b"-----BEGIN CERTIFICATE-----", "a PEM certificate"
            ),
        )


def _read_pem(parameter: str, path: Path, marker: bytes, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParameterError(parameter, str(path), f"a readable file: {what}", str(exc)) from None
    if marker not in data:
        raise ParameterError(parameter, str(path), what, f"no '{marker.decode()}' block")
    return data


def channel_credentials(
    tls_ca: str | Path | None, identity: ClientIdentity | None = None
) -> grpc.ChannelCredentials | None:
    """TLS credentials trusting the CAs in the PEM file `tls_ca` and presenting `identity` when
    given; None for plaintext."""
    if tls_ca is None or str(tls_ca) == "":
        if identity is not None:
            raise ParameterError(
                "--tls-ca", "", "a CA file whenever a client certificate is given (mutual TLS)"
            )
        return None
    try:
        roots = Path(tls_ca).read_bytes()
    except OSError as exc:
        raise ParameterError(
            "--tls-ca", str(tls_ca), "a readable PEM file of CA certificates", str(exc)
        ) from None
    if b"-----BEGIN CERTIFICATE-----" not in roots:
        raise ParameterError(
            "--tls-ca", str(tls_ca), "a PEM file of CA certificates", "no CERTIFICATE block"
        )
    if identity is None:
        return grpc.ssl_channel_credentials(root_certificates=roots)
    key, chain = identity.pem()
    return grpc.ssl_channel_credentials(
        root_certificates=roots, private_key=key, certificate_chain=chain
    )


def open_channel(
    target: str,
    tls_ca: str | Path | None = None,
    options: ChannelOptions = (),
    identity: ClientIdentity | None = None,
) -> grpc.Channel:
    """A synchronous channel to `target` (host:port, or several: `client.targets`): TLS if
    `tls_ca` is given (mutual TLS with `identity`)."""
    credentials = channel_credentials(tls_ca, identity)
    address, spread = channel_target(target)
    if credentials is None:
        return grpc.insecure_channel(address, options=[*spread, *options])
    return grpc.secure_channel(address, credentials, options=[*spread, *options])


def open_aio_channel(
    target: str,
    tls_ca: str | Path | None = None,
    options: ChannelOptions = (),
    identity: ClientIdentity | None = None,
) -> grpc.aio.Channel:
    """An asyncio channel to `target` (host:port, or several: `client.targets`): TLS if
    `tls_ca` is given (mutual TLS with `identity`)."""
    credentials = channel_credentials(tls_ca, identity)
    address, spread = channel_target(target)
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=[*spread, *options])
    return grpc.aio.secure_channel(address, credentials, options=[*spread, *options])
