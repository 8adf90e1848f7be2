"""gRPC channels to the aggregator: TLS when a CA file is given, plaintext otherwise.

    with open_channel("collector.example:50051", tls_ca="ca.pem") as channel:   # sync
        device.participate(channel)
    async with open_aio_channel(server, tls_ca=ca) as channel:                  # asyncio
        await run_query(channel, ...)

`tls_ca` is a PEM file of the CA certificate(s) that signed the server's certificate (the CLI's
`--tls-ca` / env LDPCOLLECT_TLS_CA). The server's certificate must name the host in `target`
(subject alternative name: DNS name or IP address). Plaintext is meant for 127.0.0.1 only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import grpc
import grpc.aio

from ldpcollect.errors import ParameterError

ChannelOptions = Sequence[tuple[str, int | str]]


def channel_credentials(tls_ca: str | Path | None) -> grpc.ChannelCredentials | None:
    """TLS credentials trusting the CAs in the PEM file `tls_ca`; None for plaintext."""
    if tls_ca is None or str(tls_ca) == "":
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
    return grpc.ssl_channel_credentials(root_certificates=roots)


def open_channel(
    target: str, tls_ca: str | Path | None = None, options: ChannelOptions = ()
) -> grpc.Channel:
    """A synchronous channel to `target` (host:port): TLS if `tls_ca` is given."""
    credentials = channel_credentials(tls_ca)
    if credentials is None:
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(target, credentials, options=options)


def open_aio_channel(
    target: str, tls_ca: str | Path | None = None, options: ChannelOptions = ()
) -> grpc.aio.Channel:
    """An asyncio channel to `target` (host:port): TLS if `tls_ca` is given."""
    credentials = channel_credentials(tls_ca)
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(target, credentials, options=options)
