"""Commands: issuer serve | enroll | directory (the token issuer, docs/admission.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ldpcollect_cli.service_errors import guarded

issuer_app = typer.Typer(
    help="The token issuer: anonymous, rate-limited admission tokens for devices.",
    no_args_is_help=True,
)
READY_PREFIX = "ldpcollect issuer serving on "

StateDir = Annotated[
    Path,
    typer.Option(
        "--state-dir",
        help="Folder of the issuer's private state: per-epoch token keys, the enrollment key "
        "and the quota database (created 0700, files 0600).",
    ),
]


@issuer_app.command("serve")
def issuer_serve(
    state_dir: StateDir = Path("ldpcollect-issuer"),
    tokens_per_epoch: Annotated[
        int,
        typer.Option("--tokens-per-epoch", "-k", min=1, help="K: tokens per device per epoch."),
    ] = 10,
    epoch_seconds: Annotated[
        float,
        typer.Option("--epoch-seconds", min=1.0, help="Epoch length; a new key each epoch."),
    ] = 86_400.0,
    listen: Annotated[str, typer.Option("--listen", help="host:port (port 0 = any).")] = (
        "127.0.0.1:50061"
    ),
    name: Annotated[
        str,
        typer.Option(
            "--name",
            help="The issuer name tokens are bound to (host or host:port); default: the "
            "address it binds.",
        ),
    ] = "",
    directory_out: Annotated[
        Path | None,
        typer.Option(
            "--directory-out",
            help="Write the public key directory (JSON) here at start and at every epoch "
            "change: give it to `ldpcollect serve --token-directory`.",
        ),
    ] = None,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", help="PEM certificate.")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="PEM private key.")] = None,
    tls_client_ca: Annotated[
        Path | None,
        typer.Option(
            "--tls-client-ca",
            help="Mutual TLS: devices present a certificate from this CA and are identified "
            "by it (one certificate, K tokens per epoch) instead of an enrollment secret.",
        ),
    ] = None,
    sign_processes: Annotated[
        int,
        typer.Option(
            "--sign-processes",
            min=0,
            max=256,
            help="Worker processes making blind signatures (0: one worker thread); issuance "
            "scales with the cores given here.",
        ),
    ] = 0,
) -> None:
    """Run the token issuer until SIGINT/SIGTERM."""
    from aggregator.issuer.server import IssuerConfig, IssuerServer, run

    config = IssuerConfig(
        state_dir=state_dir,
        tokens_per_epoch=tokens_per_epoch,
        epoch_seconds=epoch_seconds,
        listen=listen,
        issuer_name=name,
        directory_out=directory_out,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_client_ca=tls_client_ca,
        sign_processes=sign_processes,
    )

    def announce(server: IssuerServer, port: int) -> None:
        assert server.service is not None
        host = listen.rsplit(":", 1)[0]
        sys.stdout.write(
            f"{READY_PREFIX}{host}:{port} (name {server.service.issuer_name}, "
            f"K {tokens_per_epoch} per {epoch_seconds:g} s epoch)\n"
        )
        sys.stdout.flush()

    guarded(lambda: run(config, announce))


@issuer_app.command("enroll")
def issuer_enroll(
    device_ids: Annotated[list[str], typer.Argument(help="Device ids to enroll.")],
    state_dir: StateDir = Path("ldpcollect-issuer"),
) -> None:
    """Print `DEVICE_ID SECRET` for each device: the secret it presents to the issuer."""
    from aggregator.issuer.server import enrollment_key_path
    from ldpcollect.admission.enrollment import device_secret, load_or_create_key, valid_device_id
    from ldpcollect.errors import ParameterError

    def work() -> None:
        key = load_or_create_key(enrollment_key_path(state_dir))
        for device_id in device_ids:
            if not valid_device_id(device_id):
                raise ParameterError("DEVICE_ID", device_id, "1 to 128 printable characters")
            sys.stdout.write(f"{device_id} {device_secret(key, device_id)}\n")

    guarded(work)


@issuer_app.command("directory")
def issuer_directory(
    issuer: Annotated[str, typer.Option("--issuer", help="The issuer's host:port.")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the directory here (atomically) for `serve --token-directory`; "
            "default: print it.",
        ),
    ] = None,
    tls_ca: Annotated[
        Path | None,
        typer.Option("--tls-ca", help="PEM CA certificate(s) of the issuer's TLS certificate."),
    ] = None,
) -> None:
    """Fetch the issuer's public key directory (GetDirectory): an aggregator on another machine
    than the issuer gets its keys this way (run it again after each epoch change)."""
    import os

    from client.channels import ClientIdentity, open_channel
    from ldpcollect.v1 import issuer_pb2 as ipb
    from ldpcollect.v1 import issuer_pb2_grpc as ipb_grpc

    def work() -> None:
        identity = ClientIdentity.from_environment()
        with open_channel(issuer, tls_ca, identity=identity) as channel:
            response = ipb_grpc.IssuerStub(channel).GetDirectory(
                ipb.GetDirectoryRequest(), timeout=30
            )
        if out is None:
            sys.stdout.write(response.directory_json + "\n")
            return
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(response.directory_json)
        os.replace(tmp, out)

    guarded(work)


def register(app: typer.Typer) -> None:
    app.add_typer(issuer_app, name="issuer")
