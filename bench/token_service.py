"""Tokens through the real services: issued by `ldpcollect issuer serve`, redeemed on the
aggregator's batch path, with the batch path's own rate measured in the same run.

    .venv/bin/python -m bench.token_service [--issue 200] [--reports 10000] [--reps 2]
                                            [--verify-processes 2] [--json]

Issuance: one enrolled device asks the issuer process for `--issue` tokens in calls of 20
(IssueTokens over 127.0.0.1, the quota committed and the blind signatures made per call); the
client's blinding is done before the clock starts. Once signing in a thread, once in
`--verify-processes` processes (`issuer serve --sign-processes`).

Redemption: an aggregator process started with `--token-directory` receives the same kind of
batches (1,000 reports, 8 in flight, `client.loadgen` as bench.ingest uses) for a plain query
and for a query that requires tokens, alternately, `--reps` times each (best kept). Once
verifying in a thread, once in `--verify-processes` processes (`serve
--token-verify-processes`). The tokens are made with OpenSSL RSA-PSS signing under a key this
benchmark publishes in the directory (a token is the same bytes however its signature was
made; blind signing here would take minutes). The ratio printed is the token query's batch
rate over the plain query's, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import tempfile
import time
from pathlib import Path

import grpc
from cryptography.hazmat.primitives import hashes
from rich.console import Console

from client.admin import connect_admin
from client.loadgen import build_reports, run_load
from client.tokens import Enrollment, IssuerClient
from ldpcollect.admission import blind_rsa
from ldpcollect.admission.directory import DirectoryKey, IssuerDirectory
from ldpcollect.admission.enrollment import device_secret
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import Token, authenticator_input, request_token
from ldpcollect.mechanisms import RandomizedResponse
from ldpcollect.v1 import issuer_pb2 as ipb
from ldpcollect_cli.demo import ISSUER_READY
from ldpcollect_cli.serve_subprocess import cli_subprocess
from ldpcollect_cli.serving import READY_PREFIX

ADMIN = "bench-admin-token"
TARGETS = 100
console = Console(stderr=True)


def issuance_rate(tmp: Path, n: int, sign_processes: int = 0) -> float:
    """Tokens/s the issuer process signs for one device (calls of 20, wall time)."""
    state = tmp / f"issuer-{sign_processes}"
    args = ["issuer", "serve", "--state-dir", str(state), "--listen", "127.0.0.1:0"]
    args += ["--sign-processes", str(sign_processes)]
    with cli_subprocess([*args, "-k", str(10 * n)], {}, ISSUER_READY, "issuer") as address:
        secret = device_secret((state / "enrollment.key").read_bytes(), "bench-device")
        with grpc.insecure_channel(address) as channel:
            client = IssuerClient(channel, Enrollment("bench-device", secret), timeout=600)
            key = client.key()
            challenge = query_challenge(key.issuer_name, "bench", 1)
            requests = [request_token(key.key, challenge)[0].encode() for _ in range(n)]
            calls = [requests[i : i + 20] for i in range(0, n, 20)]
            stub = client._stub
            metadata = client.enrollment.metadata()
            start = time.perf_counter()
            for call in calls:
                stub.IssueTokens(
                    ipb.IssueTokensRequest(token_requests=call), metadata=metadata, timeout=600
                )
            return n / (time.perf_counter() - start)


def signed_tokens(key: TokenSigningKey, issuer: str, query_id: str, n: int) -> list[bytes]:
    digest = query_challenge(issuer, query_id, 1).digest()
    padding = blind_rsa.pss_padding(blind_rsa.PSS_DETERMINISTIC)
    tokens = []
    for _ in range(n):
        nonce = secrets.token_bytes(32)
        message = authenticator_input(nonce, digest, key.public.token_key_id)
        signature = key.private_key.sign(message, padding, hashes.SHA384())
        tokens.append(Token(nonce, digest, key.public.token_key_id, signature).encode())
    return tokens


def batch_rates(tmp: Path, n: int, reps: int, verify_processes: int = 0) -> dict[str, float]:
    """Best batch-path reports/s for a plain query and a token query, measured alternately,
    on a fresh aggregator verifying in a thread or in `verify_processes` processes."""
    tmp = tmp / f"verify-{verify_processes}"
    tmp.mkdir()
    key = TokenSigningKey.generate()
    issuer = "issuer.bench"
    directory = tmp / "directory.json"
    uri = f"grpc://{issuer}/ldpcollect.v1.Issuer/IssueTokens"
    directory.write_text(IssuerDirectory(uri, (DirectoryKey(key.public),)).to_json())
    console.print(f"signing {n * reps:,} tokens with OpenSSL...")
    tokens = signed_tokens(key, issuer, "with-tokens", n * reps)
    args = ["serve", "--db", str(tmp / "agg.db"), "--listen", "127.0.0.1:0"]
    best = {"plain": 0.0, "tokens": 0.0}
    args += ["--token-directory", str(directory)]
    args += ["--token-verify-processes", str(verify_processes)]
    env = {"LDPCOLLECT_ADMIN_TOKEN": ADMIN}
    with cli_subprocess(args, env, READY_PREFIX, "aggregator") as address:
        with connect_admin(address, ADMIN) as admin:
            mech = RandomizedResponse("0.85", "0.3")
            targets = list(range(1, TARGETS + 1))
            admin.create_query(mech, "grid", targets, query_id="plain")
            admin.create_query(mech, "grid", targets, query_id="with-tokens", require_tokens=True)
        for rep in range(reps):
            for query_id in ("plain", "with-tokens"):
                reports = build_reports(query_id, TARGETS, n, seed=2 * rep + len(query_id))
                if query_id == "with-tokens":
                    for report, token in zip(reports, tokens[rep * n :], strict=False):
                        report.token = token
                result = asyncio.run(run_load(address, reports, "batch", 8, 1000))
                if result.acknowledged != n:
                    raise RuntimeError(f"{query_id}: {result.acknowledged} of {n} acknowledged")
                name = "plain" if query_id == "plain" else "tokens"
                best[name] = max(best[name], result.reports_per_second)
                console.print(
                    f"{query_id} (verify processes {verify_processes}): "
                    f"{result.reports_per_second:,.0f} reports/s"
                )
    return best


def measure(issue: int, reports: int, reps: int, processes: int = 2) -> dict[str, float]:
    """Issuance, then the batch path verifying in a thread and in `processes` processes."""
    with tempfile.TemporaryDirectory() as tmp_text:
        tmp = Path(tmp_text)
        issued = issuance_rate(tmp, issue)
        issued_pooled = issuance_rate(tmp, issue, processes) if processes else None
        rates = batch_rates(tmp, reports, reps)
        pooled = batch_rates(tmp, reports, reps, processes) if processes else None
    figures = {
        "issued_tokens_per_second_service": issued,
        "batch_reports_per_second_plain": rates["plain"],
        "batch_reports_per_second_with_tokens": rates["tokens"],
        "redeemed_tokens_per_second_batch_path": rates["tokens"],
        "token_over_plain_batch_rate": rates["tokens"] / rates["plain"],
        "extra_microseconds_per_report_with_tokens": 1e6 / rates["tokens"] - 1e6 / rates["plain"],
    }
    if pooled is not None and issued_pooled is not None:
        figures |= {
            "issued_tokens_per_second_service_pooled": issued_pooled,
            "issuance_speedup_pooled": issued_pooled / issued,
            "verify_processes": processes,
            "batch_reports_per_second_plain_pooled_run": pooled["plain"],
            "batch_reports_per_second_with_tokens_pooled": pooled["tokens"],
            "token_over_plain_batch_rate_pooled": pooled["tokens"] / pooled["plain"],
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--issue", type=int, default=200)
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument(
        "--verify-processes",
        type=int,
        default=2,
        help="worker processes of the second runs (verifying, and signing); 0 skips them",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.issue, args.reports, args.reps, args.verify_processes)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    out = Console()
    issued = figures["issued_tokens_per_second_service"]
    out.print(f"issued through the issuer service: {issued:,.0f} tokens/s")
    out.print(
        f"batch path: {figures['batch_reports_per_second_plain']:,.0f} reports/s plain, "
        f"{figures['batch_reports_per_second_with_tokens']:,.0f} reports/s with a token each "
        f"(ratio {figures['token_over_plain_batch_rate']:.3f}, "
        f"+{figures['extra_microseconds_per_report_with_tokens']:.1f} µs per report)"
    )
    if "verify_processes" in figures:
        out.print(
            f"issued with {figures['verify_processes']:.0f} signing processes: "
            f"{figures['issued_tokens_per_second_service_pooled']:,.0f} tokens/s "
            f"({figures['issuance_speedup_pooled']:.2f}x)"
        )
        out.print(
            f"with {figures['verify_processes']:.0f} verification processes: "
            f"{figures['batch_reports_per_second_with_tokens_pooled']:,.0f} reports/s with "
            f"tokens vs {figures['batch_reports_per_second_plain_pooled_run']:,.0f} plain "
            f"(ratio {figures['token_over_plain_batch_rate_pooled']:.3f})"
        )


if __name__ == "__main__":
    main()
