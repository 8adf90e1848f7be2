"""The committed generated code must be exactly what `make proto` produces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "ldpcollect" / "v1"


def test_generated_code_matches_proto(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), str(tmp_path)],
        check=True,
        capture_output=True,
    )
    fresh = sorted(p.name for p in (tmp_path / "ldpcollect" / "v1").iterdir())
    committed = sorted(p.name for p in GENERATED.iterdir() if "_pb2" in p.name)
    assert fresh == committed, "generated file set differs: run `make proto` and commit"
    for name in fresh:
        regenerated = (tmp_path / "ldpcollect" / "v1" / name).read_text()
        assert regenerated == (GENERATED / name).read_text(), (
            f"ldpcollect/v1/{name} is stale: run `make proto` and commit the result"
        )
