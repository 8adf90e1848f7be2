"""`ldpcollect vdaf test-vectors DIR [--json]` run as a user would: the real CLI in a
subprocess, on the repository's vectors, on a corrupted copy, and on an unsupported file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

VECTORS = Path(__file__).resolve().parent.parent / "vdaf" / "vectors"


def vdaf_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ldpcollect_cli.main", "vdaf", "test-vectors", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_every_reference_vector_passes_and_exit_code_is_zero() -> None:
    done = vdaf_cli(str(VECTORS), "--json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == 0
    assert len(report["files"]) == len(list(VECTORS.glob("*.json"))) == 23
    assert all(entry["passed"] for entry in report["files"])
    assert report["skipped"] == []


def test_the_text_report_says_pass_per_file() -> None:
    done = vdaf_cli(str(VECTORS))

    assert done.returncode == 0, done.stderr
    assert "PASS  Prio3Histogram_2.json" in done.stdout
    assert "PASS  Prio3Count_bad_gadget_poly.json" in done.stdout
    assert "23 passed, 0 failed, 0 skipped" in done.stdout


def test_a_corrupted_copy_fails_and_exit_code_is_nonzero(tmp_path: Path) -> None:
    for name in ("Prio3Count_0.json", "Prio3MultihotCountVec_0.json"):
        shutil.copy(VECTORS / name, tmp_path)
    corrupted = tmp_path / "Prio3MultihotCountVec_0.json"
    vector = json.loads(corrupted.read_text())
    public_share = vector["reports"][0]["public_share"]
    vector["reports"][0]["public_share"] = public_share[:-2] + (
        "00" if public_share[-2:] != "00" else "01"
    )
    corrupted.write_text(json.dumps(vector))

    done = vdaf_cli(str(tmp_path), "--json")

    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["failed"] == 1
    passed = {entry["name"]: entry["passed"] for entry in report["files"]}
    assert passed == {"Prio3Count_0.json": True, "Prio3MultihotCountVec_0.json": False}


def test_unsupported_files_are_listed_as_skipped(tmp_path: Path) -> None:
    shutil.copy(VECTORS / "Prio3Sum_0.json", tmp_path)
    (tmp_path / "Poplar1_0.json").write_text("{}")

    done = vdaf_cli(str(tmp_path))

    assert done.returncode == 0, done.stderr
    assert "SKIP  Poplar1_0.json: Poplar1 is not implemented" in done.stdout
    assert "1 passed, 0 failed, 1 skipped" in done.stdout


def test_a_directory_without_supported_files_is_an_error(tmp_path: Path) -> None:
    done = vdaf_cli(str(tmp_path))
    assert done.returncode == 2
    assert "no supported vector files" in done.stderr
