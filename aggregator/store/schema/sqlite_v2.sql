-- ldpcollect SQLite schema, version 2: the report log (one row per query per commit).
-- Version 1 stored one row per report in `reports` (query_id, report_id, pseudonym, round,
-- answers); SqliteStore converts such a file when it opens it. Every statement is idempotent.

CREATE TABLE IF NOT EXISTS queries (
    query_id          TEXT PRIMARY KEY,
    description       TEXT NOT NULL,
    mechanism         TEXT NOT NULL,    -- "rr" | "sp"
    mechanism_params  TEXT NOT NULL,    -- JSON object of exact fraction text
    scheme            TEXT NOT NULL,    -- "grid" | "h3:<res>"
    targets           BLOB NOT NULL,    -- uint64 little-endian, in query order
    min_reports       INTEGER NOT NULL,
    noise_sigma       TEXT,             -- fraction text; NULL = no release noise
    created_at        REAL NOT NULL,
    status            INTEGER NOT NULL, -- 1 open, 2 closed, 3 released
    current_round     INTEGER NOT NULL,
    reports_per_round TEXT NOT NULL,    -- JSON list, round 1 first
    completed_devices INTEGER NOT NULL,
    counts            BLOB NOT NULL     -- int64 little-endian, rounds x targets, row-major:
                                        -- per-target sums over devices that completed
);

CREATE TABLE IF NOT EXISTS releases (
    query_id    TEXT PRIMARY KEY,
    released_at REAL NOT NULL,
    body        TEXT NOT NULL           -- JSON of the ReleaseRecord
);

CREATE TABLE IF NOT EXISTS ledger (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    body TEXT NOT NULL                  -- the privacy ledger's JSON
);

CREATE TABLE IF NOT EXISTS reports (  -- append-only report log: one row per query per commit
    seq        INTEGER PRIMARY KEY,
    query_id   TEXT NOT NULL,
    round      INTEGER NOT NULL,
    n          INTEGER NOT NULL,       -- reports in this row
    nonce      BLOB,                   -- AES-CTR initial counter block of the row, whose three
                                       -- columns are then encrypted under the query's key in
                                       -- report_keys; NULL: stored in clear. Before the blobs,
                                       -- so reading it does not walk their overflow pages (a
                                       -- file from before gets it last, by ALTER TABLE).
    answers_at INTEGER,                -- where the answers start in the query's answer file
                                       -- (`answer_files`; `answers` is then empty); NULL:
                                       -- in `answers`. Also added by ALTER TABLE.
    report_ids BLOB NOT NULL,          -- n x 16 bytes
    pseudonyms BLOB NOT NULL,          -- n x 16 bytes
    answers    BLOB NOT NULL           -- n x ceil(targets / 8) bytes, or none (answers_at)
);

CREATE INDEX IF NOT EXISTS reports_by_query ON reports (query_id);

-- One random AES-256 key per query whose report log rows are encrypted (report_cipher.py).
-- A release deletes (overwrites) the key, which leaves the rows unreadable at once.
CREATE TABLE IF NOT EXISTS report_keys (
    query_id TEXT PRIMARY KEY,
    key      BLOB NOT NULL
);
