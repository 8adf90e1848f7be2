"""`ldpcollect store backup`: a copy of a running SQLite store, its answer files included,
opens as a working server with every report the snapshot held."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_tls import HOME, TARGETS, TOKEN, cli, ok
from tests.serving import serving

WIDE = ",".join(str(HOME + d) for d in range(-500, 500))  # 1,000 targets: 125 answer bytes


def test_a_backup_of_a_running_store_carries_its_answer_files(tmp_path: Path) -> None:
    db, copy = tmp_path / "agg.db", tmp_path / "copy.db"
    rr = ("--mechanism", "rr", "--flip1", "0.85", "--flip2", "0.3")
    with serving(db, TOKEN) as served:
        server = ("--server", served.address)
        ok("query", "create", *rr, "--targets", WIDE, "--id", "wide", *server)
        ok("query", "create", *rr, "--targets", TARGETS, "--id", "narrow", *server)
        for query_id in ("wide", "narrow"):
            ok("fleet", "run", "--query", query_id, "--devices", "150", "--no-progress", *server)
        summary = json.loads(ok("store", "backup", "--db", str(db), str(copy), "--json"))
        assert (summary["answer_files"], summary["answer_bytes"]) == (1, 150 * 125)
        # The live file grows past the snapshot; the copy keeps what the snapshot named.
        ok("fleet", "run", "--query", "wide", "--devices", "40", "--no-progress", *server)
        again = cli("store", "backup", "--db", str(db), str(copy))
        assert again.returncode != 0 and "exists already" in again.stderr
        assert "Traceback" not in again.stderr
    assert copy.stat().st_mode & 0o777 == 0o600
    (answers,) = Path(f"{copy}.answers").iterdir()
    assert answers.stat().st_size == 150 * 125 and answers.stat().st_mode & 0o777 == 0o600
    with serving(copy, TOKEN) as served:  # opens only if every answer it names is there
        listed = json.loads(ok("query", "list", "--json", "--server", served.address))
    assert sorted((q["query_id"], q["reports_per_round"]) for q in listed) == [
        ("narrow", [150]),
        ("wide", [150]),
    ]
