"""Token cost: issuance (client blind, issuer blind sign, client finalize) and verification.

    .venv/bin/python -m bench.tokens [--tokens 200] [--verify 2000] [--ingest-reports 100000]
                                     [--no-ingest] [--no-service] [--json]

Times each step of type-2 issuance per token, and `verify_tokens` on a batch, serially, in two
threads and in a two-process pool. Signing and verification run on OpenSSL in one call per
batch (`ldpcollect/admission/_native_rsa.c`); the Python references (`blind_rsa.blind_sign`,
`check_tokens_python`) are timed beside them. Baselines measured in the same run, so the
ratios hold however busy the machine is: `openssl speed -seconds 3 rsa2048` (the machine's
OpenSSL, sign and verify per core, CPU time as ours), `cryptography`'s own RSA-PSS signing
(the same key), and the aggregator's durable batch ingest (bench.ingest, batch path, its own
processes on 127.0.0.1) for verification: how many times the batch path's whole per-report
time verifying one token per report would cost. Goals (issue 26): issuance at least 1,000
tokens/s per core, verification within 1.5x of `openssl speed`'s per core. Then, unless
--no-service, the real services (bench.token_service): tokens/s issued by the issuer process,
and the batch path's rate for a query that requires tokens over its rate for a plain query, in
the same run.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass

from cryptography.hazmat.primitives import hashes
from rich.console import Console
from rich.table import Table

from bench import token_service
from ldpcollect.admission import blind_rsa
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import (
    PendingToken,
    TokenRequest,
    TokenResponse,
    finalize_token,
    request_token,
    sign_token_requests,
)
from ldpcollect.admission.verification import check_tokens_python, verify_tokens

CHALLENGE = query_challenge("issuer.bench", "bench-tokens", 1, ["aggregator.bench"])
console = Console(stderr=True)


@dataclass
class Step:
    step: str
    who: str
    tokens: int
    microseconds_per_token: float
    cpu_microseconds_per_token: float | None  # this process's CPU time; None when pooled

    @property
    def tokens_per_second(self) -> float:
        return 1e6 / self.microseconds_per_token


def per_token(fn: Callable[[], object], count: int, repeat: int = 3) -> tuple[float, float]:
    """Wall and CPU microseconds per token, each the best of `repeat` runs (the least disturbed
    by other work on a shared machine)."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall / count * 1e6, cpu / count * 1e6


def pooled(executor: Executor, key: TokenSigningKey, tokens: list[bytes], workers: int) -> None:
    share = -(-len(tokens) // workers)
    chunks = [tokens[i : i + share] for i in range(0, len(tokens), share)]
    digests = [CHALLENGE.digest()] * len(chunks)
    results = executor.map(verify_tokens, [key.public] * len(chunks), chunks, digests)
    assert all(all(r) for r in results)


def measure(args: argparse.Namespace) -> list[Step]:
    key = TokenSigningKey.generate()
    n = args.tokens
    reference = max(1, n // 4)  # the Python references are slow: fewer tokens
    pairs: list[tuple[TokenRequest, PendingToken]] = []
    responses: list[TokenResponse] = []
    openssl_pss = blind_rsa.pss_padding(blind_rsa.PSS_DETERMINISTIC)

    def blind() -> None:
        pairs[:] = [request_token(key.public, CHALLENGE) for _ in range(n)]

    def sign() -> None:
        responses[:] = sign_token_requests(key, [request for request, _ in pairs])

    def python_sign() -> None:
        for request, _ in pairs[:reference]:
            blind_rsa.blind_sign(key.private_key, request.blinded_msg)

    def openssl_sign() -> None:
        for _ in range(n):
            key.private_key.sign(b"token input", openssl_pss, hashes.SHA384())

    def finalize() -> None:
        for (_, pending), response in zip(pairs, responses, strict=True):
            finalize_token(pending, response)

    steps = [
        Step("blind (request_token)", "device", n, *per_token(blind, n)),
        Step("blind sign (sign_token_requests, OpenSSL)", "issuer", n, *per_token(sign, n)),
        Step(
            "reference: Python blind_rsa.blind_sign",
            "issuer",
            reference,
            *per_token(python_sign, reference),
        ),
        Step("baseline: OpenSSL RSA-PSS sign", "issuer", n, *per_token(openssl_sign, n)),
        Step("finalize (finalize_token)", "device", n, *per_token(finalize, n)),
    ]
    token = finalize_token(pairs[0][1], responses[0]).encode()
    batch = [token] * args.verify
    steps.append(
        Step(
            "verify_tokens, 1 thread",
            "aggregator",
            len(batch),
            *per_token(lambda: verify_tokens(key.public, batch, CHALLENGE.digest()), len(batch)),
        )
    )
    python_batch = batch[: max(1, len(batch) // 4)]
    steps.append(
        Step(
            "reference: check_tokens_python, 1 thread",
            "aggregator",
            len(python_batch),
            *per_token(
                lambda: check_tokens_python(key.public, python_batch, CHALLENGE.digest()),
                len(python_batch),
            ),
        )
    )
    with ThreadPoolExecutor(2) as threads:
        steps.append(
            Step(
                "verify_tokens, 2 threads",
                "aggregator",
                len(batch),
                per_token(lambda: pooled(threads, key, batch, 2), len(batch))[0],
                None,
            )
        )
    with ProcessPoolExecutor(2) as processes:
        pooled(processes, key, batch[:2], 2)  # start the workers before timing
        steps.append(
            Step(
                "verify_tokens, 2 processes",
                "aggregator",
                len(batch),
                per_token(lambda: pooled(processes, key, batch, 2), len(batch))[0],
                None,
            )
        )
    return steps


def openssl_speed() -> tuple[float, float]:
    """(sign, verify) µs per RSA-2048 operation per core, from `openssl speed -seconds 3
    rsa2048` run now (the machine's own OpenSSL; it times CPU, as `per_token`'s CPU column)."""
    console.print("measuring `openssl speed -seconds 3 rsa2048` (about 20 s)...")
    out = subprocess.run(
        ["openssl", "speed", "-seconds", "3", "rsa2048"], check=True, capture_output=True, text=True
    ).stdout
    match = re.search(r"^rsa\s+2048 bits\s+\S+s\s+\S+s\s+([\d.]+)\s+([\d.]+)", out, re.M)
    if match is None:
        raise RuntimeError(f"could not read `openssl speed` output:\n{out}")
    return 1e6 / float(match[1]), 1e6 / float(match[2])


def batch_ingest_rate(reports: int) -> float:
    """Durable batch-path reports/s of the aggregator, measured now by bench.ingest."""
    console.print(f"measuring the aggregator's batch ingest ({reports:,} reports)...")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.ingest",
            "--modes",
            "batch",
            "--reports",
            str(reports),
            "--json",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result = json.loads(out)["results"][0]
    return float(result["aggregator"]["reports_per_second"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=200, help="tokens issued per step")
    parser.add_argument("--verify", type=int, default=2000, help="tokens per verified batch")
    parser.add_argument("--ingest-reports", type=int, default=100_000)
    parser.add_argument("--no-ingest", action="store_true", help="skip the ingest baseline")
    parser.add_argument("--no-service", action="store_true", help="skip bench.token_service")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args()

    openssl_sign_us, openssl_verify_us = openssl_speed()
    steps = measure(args)
    by_name = {s.step: s for s in steps}

    def cpu(step: str) -> float:
        found = by_name[step]
        us = found.cpu_microseconds_per_token
        return found.microseconds_per_token if us is None else us

    sign = cpu("blind sign (sign_token_requests, OpenSSL)")
    verify = cpu("verify_tokens, 1 thread")
    relations: dict[str, float] = {
        "openssl_speed_sign_us": openssl_sign_us,
        "openssl_speed_verify_us": openssl_verify_us,
        "issued_tokens_per_second_per_core": 1e6 / sign,
        "blind_sign_over_openssl_speed_sign": sign / openssl_sign_us,
        "python_blind_sign_over_openssl_blind_sign": cpu("reference: Python blind_rsa.blind_sign")
        / sign,
        "verify_over_openssl_speed_verify": verify / openssl_verify_us,
        "python_verify_over_batched_verify": cpu("reference: check_tokens_python, 1 thread")
        / verify,
    }
    for workers in ("2 threads", "2 processes"):
        pooled_us = by_name[f"verify_tokens, {workers}"].microseconds_per_token
        relations[f"verify_speedup_{workers.replace(' ', '_')}"] = (
            by_name["verify_tokens, 1 thread"].microseconds_per_token / pooled_us
        )
    if not args.no_ingest:
        rate = batch_ingest_rate(args.ingest_reports)
        ingest_us = 1e6 / rate
        relations |= {
            "batch_ingest_reports_per_second": rate,
            "batch_ingest_microseconds_per_report": ingest_us,
            "verify_over_batch_ingest_per_report": verify / ingest_us,
            "batch_rate_with_one_serial_verify_per_report": 1e6 / (ingest_us + verify),
        }

    if not args.no_service:
        console.print("measuring issuance and redemption through the services...")
        relations |= token_service.measure(issue=100, reports=10_000, reps=2)

    if args.json:
        rows = [asdict(s) | {"tokens_per_second": s.tokens_per_second} for s in steps]
        print(json.dumps({"steps": rows, "relations": relations}, indent=2))
        return
    table = Table(title="Privacy Pass type 2 (blind RSA 2048) on this machine")
    for col in ("step", "who", "tokens", "wall µs/token", "CPU µs/token", "tokens/s (wall)"):
        table.add_column(col, justify="right" if col != "step" else "left")
    for s in steps:
        table.add_row(
            s.step,
            s.who,
            f"{s.tokens:,}",
            f"{s.microseconds_per_token:,.1f}",
            "" if s.cpu_microseconds_per_token is None else f"{s.cpu_microseconds_per_token:,.1f}",
            f"{s.tokens_per_second:,.0f}",
        )
    out = Console(width=120)
    out.print(table)
    out.print(
        f"issuance: {relations['issued_tokens_per_second_per_core']:,.0f} tokens/s per core "
        "(goal: at least 1,000); blind sign / `openssl speed` sign "
        f"({openssl_sign_us:,.0f} µs): {relations['blind_sign_over_openssl_speed_sign']:.2f}x; "
        "the Python reference takes "
        f"{relations['python_blind_sign_over_openssl_blind_sign']:.1f}x as long"
    )
    out.print(
        f"redemption: verify_tokens {verify:.1f} µs CPU a token / `openssl speed` verify "
        f"({openssl_verify_us:.1f} µs): {relations['verify_over_openssl_speed_verify']:.2f}x "
        "(goal: at most 1.5x); the Python reference takes "
        f"{relations['python_verify_over_batched_verify']:.2f}x as long"
    )
    out.print(
        "verification speed-up, 2 threads: "
        f"{relations['verify_speedup_2_threads']:.2f}x; 2 processes: "
        f"{relations['verify_speedup_2_processes']:.2f}x"
    )
    if not args.no_ingest:
        rate = relations["batch_ingest_reports_per_second"]
        out.print(
            f"aggregator batch ingest: {rate:,.0f} reports/s "
            f"({relations['batch_ingest_microseconds_per_report']:.2f} µs/report); verifying one "
            f"token per report costs {relations['verify_over_batch_ingest_per_report']:.1f}x that, "
            "so one serial verification per report would bring the batch path to "
            f"{relations['batch_rate_with_one_serial_verify_per_report']:,.0f} reports/s"
        )
    if not args.no_service:
        out.print(
            "through the services: "
            f"{relations['issued_tokens_per_second_service']:,.0f} tokens/s issued; batch path "
            f"{relations['batch_reports_per_second_with_tokens']:,.0f} reports/s with a token "
            f"each vs {relations['batch_reports_per_second_plain']:,.0f} plain (ratio "
            f"{relations['token_over_plain_batch_rate']:.3f})"
        )


if __name__ == "__main__":
    main()
