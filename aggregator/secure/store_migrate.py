"""The SQLite secure store's schema at open: a new file gets `schema/secure_v2.sql`; a
version 1 file (the leader's reports, their bytes, shares, tokens, jobs and outcomes in one
`secure_reports` table, rewritten at claim and at finish) is migrated to version 2 in one
transaction first, so a crash leaves either file whole.

What version 2 keeps of a version 1 leader: every report's id and digest (duplicates are still
told from conflicts); each pending report (not yet aggregated or refused) held in
`secure_held`; each unfinished job with the same id and the same reports (the helper may have
recorded it: the job must be sent again as it was), its reports given consecutive seqs, and
the reports in no job after every job's. Finished reports' outcomes are not kept (version 2
keeps only the query's counts, as version 1 did for anything else)."""

from __future__ import annotations

import sqlite3
from importlib import resources

from aggregator.secure import spent_tokens

SCHEMA = "schema/secure_v2.sql"


def schema_text() -> str:
    return resources.files("aggregator.secure").joinpath(SCHEMA).read_text()


def is_version_1(db: sqlite3.Connection) -> bool:
    """A version 1 leader table (its `secure_reports` holds the reports' bytes)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(secure_reports)")}
    return "body" in columns


_COPY_V1 = """
INSERT INTO secure_held (query_id, report_id, body, leader_share, token)
    SELECT query_id, report_id, body, leader_share, token FROM secure_reports_v1
    WHERE outcome IS NULL
    ORDER BY job_id IS NULL, query_id, job_id, report_id;
INSERT INTO secure_jobs (job_id, query_id, lo, hi)
    SELECT v1.job_id, v1.query_id, MIN(held.seq), MAX(held.seq)
    FROM secure_reports_v1 AS v1 JOIN secure_held AS held
        ON held.query_id = v1.query_id AND held.report_id = v1.report_id
    WHERE v1.outcome IS NULL AND v1.job_id IS NOT NULL
    GROUP BY v1.job_id, v1.query_id;
INSERT INTO secure_reports (query_id, report_id, digest)
    SELECT query_id, report_id, digest FROM secure_reports_v1;
DROP TABLE secure_reports_v1;
"""


def apply_schema(db: sqlite3.Connection) -> None:
    """Create or migrate the file's tables (`db` in autocommit mode)."""
    if not is_version_1(db):
        db.executescript(schema_text())
        return
    spent_tokens.migrate(db)  # a version 1 file from before tokens: its `token` column
    db.executescript(
        "BEGIN IMMEDIATE;\n"
        "DROP INDEX IF EXISTS secure_reports_pending;\n"
        "ALTER TABLE secure_reports RENAME TO secure_reports_v1;\n"
        + schema_text()
        + _COPY_V1
        + "COMMIT;\n"
    )
