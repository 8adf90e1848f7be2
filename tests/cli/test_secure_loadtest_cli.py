"""`ldpcollect loadtest` against a leader of two aggregators (real leader and helper
processes, the real CLI): sealed uploads at an open-loop rate, latency percentiles, statuses,
the plot, and the count check against what the leader holds for the secure query."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.secure_admin import SecureAdminClient
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.wire import scheme_from_text
from tests.secure.roles import ADMIN, Pair, aggregated, secure_pair
from tests.serving import run_cli

TARGETS = list(range(1, 21))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with secure_pair(tmp_path_factory.mktemp("pair")) as running:
        yield running


def create(pair: Pair, tmp_path: Path, query_id: str, sp: bool = False) -> None:
    mechanism = SamplingPrivacy("1/2") if sp else RandomizedResponse("0.85", "0.3")
    with pair.channel() as channel:
        SecureAdminClient(channel, ADMIN).create_query(
            load_or_create_key_pair(tmp_path / "collector.key"),
            mechanism,
            scheme_from_text("grid"),
            TARGETS,
            query_id=query_id,
        )


def test_open_loop_batches_of_sealed_pairs_are_counted_exactly_and_plotted(
    pair: Pair, tmp_path: Path
) -> None:
    create(pair, tmp_path, "load-sp", sp=True)
    plot = tmp_path / "latency.png"
    done = run_cli(
        ADMIN, "loadtest", "--query", "load-sp", "--mode", "batch", "--batch-size", "10",
        "--rate", "20", "--duration", "2", "--plot", str(plot), "--json",
        "--helper", pair.helper.address, server=pair.leader.address,
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert out["query"]["secure"] is True and out["query"]["round"] == 2
    assert out["requests"] == {"planned": 40, "sent": 40, "answered": 40, "unsent": 0}
    assert out["statuses"] == {"OK": 40}
    assert out["reports"] == {"accepted": 400, "duplicates": 0, "rejected": {}}
    assert out["count_check"]["ok"] is True
    assert out["count_check"]["grew"] == {pair.leader.address: 400}
    latency = [out["latency_ms"][k] for k in ("p50", "p90", "p99", "max")]
    assert all(v > 0 for v in latency) and latency == sorted(latency)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pair.channel() as channel:
        held = aggregated(channel, "load-sp")
    # Honest pairs: every acknowledged upload verifies at both aggregators.
    assert (held.aggregated_reports, held.refused_reports) == (400, 0)


def test_unary_uploads_and_a_stream_is_refused_in_words(pair: Pair, tmp_path: Path) -> None:
    create(pair, tmp_path, "load-rr")
    done = run_cli(
        ADMIN, "loadtest", "--query", "load-rr", "--mode", "unary", "--rate", "30",
        "--duration", "1", "--json", "--helper", pair.helper.address,
        server=pair.leader.address,
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert out["reports"]["accepted"] == 30 and out["count_check"]["ok"] is True
    stream = run_cli(
        ADMIN, "loadtest", "--query", "load-rr", "--mode", "stream", "--duration", "1",
        server=pair.leader.address, ok=False,
    )  # fmt: skip
    assert stream.returncode == 1 and "--mode batch" in " ".join(stream.stderr.split())
