"""The device conformance vectors (vectors/device/, docs/device-protocol.md): the checked-in
files are exactly what this build's SDK computes, the real CLI writes them, every sealed
report verifies and unshards at both aggregators to the draw's answers, every token verifies
under the issuer key, and every query of refusals.json is refused by the SDK."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from client.device_refusals import refused, secure_refusals
from client.device_vector_cases import GRID, PARIS, Case, rr_spec, secure_query, trusted_query
from client.device_vector_files import build_vectors, render
from client.device_vectors import HELPER_KEY, LEADER_KEY, compute, issuer_key
from ldpcollect.admission.tokens import Token, verify_token
from ldpcollect.randomness import ScriptedRandom, bernoulli, uniform_below
from ldpcollect.secure.query_vdaf import query_vdaf
from ldpcollect.secure.upload import (
    ReportRejected,
    SecureReport,
    aggregate,
    unshard,
    verify_batch,
)
from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.serving import cli_env

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "device"
CASES = sorted(p.name for p in VECTORS.glob("*.json") if p.name != "refusals.json")


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS / name).read_text())
    return data


def test_checked_in_vectors_are_what_this_build_computes() -> None:
    built = build_vectors()
    on_disk = sorted(p.name for p in VECTORS.glob("*.json"))
    assert on_disk == sorted(built), "run `ldpcollect vectors device --out vectors/device`"
    for name, data in built.items():
        assert (VECTORS / name).read_text() == render(data), name


def test_the_cli_writes_the_same_files(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ldpcollect_cli.main", "vectors", "device", "--out", str(tmp_path)],
        env=cli_env("unused"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for path in VECTORS.glob("*.json"):
        assert (tmp_path / path.name).read_text() == path.read_text(), path.name


def test_the_cases_cover_what_the_issue_lists() -> None:
    vectors = [load(name) for name in CASES]
    kinds = {
        (v["mode"], v["expected"]["mechanism"]["name"], v["expected"]["scheme"][:2])
        for v in vectors
    }
    for mode in ("trusted", "secure"):
        for mechanism in ("rr", "sp"):
            for scheme in ("gr", "h3"):
                assert (mode, mechanism, scheme) in kinds
    assert any(v["expected"]["outside"] for v in vectors)
    assert any(v["expected"].get("selected") for v in vectors)
    assert any(v["expected"].get("selected") is False for v in vectors)
    assert {v["mode"] for v in vectors if "tokens" in v["expected"]} == {"trusted", "secure"}


@pytest.mark.parametrize("name", CASES)
def test_the_sdk_computes_each_case_from_its_inputs(name: str) -> None:
    vector = load(name)
    assert compute(vector) == vector["expected"]


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("secure-")])
def test_sealed_reports_verify_and_unshard_to_the_answers(name: str) -> None:
    vector = load(name)
    expected = vector["expected"]
    report = SecureReport.decode(bytes.fromhex(expected["report"]))
    n_targets = len(expected["answer_bits"][0])
    vdaf = query_vdaf(expected["vdaf"]["kind"], n_targets)
    result = verify_batch(vdaf, LEADER_KEY, HELPER_KEY, secrets.token_bytes(32), [report])
    [leader_out], [helper_out] = result.leader_out, result.helper_out
    assert not isinstance(leader_out, ReportRejected), leader_out
    assert not isinstance(helper_out, ReportRejected), helper_out
    counts = unshard(vdaf, aggregate(vdaf, [leader_out]), aggregate(vdaf, [helper_out]))
    assert "".join(str(c) for c in counts) == "".join(expected["answer_bits"])


@pytest.mark.parametrize("name", [n for n in CASES if "tokens" in n])
def test_each_token_verifies_under_the_issuer_key(name: str) -> None:
    for minted in load(name)["expected"]["tokens"]:
        token = Token.decode(bytes.fromhex(minted["token"]))
        assert token.challenge_digest.hex() == minted["challenge_digest"]
        assert verify_token(issuer_key().public, token)


def test_every_refusal_is_refused_and_the_good_query_is_not() -> None:
    refusals = load("refusals.json")["cases"]
    assert len(refusals) >= 15
    for case in refusals:
        helper = bytes.fromhex(case["helper_hpke_config"]) if case["mode"] == "secure" else None
        assert refused(case["mode"], bytes.fromhex(case["query"]), helper) is not None, case
    good = Case("good", "", rr_spec("0.85", "0.3"), GRID, *PARIS, [1, 2, 3], secure=True)
    pinned = HELPER_KEY.config.encode()
    assert refused("secure", secure_query(good).SerializeToString(), pinned) is None
    assert refused("trusted", trusted_query(good).SerializeToString()) is None
    assert {name for name, *_ in secure_refusals()} >= {"helper-config-not-the-helpers"}


def test_the_byte_rule_for_bernoulli() -> None:
    # 179/200: 8 bits a read; 0xc8 = 200 is rejected, 0xb2 = 178 < 179 is Yes.
    source = ScriptedRandom(bytes([0xC8, 0xB2]))
    assert bernoulli(Fraction(179, 200), source) and source.used == 2
    # 1/2: denominator 2 has 2 bits, so one byte's top 2 bits: 0x40 -> 1 (not < 1): No.
    assert not bernoulli(Fraction(1, 2), ScriptedRandom(b"\x40"))
    # Probabilities 0 and 1 read nothing.
    nothing = ScriptedRandom(b"")
    assert not bernoulli(Fraction(0), nothing) and bernoulli(Fraction(1), nothing)
    # 20 bits: 3 bytes, top 20 bits.
    assert uniform_below(1_000_000, ScriptedRandom(bytes([0x0F, 0x42, 0x3F]))) == 0x0F423
    with pytest.raises(Exception, match="no more than were given"):
        bernoulli(Fraction(1, 3), ScriptedRandom(b"\xff"))


def test_trusted_reports_decode_to_the_drawn_answers() -> None:
    for name in CASES:
        vector = load(name)
        if vector["mode"] != "trusted":
            continue
        query = pb.Query.FromString(bytes.fromhex(vector["inputs"]["query"]))
        for round_, hexed in enumerate(vector["expected"]["reports"], start=1):
            report = pb.SubmitReportRequest.FromString(bytes.fromhex(hexed)).report
            assert report.query_id == query.query_id and report.round == round_
            assert report.answers.hex() == vector["expected"]["answers"][round_ - 1]
            assert report.report_id.hex() == vector["inputs"]["random"]["report_ids"][round_ - 1]
