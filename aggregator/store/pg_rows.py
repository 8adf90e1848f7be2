"""How the PostgreSQL store reads and writes its rows: one statement per step, bulk where a
step touches many rows (unnest of arrays: one round trip for a whole group of reports)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from aggregator.model import QueryInfo, QueryStatus, ReleaseRecord
from aggregator.rounds import Accepted, LogEntry, QueryState
from aggregator.store.release_codec import release_from_json
from aggregator.store.rows import SPEC_COLUMNS, spec_of, spec_values

Conn = Any  # psycopg.AsyncConnection[tuple[Any, ...]]

# Counter shards per query: a writer picks one at random, a reader sums them all.
SHARDS = 16

# A query's number (the reports' key) from its id, evaluated once per statement.
QUERY_NO = "(SELECT query_no FROM queries WHERE query_id = {})"
QUERY_COLUMNS = (*SPEC_COLUMNS, "created_at", "status", "current_round", "token_issuer")
_SELECT_QUERIES = f"SELECT {', '.join(QUERY_COLUMNS)} FROM queries"
INSERT_QUERY = (
    f"INSERT INTO queries ({', '.join(QUERY_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * len(QUERY_COLUMNS))}) ON CONFLICT DO NOTHING"
)
# The accepted reports of one group as three packed columns (fixed-width entries back to
# back), split by the database: one bytea parameter each instead of an array of n values.
_INSERT_REPORTS = (
    "INSERT INTO reports (query_no, report_id, pseudonym, round, answers) "
    f"SELECT {QUERY_NO.format('%(query)s')}, substr(%(ids)b, i * 16 + 1, 16), "
    "substr(%(devices)b, i * 16 + 1, 16), "
    "%(round)s, substr(%(answers)b, i * %(width)s + 1, %(width)s) "
    "FROM generate_series(0, %(n)s - 1) AS i ON CONFLICT DO NOTHING"
)
# Adds a transaction's deltas to one counter shard (schema v3: one row per query and shard):
# the progress columns summed, the counts arrays summed element by element.
_SHARD_SUMS = (
    "ON CONFLICT (query_id, ord) DO UPDATE SET "
    "round1_reports = s.round1_reports + EXCLUDED.round1_reports, "
    "round2_reports = s.round2_reports + EXCLUDED.round2_reports, "
    "completed = s.completed + EXCLUDED.completed, "
    "counts = ARRAY(SELECT a + b FROM unnest(s.counts, EXCLUDED.counts) WITH ORDINALITY "
    "AS u(a, b, i) ORDER BY i)"
)
_ADD_COUNTS = (
    "INSERT INTO count_shards AS s "
    "(query_id, ord, round1_reports, round2_reports, completed, counts) "
    f"VALUES (%s, %s, %s, %s, %s, %s::bigint[]) {_SHARD_SUMS}"
)


def array_text(values: npt.NDArray[np.integer[Any]]) -> str:
    """An integer array as PostgreSQL's array text (`{1,2,3}`): much cheaper to send than a
    list adapted element by element."""
    return "{" + ",".join(map(str, values.tolist())) + "}"


def query_values(state: QueryState) -> tuple[Any, ...]:
    return (
        *spec_values(state.spec),
        state.created_at,
        int(state.status),
        state.current_round,
        state.spec.token_issuer,
    )


def bare_state(row: tuple[Any, ...]) -> QueryState:
    """A query's state from its `queries` row: zero counts, no reports."""
    n = len(SPEC_COLUMNS)
    spec = replace(spec_of(*row[:n]), token_issuer=row[n + 3])
    state = QueryState.new(spec, float(row[n]))
    state.status = QueryStatus(row[n + 1])
    state.current_round = int(row[n + 2])
    return state


# Per-query advisory locks (two-key form; the first key names ldpcollect's query locks):
# submissions hold the query's lock shared, lifecycle changes exclusive, until their
# transaction ends. Held in the lock manager's memory: unlike a row lock, taking one writes
# nothing to the row or the WAL (the query row would be a hot row). Ids that hash alike only
# wait for each other.
QUERY_LOCK = 0x6C6471
_LOCK_SHARED = "SELECT pg_advisory_xact_lock_shared(%s, hashtext(q)) FROM unnest(%s::text[]) q"
_LOCK = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"


async def lock_shared(conn: Conn, query_ids: list[str]) -> None:
    """Hold the queries' locks shared (in sorted order) until the transaction ends. Take it
    before reading a query's status: a statement's snapshot starts when the statement does."""
    await conn.execute(_LOCK_SHARED, (QUERY_LOCK, sorted(query_ids)))


async def states_of(conn: Conn, query_ids: list[str]) -> dict[str, QueryState]:
    """The bare states of those of `query_ids` that exist."""
    cursor = await conn.execute(f"{_SELECT_QUERIES} WHERE query_id = ANY(%s)", (query_ids,))
    return {row[0]: bare_state(row) for row in await cursor.fetchall()}


async def locked_state(conn: Conn, query_id: str) -> QueryState | None:
    """The bare state of `query_id` (None: no such query) for a lifecycle change: its lock
    held exclusively (every submission in flight for it has ended) and its row FOR UPDATE."""
    await conn.execute(_LOCK, (QUERY_LOCK, query_id))
    cursor = await conn.execute(f"{_SELECT_QUERIES} WHERE query_id = %s FOR UPDATE", (query_id,))
    row = await cursor.fetchone()
    return None if row is None else bare_state(row)


async def restore_known(
    conn: Conn, state: QueryState, report_ids: list[bytes], pseudonyms: list[bytes]
) -> None:
    """Give `state` the stored reports that the rules can consult for these ids and devices:
    the same answers as from the whole table, at the cost of two index lookups."""
    cursor = await conn.execute(
        "SELECT round, report_id, pseudonym, answers FROM reports "
        f"WHERE query_no = {QUERY_NO.format('%s')} "
        "AND (report_id = ANY(%s) OR pseudonym = ANY(%s))",
        (state.spec.query_id, report_ids, pseudonyms),
    )
    by_round: dict[int, tuple[list[bytes], list[bytes], list[bytes]]] = defaultdict(
        lambda: ([], [], [])
    )
    for round_, report_id, pseudonym, answers in await cursor.fetchall():
        ids, devices, all_answers = by_round[int(round_)]
        ids.append(bytes(report_id))
        devices.append(bytes(pseudonym))
        all_answers.append(bytes(answers))
    state.restore(
        [
            LogEntry(round_, len(ids), b"".join(ids), b"".join(devices), b"".join(answers))
            for round_, (ids, devices, answers) in sorted(by_round.items())
        ]
    )


async def insert_accepted(conn: Conn, state: QueryState, accepted: Accepted) -> int:
    """Insert the accepted reports; returns how many rows were new (fewer means one was
    stored already, e.g. by another replica a moment ago)."""
    cursor = await conn.execute(_INSERT_REPORTS, _group_values(state, accepted))
    return int(cursor.rowcount)


def _group_values(state: QueryState, accepted: Accepted) -> dict[str, Any]:
    """The parameters naming a group of reports in `_INSERT_REPORTS` and `_ADD_NEW_GROUP`."""
    return {
        "query": state.spec.query_id,
        "ids": b"".join(accepted.report_ids),
        "devices": b"".join(accepted.pseudonyms),
        "round": accepted.round,
        "answers": b"".join(accepted.answers),
        "width": state.answer_bytes,
        "n": accepted.count,
    }


async def add_counts(conn: Conn, state: QueryState, shard: int | None = None) -> None:
    """Add `state`'s counts and progress (deltas: it started from zero) to one shard, by
    default a random one."""
    shard = random.randrange(SHARDS) if shard is None else shard
    await conn.execute(_ADD_COUNTS, (state.spec.query_id, shard, *_progress(state), _counts(state)))


def _progress(state: QueryState) -> tuple[int, int, int]:
    per_round = [*state.reports_per_round, 0][:2]
    return per_round[0], per_round[1], state.completed_devices


def _counts(state: QueryState) -> str:
    """Every count (rounds x targets, row-major) as array text: one parameter."""
    return array_text(state.counts.ravel())


# A whole group of new round-1 reports for an open query, in ONE statement (after the
# query's shared lock): read the query if it is still open in that round, insert every report
# (a unique violation fails the whole statement), and only when they all went in add the
# counts and progress to a shard. Returns the reports inserted: all of them, or 0 when the
# query was no longer open in that round (nothing changed).
_ADD_NEW_GROUP = (
    "WITH q AS (SELECT query_no FROM queries WHERE query_id = %(query)s AND status = 1 "
    "AND current_round = %(round)s), "
    "ins AS (INSERT INTO reports (query_no, report_id, pseudonym, round, answers) "
    "SELECT q.query_no, substr(%(ids)b, i * 16 + 1, 16), substr(%(devices)b, i * 16 + 1, 16), "
    "%(round)s, substr(%(answers)b, i * %(width)s + 1, %(width)s) "
    "FROM q, generate_series(0, %(n)s - 1) AS i RETURNING 1), "
    "done AS (SELECT count(*) AS n FROM ins), "
    "cs AS (INSERT INTO count_shards AS s "
    "(query_id, ord, round1_reports, round2_reports, completed, counts) "
    "SELECT %(query)s, %(ord)s, %(round1)s, %(round2)s, %(completed)s, %(counts)s::bigint[] "
    f"FROM done WHERE done.n = %(n)s {_SHARD_SUMS}) "
    "SELECT n FROM done"
)


async def add_new_group(conn: Conn, groups: Sequence[tuple[QueryState, Accepted]]) -> bool:
    """Store groups of new reports of one query, and their states' deltas, in one transaction
    sent at once (a pipeline: one round trip): the query's shared lock, then `_ADD_NEW_GROUP`
    with the groups back to back and their deltas summed. False when the query was no longer
    open in that round. A report stored already (or twice in `groups`) raises
    UniqueViolation, changing nothing."""
    state, accepted = groups[0]
    if len(groups) > 1:
        state, accepted = _combined(groups)
    round1, round2, completed = _progress(state)
    values = {
        **_group_values(state, accepted),
        "ord": random.randrange(SHARDS),
        "counts": _counts(state),
        "round1": round1,
        "round2": round2,
        "completed": completed,
    }
    async with conn.pipeline(), conn.transaction():
        await lock_shared(conn, [state.spec.query_id])
        cursor = await conn.execute(_ADD_NEW_GROUP, values)
    row = await cursor.fetchone()
    return row is not None and int(row[0]) == accepted.count


def _combined(groups: Sequence[tuple[QueryState, Accepted]]) -> tuple[QueryState, Accepted]:
    """One state holding the sum of the groups' deltas, and their reports as one group."""
    first, first_accepted = groups[0]
    state = QueryState.new(first.spec, first.created_at)
    accepted = Accepted(first_accepted.round)
    for delta, group in groups:
        state.counts += delta.counts
        state.reports_per_round = [
            a + b for a, b in zip(state.reports_per_round, delta.reports_per_round, strict=True)
        ]
        state.completed_devices += delta.completed_devices
        accepted.count += group.count
        accepted.report_ids += group.report_ids
        accepted.pseudonyms += group.pseudonyms
        accepted.answers += group.answers
    return state, accepted


async def add_totals(conn: Conn, states: dict[str, QueryState]) -> None:
    """Set the bare `states`' counts and progress to the sums over every shard."""
    if not states:
        return
    cursor = await conn.execute(
        "SELECT query_id, sum(round1_reports), sum(round2_reports), sum(completed), "
        "(SELECT array_agg(total ORDER BY i) FROM (SELECT i, sum(x) AS total "
        "FROM count_shards t, unnest(t.counts) WITH ORDINALITY AS u(x, i) "
        "WHERE t.query_id = s.query_id GROUP BY i) AS per_count) "
        "FROM count_shards s WHERE query_id = ANY(%s) GROUP BY query_id",
        (list(states),),
    )
    for query_id, round1, round2, completed, counts in await cursor.fetchall():
        state = states[query_id]
        state.reports_per_round = [int(round1), int(round2)][: state.rounds]
        state.completed_devices = int(completed)
        state.counts = np.array(counts, dtype=np.int64).reshape(state.counts.shape)


# Queries with their progress summed over the shards, in one statement (one snapshot).
_CURRENT = (
    f"SELECT {', '.join('q.' + c for c in QUERY_COLUMNS)}, coalesce(sum(s.round1_reports), 0), "
    "coalesce(sum(s.round2_reports), 0), coalesce(sum(s.completed), 0) "
    "FROM queries q LEFT JOIN count_shards s ON s.query_id = q.query_id {} GROUP BY q.query_id"
)


async def current(conn: Conn, query_ids: list[str] | None = None) -> dict[str, QueryInfo]:
    """The committed state of `query_ids` (None: every query), counts left out."""
    if query_ids is None:
        cursor = await conn.execute(_CURRENT.format(""))
    else:
        cursor = await conn.execute(_CURRENT.format("WHERE q.query_id = ANY(%s)"), (query_ids,))
    found = {}
    for row in await cursor.fetchall():
        state = bare_state(row[: len(QUERY_COLUMNS)])
        round1, round2, completed = row[len(QUERY_COLUMNS) :]
        state.reports_per_round = [int(round1), int(round2)][: state.rounds]
        state.completed_devices = int(completed)
        found[state.spec.query_id] = state.snapshot()
    return found


async def merge_shards(conn: Conn, state: QueryState) -> None:
    """Replace a released query's counter shards by one row each (ord 0) holding `state`'s
    totals (the sums over every shard)."""
    query_id = state.spec.query_id
    await conn.execute("DELETE FROM count_shards WHERE query_id = %s", (query_id,))
    await add_counts(conn, state, shard=0)


async def all_states(conn: Conn) -> dict[str, QueryState]:
    cursor = await conn.execute(_SELECT_QUERIES)
    states = {row[0]: bare_state(row) for row in await cursor.fetchall()}
    await add_totals(conn, states)
    return states


async def new_releases(conn: Conn, known: list[str]) -> dict[str, ReleaseRecord]:
    """The stored releases other than `known` ones (a release never changes once written)."""
    cursor = await conn.execute(
        "SELECT query_id, body FROM releases WHERE NOT (query_id = ANY(%s))", (known,)
    )
    return {query_id: release_from_json(body) for query_id, body in await cursor.fetchall()}


async def ledger_body(conn: Conn, lock: str = "") -> str | None:
    cursor = await conn.execute(f"SELECT body FROM ledger WHERE id = 1 {lock}")
    row = await cursor.fetchone()
    return None if row is None or row[0] is None else str(row[0])
