"""What every `Store` backend must do: one behaviour suite, run by each backend's tests.

A backend's test module subclasses `StoreContract` and says how to make a store at a fresh
location (`make_store`); the suite drives it through the `Store` interface only: the report
rules against a plain model of them (docs/design.md, "Protocol"), restarts that rebuild the
dedup state, the lifecycle refusals, and a release that keeps its result and forgets the
reports. Backend-specific behaviour (files, crashes, migrations) stays in the backend's module.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aggregator.errors import (
    AlreadyExists,
    FailedPrecondition,
    Invalid,
    NotFound,
    ServiceError,
)
from aggregator.model import (
    QueryInfo,
    QuerySpec,
    QueryStatus,
    Redemption,
    ReleaseRecord,
    ReportIn,
)
from aggregator.rounds import ReportColumns
from aggregator.store.base import Store, SubmitResult
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

N_TARGETS = 10  # 2 answer bytes, the last 6 bits padding
TARGETS = tuple(range(1, N_TARGETS + 1))
RR = RandomizedResponse("0.85", "0.3")
SP = SamplingPrivacy("1/2")

Refused = type[ServiceError]


def spec(query_id: str, mech: Mechanism, min_reports: int = 1) -> QuerySpec:
    return QuerySpec(query_id, "", mech, "grid", TARGETS, min_reports, None)


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def bits_of(answers: bytes) -> list[int]:
    packed = np.frombuffer(answers, dtype=np.uint8)
    return [int(b) for b in np.unpackbits(packed, count=N_TARGETS)]


def rr_run(first: int, n: int, seed: int) -> list[ReportIn]:
    """`n` round-1 reports of devices `first`.. with seeded random answers."""
    rng = np.random.default_rng(seed)
    answers = np.packbits(rng.integers(0, 2, size=(n, N_TARGETS), dtype=np.uint8), axis=1)
    return [
        ReportIn("q", 1, key(2 * i), key(2 * i + 1), answers[i - first].tobytes())
        for i in range(first, first + n)
    ]


@dataclass
class Model:
    """The ingest rules for one query, one report at a time, written out plainly."""

    rounds: int
    current_round: int = 1
    by_id: dict[bytes, tuple[bytes, int, bytes]] = field(default_factory=dict)
    devices: set[tuple[bytes, int]] = field(default_factory=set)
    awaiting: dict[bytes, bytes] = field(default_factory=dict)
    per_round: list[int] = field(default_factory=lambda: [0, 0])
    completed: int = 0
    counts: list[list[int]] = field(default_factory=lambda: [[0] * N_TARGETS, [0] * N_TARGETS])

    def admit(self, r: ReportIn) -> Refused | str:
        if len(r.report_id) != 16 or len(r.pseudonym) != 16:
            return Invalid
        if r.report_id in self.by_id:
            same = self.by_id[r.report_id] == (r.pseudonym, r.round, r.answers)
            return "duplicate" if same else AlreadyExists
        if r.round != self.current_round:
            return FailedPrecondition
        if len(r.answers) != 2 or r.answers[-1] & 0b0011_1111:
            return Invalid
        if (r.pseudonym, r.round) in self.devices:
            return AlreadyExists
        if r.round == 2:
            if r.pseudonym not in self.awaiting:
                return FailedPrecondition
            self.add((self.awaiting.pop(r.pseudonym), r.answers))
        elif self.rounds == 2:
            self.awaiting[r.pseudonym] = r.answers
        else:
            self.add((r.answers,))
        self.by_id[r.report_id] = (r.pseudonym, r.round, r.answers)
        self.devices.add((r.pseudonym, r.round))
        self.per_round[r.round - 1] += 1
        return "accepted"

    def add(self, answers: tuple[bytes, ...]) -> None:
        self.completed += 1
        for round_index, packed in enumerate(answers):
            for t, bit in enumerate(bits_of(packed)):
                self.counts[round_index][t] += bit

    def in_round(self, reports: list[ReportIn]) -> list[ReportIn]:
        """The reports with round 0 replaced by the current round."""
        return [r._replace(round=r.round or self.current_round) for r in reports]

    def submit(self, reports: list[ReportIn]) -> Summary:
        """(accepted, duplicates, [(index, refusal) of each rejected report])."""
        outcomes = [self.admit(report) for report in reports]
        return (
            outcomes.count("accepted"),
            outcomes.count("duplicate"),
            [(i, o) for i, o in enumerate(outcomes) if not isinstance(o, str)],
        )


Summary = tuple[int, int, list[tuple[int, Refused]]]


def summary(result: SubmitResult) -> Summary:
    return (
        result.accepted,
        result.duplicates,
        [(i, type(o.refusal)) for i, o in result.rejected if o.refusal is not None],
    )


# A small pool so that runs collide (6 devices, 8 report ids), mostly well-formed so that
# whole runs of valid reports are common; round 0 stands for the query's current round.
GOOD_ANSWERS = [b"\xa5\x40", b"\x00\x00", b"\xff\xc0"]
BAD_ANSWERS = [b"\x12\x41", b"\x12", b"\x12\x40\x00"]
report_strategy = st.builds(
    ReportIn,
    query_id=st.just("q"),
    round=st.sampled_from([0] * 8 + [1, 2]),
    pseudonym=st.sampled_from([key(i) for i in range(1, 7)] * 3 + [b"short"]),
    report_id=st.sampled_from([key(10 + i) for i in range(8)] * 3 + [b"\x01" * 15]),
    answers=st.sampled_from(GOOD_ANSWERS * 6 + BAD_ANSWERS),
)
# A step is a run of reports submitted together, or None: advance to round 2 (SP only).
steps_strategy = st.lists(
    st.one_of(st.lists(report_strategy, min_size=1, max_size=6), st.none()), max_size=8
)

MUTATIONS = (
    None,
    "repeat_id",  # a second report under an id used earlier in the run
    "repeat_device",  # the same device twice in the run
    "copy",  # an exact copy of an earlier report of the run
    "old_id",  # an id accepted before the run
    "old_device",  # a device that already reported this round
    "no_round1",  # round 2 from a device that skipped round 1
    "long_answers",
    "padding",
    "short_id",
    "short_device",
    "other_round",
)


def fresh_run(model: Model, n: int, mutation: str | None, at: int, serial: int) -> list[ReportIn]:
    """A run of new valid reports for the current round, with at most one defect."""
    round_ = model.current_round
    if round_ == 2:
        devices = list(model.awaiting)[:n]
    else:
        devices = [key(10**6 + serial * 10 + i) for i in range(n)]
    run = [
        ReportIn("q", round_, device, key(2 * 10**6 + serial * 10 + i), GOOD_ANSWERS[i % 3])
        for i, device in enumerate(devices)
    ]
    if not run or mutation is None:
        return run
    i = at % len(run)
    j = (i + 1) % len(run)
    old = [r for r in model.by_id.items() if r[1][1] == round_]
    changes = {
        "repeat_id": {"report_id": run[j].report_id},
        "repeat_device": {"pseudonym": run[j].pseudonym},
        "copy": dict(run[j]._asdict()),
        "old_id": {"report_id": old[0][0]} if old else {},
        "old_device": {"pseudonym": old[-1][1][0]} if old else {},
        "no_round1": {"pseudonym": key(3 * 10**6 + serial)},
        "long_answers": {"answers": run[i].answers + b"\x00"},
        "padding": {"answers": BAD_ANSWERS[0]},
        "short_id": {"report_id": b"\x05" * 15},
        "short_device": {"pseudonym": b"\x05" * 17},
        "other_round": {"round": 3 - round_},
    }[mutation]
    run[i] = run[i]._replace(**changes)
    return run


def assert_matches(store: Store, model: Model) -> None:
    info = store.query("q")
    assert info is not None
    assert list(info.reports_per_round) == model.per_round[: model.rounds]
    assert info.completed_devices == model.completed
    assert store.stored_report_count("q") == sum(model.per_round)
    assert store.counts("q").tolist() == model.counts[: model.rounds]


def fixed_release(
    query: QueryInfo, counts: Any, ledger: str | None
) -> tuple[ReleaseRecord, str | None]:
    """A release function that records the counts as they are (no estimates, no claims)."""
    return ReleaseRecord(query.query_id, query.completed_devices, 5.0, (), ()), '{"spent": 1}'


# Each backend's subclass runs the same property tests (another executor, on purpose).
BACKEND_CHECKS = [HealthCheck.too_slow, HealthCheck.differing_executors]


class StoreContract:
    """The behaviour suite. Subclasses define `make_store`; everything else is inherited."""

    def make_store(self, where: Path) -> Store:
        """A new, unopened store keeping its state at `where` (an empty directory to start
        with); two stores made at the same `where` share that state, one after the other."""
        raise NotImplementedError

    @asynccontextmanager
    async def opened(self, where: Path) -> AsyncIterator[Store]:
        store = self.make_store(where)
        await store.open()
        try:
            yield store
        finally:
            await store.close()

    def run_in_fresh_place(self, scenario: Callable[[Path], Coroutine[Any, Any, None]]) -> None:
        """Run `scenario` on a fresh location (hypothesis examples cannot share a tmp_path)."""
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(scenario(Path(tmp)))

    # ------------------------------------------------------------------ report rules

    @settings(max_examples=150, deadline=None, suppress_health_check=BACKEND_CHECKS)
    @given(use_sp=st.booleans(), steps=steps_strategy, replay=st.lists(report_strategy, max_size=6))
    def test_runs_follow_the_one_report_rules_and_survive_a_restart(
        self, use_sp: bool, steps: list[list[ReportIn] | None], replay: list[ReportIn]
    ) -> None:
        mech: Mechanism = SP if use_sp else RR

        async def scenario(where: Path) -> None:
            model = Model(rounds=mech.rounds)
            sent: list[list[ReportIn]] = []
            async with self.opened(where) as store:
                await store.create_query(spec("q", mech), 0.0)
                for step in steps:
                    if step is None:
                        if model.rounds == 2 and model.current_round == 1:
                            await store.advance_round("q")
                            model.current_round = 2
                        continue
                    run = model.in_round(step)
                    got = await store.submit(ReportColumns.of(run))
                    assert summary(got) == model.submit(run)
                    sent.append(run)
                assert_matches(store, model)
            # A new store on the same state rebuilds the dedup state from what it stored.
            async with self.opened(where) as store:
                assert_matches(store, model)
                everything = [r for run in sent for r in run]
                for run in (everything, model.in_round(replay)):
                    if run:
                        got = await store.submit(ReportColumns.of(run))
                        assert summary(got) == model.submit(run)
                assert_matches(store, model)

        self.run_in_fresh_place(scenario)

    @settings(max_examples=150, deadline=None, suppress_health_check=BACKEND_CHECKS)
    @given(
        use_sp=st.booleans(),
        runs=st.lists(
            st.tuples(st.integers(1, 6), st.sampled_from(MUTATIONS), st.integers(0, 5)),
            min_size=1,
            max_size=6,
        ),
        advance_after=st.integers(0, 6),
    )
    def test_runs_of_new_reports_with_one_defect_follow_the_one_report_rules(
        self, use_sp: bool, runs: list[tuple[int, str | None, int]], advance_after: int
    ) -> None:
        mech: Mechanism = SP if use_sp else RR

        async def scenario(where: Path) -> None:
            model = Model(rounds=mech.rounds)
            async with self.opened(where) as store:
                await store.create_query(spec("q", mech), 0.0)
                for serial, (n, mutation, at) in enumerate(runs):
                    if serial == advance_after and model.rounds == 2:
                        await store.advance_round("q")
                        model.current_round = 2
                    run = fresh_run(model, n, mutation, at, serial)
                    if run:
                        got = await store.submit(ReportColumns.of(run))
                        assert summary(got) == model.submit(run), mutation
                assert_matches(store, model)

        self.run_in_fresh_place(scenario)

    async def test_a_report_for_an_unknown_query_is_not_found_and_changes_nothing(
        self, tmp_path: Path
    ) -> None:
        async with self.opened(tmp_path) as store:
            await store.create_query(spec("q", RR), 0.0)
            run = rr_run(0, 3, 1)
            stray = run[1]._replace(query_id="nope")
            result = await store.submit(ReportColumns.of([run[0], stray, run[2]]))
            assert summary(result) == (2, 0, [(1, NotFound)])
            assert store.stored_report_count("nope") == 0
            with pytest.raises(NotFound):
                store.counts("nope")

    # ------------------------------------------------------------------ lifecycle

    async def test_a_query_id_is_created_once(self, tmp_path: Path) -> None:
        async with self.opened(tmp_path) as store:
            first = await store.create_query(spec("q", RR), 1.0)
            with pytest.raises(AlreadyExists, match="already exists"):
                await store.create_query(spec("q", SP), 2.0)
            assert store.query("q") == first
            assert [q.query_id for q in store.queries()] == ["q"]

    async def test_lifecycle_changes_are_refused_out_of_order(self, tmp_path: Path) -> None:
        async with self.opened(tmp_path) as store:
            await store.create_query(spec("sp", SP), 0.0)
            await store.create_query(spec("rr", RR), 0.0)
            with pytest.raises(FailedPrecondition, match="AdvanceRound to round 2 first"):
                await store.close_query("sp")
            with pytest.raises(FailedPrecondition, match="CloseQuery before Release"):
                await store.release("sp", fixed_release)
            with pytest.raises(FailedPrecondition, match="last round"):
                await store.advance_round("rr")
            assert (await store.advance_round("sp")).current_round == 2
            assert (await store.close_query("sp")).status == QueryStatus.CLOSED
            with pytest.raises(FailedPrecondition, match="already closed"):
                await store.close_query("sp")
            with pytest.raises(FailedPrecondition, match="is closed"):
                await store.advance_round("sp")
            for change in (store.advance_round, store.close_query):
                with pytest.raises(NotFound, match="no query 'nope'"):
                    await change("nope")
            with pytest.raises(NotFound):
                await store.release("nope", fixed_release)

    async def test_a_release_below_min_reports_is_refused_and_changes_nothing(
        self, tmp_path: Path
    ) -> None:
        async with self.opened(tmp_path) as store:
            await store.create_query(spec("q", RR, min_reports=5), 0.0)
            await store.submit(ReportColumns.of(rr_run(0, 4, 2)))
            await store.close_query("q")
            with pytest.raises(FailedPrecondition, match="below its min_reports 5"):
                await store.release("q", fixed_release)
            assert store.release_of("q") is None
            assert store.stored_report_count("q") == 4
            assert store.ledger() is None

    async def test_a_release_is_kept_once_and_the_reports_are_forgotten(
        self, tmp_path: Path
    ) -> None:
        run = rr_run(0, 6, 3)
        async with self.opened(tmp_path) as store:
            await store.create_query(spec("q", RR), 0.0)
            await store.submit(ReportColumns.of(run))
            await store.close_query("q")
            counts = store.counts("q").tolist()
            record = await store.release("q", fixed_release)
            assert record.participants == 6
            assert store.release_of("q") == record
            assert store.ledger() == '{"spent": 1}'
            assert store.stored_report_count("q") == 0
            with pytest.raises(FailedPrecondition, match="already released"):
                await store.release("q", fixed_release)
        async with self.opened(tmp_path) as store:
            info = store.query("q")
            assert info is not None and info.status == QueryStatus.RELEASED
            assert store.release_of("q") == record
            assert store.ledger() == '{"spent": 1}'
            assert store.counts("q").tolist() == counts
            assert store.stored_report_count("q") == 0
            # The report ids are forgotten with the reports; the query accepts nothing.
            again = await store.submit(ReportColumns.of(run[:1]))
            assert summary(again) == (0, 0, [(0, FailedPrecondition)])

    async def test_a_refused_release_changes_nothing(self, tmp_path: Path) -> None:
        def refuse(
            query: QueryInfo, counts: Any, ledger: str | None
        ) -> tuple[ReleaseRecord, str | None]:
            raise FailedPrecondition("not today")

        async with self.opened(tmp_path) as store:
            await store.create_query(spec("q", RR), 0.0)
            await store.submit(ReportColumns.of(rr_run(0, 2, 4)))
            await store.close_query("q")
            with pytest.raises(FailedPrecondition, match="not today"):
                await store.release("q", refuse)
            info = store.query("q")
            assert info is not None and info.status == QueryStatus.CLOSED
            assert store.stored_report_count("q") == 2
            assert (await store.release("q", fixed_release)).participants == 2

    async def test_a_query_not_yet_released_is_deleted_with_its_reports(
        self, tmp_path: Path
    ) -> None:
        run = rr_run(0, 5, 6)
        async with self.opened(tmp_path) as store:
            await store.create_query(spec("q", RR), 0.0)
            await store.create_query(spec("other", RR), 1.0)
            await store.submit(ReportColumns.of(run))
            info, deleted = await store.delete_query("q")
            assert info.query_id == "q" and info.completed_devices == 5 and deleted == 5
            assert store.query("q") is None and await store.current_query("q") is None
            assert [q.query_id for q in await store.current_queries()] == ["other"]
            assert store.stored_report_count("q") == 0
            assert summary(await store.submit(ReportColumns.of(run[:1]))) == (
                0,
                0,
                [(0, NotFound)],
            )
            with pytest.raises(NotFound):
                await store.delete_query("q")
        async with self.opened(tmp_path) as store:
            assert store.query("q") is None and store.ledger() is None
            # The id is free again: the same reports count in the new query, as new.
            await store.create_query(spec("q", RR), 2.0)
            got = await store.submit(ReportColumns.of(run))
            assert summary(got) == (5, 0, [])
            assert store.stored_report_count("q") == 5
            await store.close_query("q")
            await store.release("q", fixed_release)
            with pytest.raises(FailedPrecondition, match="cannot be undone"):
                await store.delete_query("q")
            released = store.query("q")
            assert released is not None and released.status == QueryStatus.RELEASED

    async def test_a_ledger_update_is_durable(self, tmp_path: Path) -> None:
        async with self.opened(tmp_path) as store:
            assert store.ledger() is None
            assert await store.update_ledger(lambda body: (body or "") + "a") == "a"
            assert await store.update_ledger(lambda body: (body or "") + "b") == "ab"
        async with self.opened(tmp_path) as store:
            assert store.ledger() == "ab"

    # ------------------------------------------------------------------ admission tokens

    async def test_a_token_requirement_is_kept_across_a_restart(self, tmp_path: Path) -> None:
        async with self.opened(tmp_path) as store:
            with_tokens = QuerySpec("t", "", RR, "grid", TARGETS, 1, None, "issuer.example")
            created = await store.create_query(with_tokens, 1.0)
            await store.create_query(spec("plain", RR), 1.0)
            assert created.spec.token_issuer == "issuer.example"
        async with self.opened(tmp_path) as store:
            assert store.query("t") == created
            plain = store.query("plain")
            assert plain is not None and plain.spec.token_issuer is None

    async def test_a_nonce_is_spent_once_per_query_and_a_retry_of_its_report_passes(
        self, tmp_path: Path
    ) -> None:
        async with self.opened(tmp_path) as store:
            await store.create_query(spec("a", RR), 1.0)
            await store.create_query(spec("b", RR), 1.0)
            first = await store.redeem_tokens("a", [(b"n1", key(1)), (b"n2", key(2))])
            assert first == [Redemption.NEW, Redemption.NEW]
            # The same report again (a retry), another report with a spent nonce (a replay),
            # and the same nonce twice in one call for two reports.
            again = await store.redeem_tokens(
                "a", [(b"n1", key(1)), (b"n2", key(9)), (b"n3", key(3)), (b"n3", key(4))]
            )
            assert again == [
                Redemption.SAME_REPORT,
                Redemption.SPENT,
                Redemption.NEW,
                Redemption.SPENT,
            ]
            # Spent-nonce sets are per query.
            assert await store.redeem_tokens("b", [(b"n1", key(5))]) == [Redemption.NEW]
        async with self.opened(tmp_path) as store:  # durable across a restart
            after = await store.redeem_tokens("a", [(b"n1", key(1)), (b"n1", key(7))])
            assert after == [Redemption.SAME_REPORT, Redemption.SPENT]

    async def test_a_release_forgets_the_querys_spent_nonces(self, tmp_path: Path) -> None:
        async with self.opened(tmp_path) as store:
            await store.create_query(spec("q", RR), 1.0)
            await store.create_query(spec("other", RR), 1.0)
            await store.redeem_tokens("q", [(b"n1", key(1))])
            await store.redeem_tokens("other", [(b"n1", key(1))])
            await store.submit(ReportColumns.of(rr_run(0, 1, seed=5)))
            await store.close_query("q")
            await store.release("q", fixed_release)
            # Released, it accepts no report: its nonces are gone, other queries' stay.
            assert await store.redeem_tokens("q", [(b"n1", key(2))]) == [Redemption.NEW]
            assert await store.redeem_tokens("other", [(b"n1", key(2))]) == [Redemption.SPENT]
