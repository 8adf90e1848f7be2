"""The device's prover works on its secret measurement: for honest measurements it must do
the same work whatever the values, or its running time would tell (say) whether a device is
at a target. Checked by counting the compiled shard's instructions under callgrind, which is
exact and repeatable (wall time is not): any two honest measurements cost the same."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARD = """
import sys
from ldpcollect.secure.query_vdaf import PAIR_VDAF, ROUND_VDAF, query_vdaf
kind, ones = sys.argv[1], [int(i) for i in sys.argv[2].split(",") if i]
vdaf = query_vdaf(PAIR_VDAF if kind == "pair" else ROUND_VDAF, 100)
measurement = [0] * (200 if kind == "pair" else 100)
for i in ones:
    measurement[i] = 1
for i in range(3):
    vdaf.shard_encoded(b"ctx", measurement, bytes([i]) * 16, bytes([i + 1]) * vdaf.rand_size)
"""

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None,
    reason="valgrind is not installed",
)


def native_instructions(tmp_path: Path, kind: str, ones: list[int]) -> int:
    """Instructions executed in the compiled module during `kind`'s three shards (the C
    allocator's own count, which depends on its state, not on the values, is left out)."""
    out = tmp_path / f"{kind}-{'-'.join(map(str, ones)) or 'none'}.callgrind"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--toggle-collect=prio3_shard",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-c",
            SHARD,
            kind,
            ",".join(map(str, ones)),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    report = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100", str(out)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    counts = re.findall(r"^\s*([\d,]+) \([^)]*\)\s+\S+ \[\S*_native\.\S+\.so\]$", report, re.M)
    assert counts, report
    return sum(int(c.replace(",", "")) for c in counts)


@pytest.mark.parametrize(
    ("kind", "measurements"),
    [
        # Sampling Privacy's pair: not selected, selected at a target, at another target
        ("pair", [[], [3, 103], [77, 177]]),
        # a round of randomized response: no 1s, or many 1s in other places
        ("round", [[], list(range(0, 100, 2))]),
    ],
)
def test_honest_measurements_cost_the_prover_the_same_instructions(
    tmp_path: Path, kind: str, measurements: list[list[int]]
) -> None:
    counts = {tuple(ones): native_instructions(tmp_path, kind, ones) for ones in measurements}
    assert len(set(counts.values())) == 1, counts
