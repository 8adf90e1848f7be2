"""`ldpcollect secure simulate`: simulated devices take the helper's key from the helper (or
its operator's pinned copy) and the query from the leader, draw, seal and upload once to the
leader (refusing when the leader's copy of the helper's key differs);
for a query that requires admission tokens each device (enrolled at the issuer as
<prefix>-<i>, like `fleet run --issuer`) first fetches its own token."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import grpc
from rich.console import Console

from client.channels import open_channel
from client.fleet_tokens import FleetTokens
from client.secure_device import SecureDevice, fetch_query, report_challenge, upload
from client.upload_parts import upload_parts
from ldpcollect.errors import ParameterError
from ldpcollect.secure.sealing import HpkeConfig

console = Console()
CHUNK = 500
CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def simulate_secure(
    query_id: str,
    devices: int,
    seed: int,
    server: str,
    tls_ca: Path | None,
    tokens: FleetTokens | None,
    helper_config: HpkeConfig,
) -> None:
    """`helper_config`: the helper's key as the helper publishes it (not the leader's copy)."""
    rng = random.Random(seed)
    with open_channel(server, tls_ca) as channel:
        device = SecureDevice(fetch_query(channel, query_id), helper_config)
        query = device.query
        if query.require_tokens and tokens is None:
            raise ParameterError(
                "--issuer", None, "given", f"secure query {query_id!r} requires tokens"
            )
        elsewhere = max(query.targets) + 1  # a cell outside the targets
        cells = [*query.targets, elsewhere]
        bodies = [device.seal(device.draw(rng.choice(cells))) for _ in range(devices)]
        sent = list(range(devices))
        by_device: dict[int, bytes] = {}
        failures: Counter[tuple[str, str]] = Counter()
        if query.require_tokens and tokens is not None:
            by_device, failures = asyncio.run(
                tokens.fetch_for(lambda key: report_challenge(key, query), sent)
            )
            sent = sorted(by_device)  # a device the issuer refused sends nothing
        accepted = duplicates = 0
        sizes = [len(bodies[d]) + len(by_device.get(d, b"")) for d in sent]
        for indexes in upload_parts(sizes, max_reports=CHUNK):
            part = [sent[i] for i in indexes]
            done = upload(
                channel,
                [bodies[d] for d in part],
                tokens=[by_device[d] for d in part] if by_device else (),
            )
            accepted, duplicates = accepted + done.accepted, duplicates + done.duplicates
            for rejected in done.rejected:
                failures[(CODE_NAMES.get(rejected.code, "?"), rejected.message)] += 1
    console.print(f"{accepted} reports acknowledged ({duplicates} duplicates)")
    for (code, message), count in sorted(failures.items()):
        console.print(f"{count} refused ({code}): {message}")
