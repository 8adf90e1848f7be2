"""What admission tokens cost the secure mode's whole path, A/B in the same run.

    .venv/bin/python -m bench.secure_tokens [--reports 1000] [--runs 3] [--mechanism rr] [--json]

Alternates runs of a real helper and leader (`ldpcollect serve --role ...`, fresh SQLite
files each run) for a plain secure query and for one created with --require-tokens (both
roles given an issuer directory); reports are sealed and tokens issued beforehand (an
in-process `Issuer`), so the clock covers only upload until both aggregators have durably
aggregated every report, as `bench/secure.py`'s whole-path figure. With tokens the leader
verifies each token before acknowledging and the helper again in each job. Prints each run,
the medians and the ratio tokens / plain.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.secure_path import BATCH, _sealed, wait_aggregated
from client.secure_collector import create_secure_query
from client.secure_device import fetch_query, report_challenge, upload
from client.tokens import IssuerKey
from ldpcollect import geo
from ldpcollect.admission.issuer import Issuer
from ldpcollect.admission.tokens import finalize_token, request_token
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect_cli.demo import block_targets
from ldpcollect_cli.secure_subprocess import secure_deployment

ISSUER_NAME = "bench-issuer.example"


def path_rate(mechanism: str, n: int, issuer: Issuer | None, directory: Path | None) -> float:
    """Reports per second from the first upload until all are aggregated at both."""
    targets = block_targets(geo.DEFAULT_CENTER)
    mech = RandomizedResponse("0.85", "0.3") if mechanism == "rr" else SamplingPrivacy("0.5")
    with secure_deployment("bench-secure-tokens-", None, directory) as run:
        channel = run.channel
        created = create_secure_query(
            channel, run.admin_token, run.collector, mech, targets, 100, require_tokens=bool(issuer)
        )
        query = fetch_query(channel, created.query_id)
        bodies = _sealed(query, run.helper, targets, n)
        tokens: list[bytes] = []
        if issuer is not None:
            challenge = report_challenge(IssuerKey(ISSUER_NAME, issuer.public_key), query)
            for _ in range(n):
                request, pending = request_token(issuer.public_key, challenge)
                [response] = issuer.issue("bench", [request])
                tokens.append(finalize_token(pending, response).encode())
        start = time.perf_counter()
        for i in range(0, n, BATCH):
            part = tokens[i : i + BATCH]
            done = upload(channel, bodies[i : i + BATCH], tokens=part)
            assert not done.rejected, done.rejected[0].message
        state = wait_aggregated(channel, run.admin_token, query.query_id, n)
        seconds = time.perf_counter() - start
        assert state.refused_reports == 0
    return n / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mechanism", choices=("rr", "sp"), default="rr")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    issuer = Issuer(tokens_per_epoch=10**9)
    plain: list[float] = []
    with_tokens: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-issuer-") as tmp:
        directory = Path(tmp) / "directory.json"
        directory.write_text(issuer.directory(f"grpc://{ISSUER_NAME}").to_json())
        for run in range(args.runs):
            plain.append(path_rate(args.mechanism, args.reports, None, None))
            with_tokens.append(path_rate(args.mechanism, args.reports, issuer, directory))
            if not args.json:
                print(
                    f"run {run + 1}: plain {plain[-1]:,.0f} reports/s, "
                    f"tokens {with_tokens[-1]:,.0f} reports/s"
                )
    a, b = statistics.median(plain), statistics.median(with_tokens)
    result = {
        "mechanism": args.mechanism,
        "reports": args.reports,
        "plain_per_second": plain,
        "tokens_per_second": with_tokens,
        "median_plain": a,
        "median_tokens": b,
        "ratio_tokens_over_plain": b / a,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"median: plain {a:,.0f} reports/s, tokens {b:,.0f} reports/s, ratio {b / a:.3f}")


if __name__ == "__main__":
    main()
