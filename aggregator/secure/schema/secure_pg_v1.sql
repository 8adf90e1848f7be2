-- Secure mode on PostgreSQL, schema version 1 (`aggregator/secure/pg_store.py`). The tables
-- live in a schema of their own per role (ldpcollect_secure_leader, ldpcollect_secure_helper),
-- beside the trusted mode's tables in the same database; every replica of a role uses them.
-- The columns are those of the SQLite store (secure_v1.sql), which documents them.

CREATE TABLE secure_queries (
    query_id text PRIMARY KEY,
    body text NOT NULL,
    verify_key bytea NOT NULL,
    state integer NOT NULL,              -- 1 open, 2 closed, 3 released
    aggregate bytea NOT NULL,
    aggregated bigint NOT NULL DEFAULT 0,
    refused bigint NOT NULL DEFAULT 0,
    sealed_share bytea
);

-- Leader: every acknowledged upload, until it is aggregated or refused.
CREATE TABLE secure_reports (
    query_id text NOT NULL,
    report_id bytea NOT NULL,
    digest bytea NOT NULL,
    body bytea,
    leader_share bytea,
    job_id bytea,
    outcome text,
    token bytea,
    PRIMARY KEY (query_id, report_id)
);

CREATE INDEX secure_reports_pending
    ON secure_reports (query_id, job_id) WHERE outcome IS NULL;

-- Helper: each finished job's answer, written once (a retried job, at any replica, gets it).
CREATE TABLE helper_jobs (
    job_id bytea PRIMARY KEY,
    query_id text NOT NULL,
    response bytea NOT NULL
);

CREATE TABLE helper_reports (
    query_id text NOT NULL,
    report_id bytea NOT NULL,
    job_id bytea NOT NULL,
    PRIMARY KEY (query_id, report_id)
);

CREATE TABLE secure_spent_tokens (
    query_id text NOT NULL,
    nonce bytea NOT NULL,
    report_id bytea NOT NULL,
    PRIMARY KEY (query_id, nonce)
);

CREATE TABLE secure_ledger (
    id integer PRIMARY KEY CHECK (id = 1),
    body text NOT NULL
);

-- The role's HPKE key pair, shared by its replicas (devices seal to one config).
CREATE TABLE secure_hpke_key (
    id integer PRIMARY KEY CHECK (id = 1),
    config_id integer NOT NULL,
    private_key bytea NOT NULL
);
