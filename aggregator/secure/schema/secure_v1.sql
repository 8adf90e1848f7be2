-- Secure mode (two aggregators), schema version 1: one file per aggregator, beside its DB.
-- Both roles use secure_queries; the leader uses secure_reports; the helper helper_jobs and
-- helper_reports.
PRAGMA user_version = 1;

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

-- Leader: every acknowledged upload. `body` (the SecureReport) and `leader_share` (the opened
-- input share) are kept until the report is aggregated or refused.
CREATE TABLE IF NOT EXISTS secure_reports (
    query_id TEXT NOT NULL,
    report_id BLOB NOT NULL,
    digest BLOB NOT NULL,                -- SHA-256 of the upload: same id, same bytes = duplicate
    body BLOB,
    leader_share BLOB,
    job_id BLOB,                         -- the aggregation job holding it, while in one
    outcome TEXT,                        -- NULL pending, '' aggregated, else the refusal name
    token BLOB,                          -- its admission token (if the query requires them),
                                         -- passed to the helper; dropped with `body`
    PRIMARY KEY (query_id, report_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS secure_reports_pending
    ON secure_reports (query_id, job_id) WHERE outcome IS NULL;

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
