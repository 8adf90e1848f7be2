"""The leader's compiled upload path (`_native_hpke.open_uploads`, through
`aggregator.secure.upload.open_uploads`) against the reference path it skips (decode, the
leader's checks, the batch open, the VDAF checks): for every body it takes, the same held
report or the same refusal; every body it leaves (None) is one the reference refuses or one
of another query; and an honest report of the query is always taken. Then whole uploads,
mixed with every kind of spoiled report, give the same result and hold the same rows with
the compiled path as without it."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from aggregator.errors import ServiceError
from aggregator.secure.metrics import SecureMetrics
from aggregator.secure.store import SecureStore
from aggregator.secure.upload import (
    Checked,
    LeaderUpload,
    QueryRules,
    ReportRefused,
    check_opened,
    check_sealed,
    open_uploads,
)
from ldpcollect.secure.query_vdaf import ROUND_VDAF, query_vdaf
from ldpcollect.secure.sealing import ROLE_LEADER, seal_input_share
from ldpcollect.secure.upload import SecureFormatError, SecureReport, open_shares, shard_report
from tests.secure.test_aggregation_steps import HELPER, KEY, LEADER, T, round_params

VDAF = query_vdaf(ROUND_VDAF, T)
PARAMS = round_params()
SPOILERS = 13
"""0 honest; 1 a byte flipped; 2 cut short; 3 a byte appended; 4 another round; 5 honest, of
another open query; 6 an unknown query; 7 the helper's config id; 8 the helper's ciphertext
a byte short; 9 the leader's config id; 10 the leader's ciphertext tampered; 11 another
public share (the info differs); 12 a share of the wrong length, sealed properly."""


def leader_store(path: Path) -> SecureStore:
    store = SecureStore(path)
    store.open()
    empty = VDAF.encode_agg_share(VDAF.agg_init())
    for query_id in ("q", "r"):
        store.create_query(query_id, PARAMS, KEY, empty)
    return store


def body(rng: random.Random, spoil: int, where: int) -> bytes:
    """A report for query q (r for spoiler 5, z for 6), spoiled as `spoil` says; `where`
    picks the byte or length a spoiler changes."""
    query_id = {5: "r", 6: "z"}.get(spoil, "q")
    report = shard_report(
        VDAF,
        LEADER.config,
        HELPER.config,
        query_id,
        2 if spoil == 4 else 1,
        rng.randbytes(16),
        [rng.randrange(2) for _ in range(T)],
        rng.randbytes(VDAF.rand_size),
    )
    fields = [report.public_share, report.leader_ciphertext, report.helper_ciphertext]
    if spoil == 7:
        fields[2] = bytes([fields[2][0] ^ 1]) + fields[2][1:]
    elif spoil == 8:
        fields[2] = fields[2][:-1]
    elif spoil == 9:
        fields[1] = bytes([fields[1][0] ^ 1]) + fields[1][1:]
    elif spoil == 10:
        fields[1] = fields[1][:-1] + bytes([fields[1][-1] ^ 1])
    elif spoil == 11:
        fields[0] = bytes([fields[0][0] ^ 1]) + fields[0][1:]
    elif spoil == 12:
        meta = (query_id, 1, report.report_id, report.public_share)
        fields[1] = seal_input_share(LEADER.config, ROLE_LEADER, *meta, b"short")
    encoded = SecureReport(query_id, report.round, report.report_id, *fields).encode()
    if spoil == 1:
        at = where % len(encoded)
        return encoded[:at] + bytes([encoded[at] ^ 0x40]) + encoded[at + 1 :]
    if spoil == 2:
        return encoded[: where % len(encoded)]
    if spoil == 3:
        return encoded + b"\0"
    return encoded


def reference(store: SecureStore, data: bytes) -> Checked | tuple[str, str]:
    """What the reference path makes of one body: its held report, or its refusal."""
    try:
        try:
            report = SecureReport.decode(data)
        except SecureFormatError as error:
            raise ReportRefused("MALFORMED", f"not a secure report: {error}") from None
        if report.query_id not in ("q", "r"):
            return ("NotFound", report.query_id)
        rules = QueryRules.of(store.query(report.query_id))
        check_sealed(report, rules, LEADER)
        [share] = open_shares(LEADER, ROLE_LEADER, [report])
        return check_opened(report, data, rules, share)
    except ServiceError as refused:
        return (type(refused).__name__, refused.message)


def comparable(result: Checked | ServiceError | tuple[str, str] | None) -> object:
    if isinstance(result, ServiceError):
        return (type(result).__name__, result.message)
    return result


cases = st.lists(
    st.tuples(st.integers(0, SPOILERS - 1), st.integers(0, 10_000)), min_size=1, max_size=10
)


@settings(max_examples=40, deadline=None)
@given(batch=cases, seed=st.integers(0, 2**32 - 1))
def test_the_compiled_path_takes_what_the_reference_takes_and_leaves_the_rest(
    batch: list[tuple[int, int]], seed: int
) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        store = leader_store(Path(tmp) / "l.secure")
        bodies = [body(rng, spoil, where) for spoil, where in batch]
        fast = open_uploads(LEADER, QueryRules.of(store.query("q")), bodies)
        for (spoil, _), data, taken in zip(batch, bodies, fast, strict=True):
            expected = reference(store, data)
            if isinstance(taken, (Checked, ServiceError)):
                assert comparable(taken) == expected
            else:  # left to the reference path: a refusal there, or another query's report
                assert not isinstance(expected, Checked) or expected.query_id != "q"
            if spoil == 0:
                assert isinstance(taken, Checked)
            if spoil == 12:
                assert isinstance(taken, ReportRefused) and taken.reason == "WRONG_LENGTH"


@settings(max_examples=15, deadline=None)
@given(batch=cases, seed=st.integers(0, 2**32 - 1))
def test_an_upload_gives_the_same_result_and_rows_with_the_compiled_path_as_without(
    batch: list[tuple[int, int]], seed: int
) -> None:
    rng = random.Random(seed)
    bodies = [body(rng, spoil, where) for spoil, where in batch]
    bodies += bodies[: len(bodies) // 2]  # duplicates
    seen = []
    with tempfile.TemporaryDirectory() as tmp:
        for compiled in (True, False):
            store = leader_store(Path(tmp) / f"{compiled}.secure")
            uploads = LeaderUpload(store, LEADER, SecureMetrics(), lambda: None)
            if not compiled:
                uploads._fast = lambda bodies, queries: [None] * len(bodies)  # type: ignore[method-assign]
            result = uploads.upload(bodies)
            rows = store.db.execute(
                "SELECT query_id, report_id, body, leader_share FROM secure_held ORDER BY seq"
            ).fetchall()
            refusals = [(i, rid, type(r).__name__, r.message) for i, rid, r in result.rejected]
            seen.append((result.accepted, result.duplicates, refusals, rows))
            store.close()
    assert seen[0] == seen[1]
    honest = {data for (spoil, _), data in zip(batch, bodies, strict=False) if spoil in (0, 5)}
    assert seen[0][0] >= len(honest)  # (a flipped byte in the helper's share passes here)


def test_a_large_upload_gives_what_the_reference_gives(
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    store = leader_store(tmp_path / "l.secure")
    spoils = [i % SPOILERS for i in range(150)]
    bodies = [body(rng, spoil, rng.randrange(10_000)) for spoil in spoils]
    rules = QueryRules.of(store.query("q"))
    for spoil, data, taken in zip(spoils, bodies, open_uploads(LEADER, rules, bodies), strict=True):
        expected = reference(store, data)
        if isinstance(taken, (Checked, ServiceError)):
            assert comparable(taken) == comparable(expected)
        else:
            assert not isinstance(expected, Checked) or expected.query_id != "q"
        assert isinstance(taken, Checked) == (spoil == 0 or (spoil == 1 and taken is not None))
