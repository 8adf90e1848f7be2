-- Secure mode (two aggregators), schema version 2: one file per aggregator, beside its DB.
-- Both roles use secure_queries; the leader secure_reports, secure_held and secure_jobs; the
-- helper helper_jobs and helper_reports. A version 1 file (the leader's reports, shares and
-- jobs in one table) is migrated at open (`store_migrate`).
PRAGMA user_version = 2;

CREATE TABLE IF NOT EXISTS secure_queries (
    query_id TEXT PRIMARY KEY,
    -- JSON: description, mechanism, params, targets, min_reports, noise_sigma, vdaf,
    -- upload_round, and the HPKE configs (hex).
    body TEXT NOT NULL,
    verify_key BLOB NOT NULL,
    state INTEGER NOT NULL,              -- 1 open, 2 closed, 3 released
    aggregate BLOB NOT NULL,             -- this aggregator's aggregate share (encoded)
    aggregated INTEGER NOT NULL DEFAULT 0,
    refused INTEGER NOT NULL DEFAULT 0,
    sealed_share BLOB                    -- the noised, sealed share once released (kept so a
                                         -- retried release returns the same noise)
);

-- Leader: every acknowledged upload's id and digest, kept for good (a later upload of the id
-- is a duplicate or a conflict). Small rows, written once.
CREATE TABLE IF NOT EXISTS secure_reports (
    query_id TEXT NOT NULL,
    report_id BLOB NOT NULL,
    digest BLOB NOT NULL,                -- SHA-256 of the upload: same id, same bytes = duplicate
    PRIMARY KEY (query_id, report_id)
) WITHOUT ROWID;

-- Leader: each report held until its job is finished: inserted once at upload, deleted once
-- with its job (a rowid table: a report's few KB fit in its page, never rewritten). `seq`
-- orders them: a job is a range of one query's seqs.
CREATE TABLE IF NOT EXISTS secure_held (
    seq INTEGER PRIMARY KEY,
    query_id TEXT NOT NULL,
    report_id BLOB NOT NULL,
    body BLOB NOT NULL,                  -- the held body (upload.held_body)
    leader_share BLOB NOT NULL,          -- the opened input share
    token BLOB                           -- its admission token, if the query requires them
);

CREATE INDEX IF NOT EXISTS secure_held_query ON secure_held (query_id, seq);

-- Leader: the unfinished aggregation jobs, each the held reports of its query with seq in
-- [lo, hi]; deleted with its reports when finished. Jobs are claimed in seq order, so a
-- query's reports not in a job are those after its jobs' largest hi.
CREATE TABLE IF NOT EXISTS secure_jobs (
    job_id BLOB PRIMARY KEY,
    query_id TEXT NOT NULL,
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS secure_jobs_query ON secure_jobs (query_id, hi);

-- Helper: each finished job's answer (a retried job gets it again) and every report id seen.
CREATE TABLE IF NOT EXISTS helper_jobs (
    job_id BLOB PRIMARY KEY,
    query_id TEXT NOT NULL,
    response BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS helper_reports (
    query_id TEXT NOT NULL,
    report_id BLOB NOT NULL,
    job_id BLOB NOT NULL,
    PRIMARY KEY (query_id, report_id)
) WITHOUT ROWID;

-- Both: admission-token nonces spent per query (the leader's at upload, the helper's in
-- the aggregation job), with the report that spent each; deleted at the query's release.
CREATE TABLE IF NOT EXISTS secure_spent_tokens (
    query_id TEXT NOT NULL,
    nonce BLOB NOT NULL,
    report_id BLOB NOT NULL,
    PRIMARY KEY (query_id, nonce)
) WITHOUT ROWID;

-- Leader: the secure queries' privacy ledger (aggregator.release.StoredLedger's JSON).
CREATE TABLE IF NOT EXISTS secure_ledger (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    body TEXT NOT NULL
);
