-- ldpcollect PostgreSQL schema, version 1 (applied once, recorded in ldpcollect_migrations).
-- Several stateless `ldpcollect serve` replicas share these tables; every rule that decides
-- between two replicas is a constraint or a row lock here, never a replica's memory.

CREATE TABLE queries (
    query_id          text PRIMARY KEY,
    description       text NOT NULL,
    mechanism         text NOT NULL,             -- "rr" | "sp"
    mechanism_params  text NOT NULL,             -- JSON object of exact fraction text
    scheme            text NOT NULL,             -- "grid" | "h3:<res>"
    targets           bytea NOT NULL,            -- uint64 little-endian, in query order
    min_reports       integer NOT NULL,
    noise_sigma       text,                      -- fraction text; NULL = no release noise
    created_at        double precision NOT NULL,
    status            smallint NOT NULL,         -- 1 open, 2 closed, 3 released
    current_round     smallint NOT NULL,
    query_no          integer GENERATED ALWAYS AS IDENTITY UNIQUE  -- the reports' short key
);

-- Individual reports until the release deletes them. The two unique keys are the
-- exactly-once rules across replicas: one report per id, one report per device and round.
-- (`query_no` rather than the query id text: smaller rows and index entries.)
CREATE TABLE reports (
    query_no  integer NOT NULL,
    report_id bytea NOT NULL,
    pseudonym bytea NOT NULL,
    round     smallint NOT NULL,
    answers   bytea NOT NULL,
    PRIMARY KEY (query_no, report_id),
    UNIQUE (query_no, pseudonym, round)
);

-- Per-target Yes counts over devices that completed every round, split into shards by `ord`
-- so that concurrent writers rarely update the same row (no hot row); a read sums the shards
-- and a release merges them into ord 0. fillfactor 50 leaves room for HOT updates.
CREATE TABLE target_counts (
    query_id text NOT NULL,
    round    smallint NOT NULL,
    target   integer NOT NULL,                   -- index into the query's targets
    ord      smallint NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (query_id, round, target, ord)
) WITH (fillfactor = 50);

-- Reports accepted per round and devices that completed, sharded the same way.
CREATE TABLE progress_counts (
    query_id       text NOT NULL,
    ord            smallint NOT NULL,
    round1_reports bigint NOT NULL,
    round2_reports bigint NOT NULL,
    completed      bigint NOT NULL,
    PRIMARY KEY (query_id, ord)
) WITH (fillfactor = 50);

CREATE TABLE releases (
    query_id    text PRIMARY KEY,
    released_at double precision NOT NULL,
    body        text NOT NULL                    -- JSON of the ReleaseRecord
);

-- One row, always present, so that every charge can lock it (SELECT ... FOR UPDATE).
CREATE TABLE ledger (
    id   integer PRIMARY KEY CHECK (id = 1),
    body text                                    -- the privacy ledger's JSON; NULL = none yet
);
INSERT INTO ledger (id, body) VALUES (1, NULL);
