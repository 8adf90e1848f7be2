"""Every draft-20 vector file reproduces byte for byte, and the checker itself notices a
corrupted file, an expectation it cannot meet, and a file it does not support."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ldpcollect.vdaf.test_vectors import check_directory, check_file

VECTORS = Path(__file__).parent / "vectors"
FILES = sorted(VECTORS.glob("*.json"))
KINDS = ("Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram", "Prio3MultihotCountVec")


def test_the_repository_holds_vectors_for_every_supported_vdaf() -> None:
    kinds = {path.stem.split("_", 1)[0] for path in FILES}
    assert kinds == {*KINDS, "XofTurboShake128"}
    assert sum("_bad_" in path.name for path in FILES) == 8


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_vector_file_reproduces_byte_for_byte(path: Path) -> None:
    result = check_file(path)
    assert result.passed, result.detail
    assert not result.skipped


@pytest.mark.parametrize("path", [p for p in FILES if "_bad_" in p.name], ids=lambda p: p.name)
def test_bad_vector_is_refused_where_the_vector_says(path: Path) -> None:
    assert "refused, as the vector expects" in check_file(path).detail


def _rewrite(path: Path, change: dict[str, object]) -> Path:
    vector = json.loads(path.read_text())
    vector.update(change)
    path.write_text(json.dumps(vector))
    return path


def test_a_flipped_byte_in_an_expected_input_share_fails_the_file(tmp_path: Path) -> None:
    copy = Path(shutil.copy(VECTORS / "Prio3Histogram_0.json", tmp_path))
    vector = json.loads(copy.read_text())
    share = vector["reports"][0]["input_shares"][1]
    vector["reports"][0]["input_shares"][1] = ("0" if share[0] != "0" else "1") + share[1:]
    copy.write_text(json.dumps(vector))

    result = check_file(copy)

    assert not result.passed
    assert "input share 1" in result.detail


def test_a_wrong_aggregate_result_fails_the_file(tmp_path: Path) -> None:
    copy = _rewrite(Path(shutil.copy(VECTORS / "Prio3Count_2.json", tmp_path)), {"agg_result": 4})
    result = check_file(copy)
    assert not result.passed
    assert "aggregate result: got 3, expected 4" in result.detail


def test_a_bad_vector_whose_refusal_is_not_expected_fails(tmp_path: Path) -> None:
    copy = Path(shutil.copy(VECTORS / "Prio3Count_bad_meas_share.json", tmp_path))
    vector = json.loads(copy.read_text())
    for op in vector["operations"]:
        op["success"] = True
    copy.write_text(json.dumps(vector))

    result = check_file(copy)

    assert not result.passed
    assert "verifier_shares_to_message (report 0, aggregator -) was refused" in result.detail


def test_a_valid_report_expected_to_be_refused_fails(tmp_path: Path) -> None:
    copy = Path(shutil.copy(VECTORS / "Prio3Count_0.json", tmp_path))
    vector = json.loads(copy.read_text())
    vector["operations"][3]["success"] = False
    copy.write_text(json.dumps(vector))

    result = check_file(copy)

    assert not result.passed
    assert "was accepted, but the vector expects it to be refused" in result.detail


def test_an_unreadable_file_fails_with_the_reason(tmp_path: Path) -> None:
    broken = tmp_path / "Prio3Sum_0.json"
    broken.write_text("{not json")
    result = check_file(broken)
    assert not result.passed
    assert "unreadable vector" in result.detail


def test_a_file_without_operations_does_not_pass_vacuously(tmp_path: Path) -> None:
    copy = _rewrite(Path(shutil.copy(VECTORS / "Prio3Count_0.json", tmp_path)), {"operations": []})
    assert not check_file(copy).passed


def test_unsupported_algorithms_are_skipped_not_failed(tmp_path: Path) -> None:
    (tmp_path / "Poplar1_0.json").write_text("{}")
    shutil.copy(VECTORS / "XofTurboShake128.json", tmp_path)

    results = {r.name: r for r in check_directory(tmp_path)}

    assert results["Poplar1_0.json"].skipped
    assert results["XofTurboShake128.json"].passed
