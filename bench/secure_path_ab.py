"""Before and after of the whole secure path in one session: the harness of bench.secure_path
(this tree's) run alternately on a base tree's code and on this tree's, `--rounds` times each,
then the medians of the rate and of each process's CPU per report (leader, helper, the load
generator), with their ratios. Alternating puts both under the same load, so the ratios mean
something on a shared machine where the rates alone do not.

    .venv/bin/python -m bench.secure_path_ab --base-tree DIR [--cases rr:100,sp:100]
        [--reports 4000] [--rounds 2]

DIR holds the base revision (`git archive REV | tar -x -C DIR`) with its compiled modules
(built there, or the `.so` files copied from this tree when the base's C sources are the
same). Each run is a fresh interpreter with PYTHONPATH=tree, so the leader and helper it
starts run that tree's code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.secure import WARMUP

HERE = Path(__file__).resolve().parent
RUN = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("harness", sys.argv[1])
harness = importlib.util.module_from_spec(spec)
sys.modules["harness"] = harness
spec.loader.exec_module(harness)
mechanism, targets, n, warmup = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
run = harness.secure_path_rate(mechanism, n, targets, warmup=warmup)
print(json.dumps({"rate": run.per_second, "leader": run.leader_cpu * 1e6 / n,
                  "helper": run.helper_cpu * 1e6 / n, "load": run.load_cpu * 1e6 / n}))
"""


def one_run(tree: Path, case: str, reports: int, warmup: int) -> dict[str, float]:
    mechanism, targets = case.split(":")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN,
            str(HERE / "secure_path.py"),
            mechanism,
            targets,
            str(reports),
            str(warmup),
        ],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the run on {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-tree", type=Path, required=True)
    parser.add_argument("--cases", default="rr:100,sp:100", help="mechanism:targets, ...")
    parser.add_argument("--reports", type=int, default=4000)
    parser.add_argument(
        "--warmup", type=int, default=WARMUP, help="untimed reports of another query first"
    )
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    trees = {"before": args.base_tree.resolve(), "after": HERE.parent}
    cases = args.cases.split(",")
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for case in cases:
            for name, tree in trees.items():
                result = one_run(tree, case, args.reports, args.warmup)
                runs.setdefault((case, name), []).append(result)
                shown = ", ".join(f"{key} {value:,.0f}" for key, value in result.items())
                print(f"{case} {name}: {shown}", flush=True)
    print(
        f"\nMedians of {args.rounds} runs each, {args.reports} reports; CPU us per report "
        "(from /proc over the timed window), before -> after (ratio):"
    )
    for case in cases:
        before, after = (
            {
                key: statistics.median(r[key] for r in runs[(case, name)])
                for key in runs[(case, name)][0]
            }
            for name in trees
        )
        print(
            f"  {case}: rate {before['rate']:,.0f} -> {after['rate']:,.0f}/s "
            f"({after['rate'] / before['rate']:.2f}x); leader {before['leader']:,.0f} -> "
            f"{after['leader']:,.0f} ({before['leader'] / after['leader']:.2f}x); helper "
            f"{before['helper']:,.0f} -> {after['helper']:,.0f} "
            f"({before['helper'] / after['helper']:.2f}x); load generator "
            f"{before['load']:,.0f} -> {after['load']:,.0f}"
        )


if __name__ == "__main__":
    main()
