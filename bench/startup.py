"""Start-up time of the `ldpcollect` command against its floor, measured in the same run.

The floor is a Python process that imports grpc and numpy (what any command needs); each
command runs as a fresh process, the runs interleaved so the machine's load falls on all of
them alike, and the median of `--runs` is printed with its ratio to the floor:

    .venv/bin/python -m bench.startup --runs 9
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ldpcollect_cli.demo import aggregator_subprocess


def seconds(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    token = secrets.token_urlsafe(16)
    cli = [sys.executable, "-m", "ldpcollect_cli.main"]
    with (
        tempfile.TemporaryDirectory() as tmp,
        aggregator_subprocess(Path(tmp) / "a.db", token) as address,
    ):
        env = {**os.environ, "LDPCOLLECT_ADMIN_TOKEN": token, "LDPCOLLECT_SERVER": address}
        commands = {
            "python -c 'import grpc, numpy' (floor)": [sys.executable, "-c", "import grpc, numpy"],
            "ldpcollect --help": [*cli, "--help"],
            "ldpcollect query list": [*cli, "query", "list"],
            "ldpcollect privacy convert (scipy)": [*cli, "privacy", "convert", "--rho", "0.5"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                times[name].append(seconds(command, env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    floor = next(iter(medians.values()))
    if args.json:
        print(json.dumps({"runs": args.runs, "median_seconds": medians}, indent=2))
        return
    print(f"median of {args.runs} runs each, interleaved")
    for name, value in medians.items():
        print(f"{name:42} {value:6.2f} s   {value / floor:4.1f}x the floor")


if __name__ == "__main__":
    main()
