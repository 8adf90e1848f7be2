"""Where `ldpcollect demo --secure` spends its CPU: the device side (the worker processes that
draw, shard and seal), the leader, the helper and the CLI itself, in CPU seconds per role,
beside the demo's wall time and interval coverage.

    .venv/bin/python -m bench.secure_demo_split [-n 20000] [--json]

It runs the real demo as a child process and reads every descendant's CPU time from /proc
(Linux) twice a second until the demo exits; a process's last reading is kept, so the
figures undercount by at most half a second of each process's work. Wall time minus
(CPU / cores) is time spent waiting: for the other role, for I/O, or for other work on a
shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROLES = ("devices", "leader", "helper", "cli")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _descendants(root: int) -> list[int]:
    todo, seen = [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += _children(pid)
    return seen


def _cpu_and_command(pid: int) -> tuple[float, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK"), command


def _role(pid: int, root: int, command: str) -> str:
    if "--role leader" in command:
        return "leader"
    if "--role helper" in command:
        return "helper"
    return "cli" if pid == root else "devices"


def measure(devices: int) -> dict[str, object]:
    """Run the demo once; CPU seconds per role, wall seconds, and the demo's own summary."""
    with tempfile.TemporaryDirectory(prefix="secure-split-") as tmp:
        out = Path(tmp) / "demo.json"
        command = [sys.executable, "-m", "ldpcollect_cli.main", "demo", "--secure"]
        command += ["-n", str(devices), "--json"]
        start = time.perf_counter()
        with out.open("w") as sink:
            proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.DEVNULL)
            last: dict[int, tuple[float, str]] = {}
            while proc.poll() is None:
                for pid in _descendants(proc.pid):
                    reading = _cpu_and_command(pid)
                    if reading is not None:
                        last[pid] = reading
                time.sleep(0.5)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"the demo failed with exit code {proc.returncode}")
        summary = json.loads(out.read_text())
    cpu = dict.fromkeys(ROLES, 0.0)
    for pid, (seconds, cmd) in last.items():
        cpu[_role(pid, proc.pid, cmd)] += seconds
    return {
        "devices": devices,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": {role: round(s, 1) for role, s in cpu.items()},
        "coverage_95": summary["coverage_95"],
        "cores": os.cpu_count(),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--devices", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.devices)
    if args.json:
        print(json.dumps(result))
        return
    cpu = result["cpu_seconds"]
    assert isinstance(cpu, dict)
    total = sum(cpu.values())
    print(f"demo --secure -n {args.devices}: wall {result['wall_seconds']} s, CPU {total:.1f} s")
    for role in ROLES:
        print(f"  {role:8s} {cpu[role]:6.1f} s  ({cpu[role] / total:.0%})")
    print(f"  95% interval coverage: {result['coverage_95']}")


if __name__ == "__main__":
    main()
