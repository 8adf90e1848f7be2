-- ldpcollect SQLite schema: device admission (docs/admission.md). Idempotent, run after v2.

CREATE TABLE IF NOT EXISTS query_tokens (  -- queries that require a token with every report
    query_id    TEXT PRIMARY KEY,
    issuer_name TEXT NOT NULL              -- the TokenChallenge issuer_name tokens answer
);

CREATE TABLE IF NOT EXISTS spent_tokens (  -- token nonces redeemed, per query
    query_id  TEXT NOT NULL,
    nonce     BLOB NOT NULL,               -- the token's 32-byte nonce
    report_id BLOB NOT NULL,               -- the report that spent it (a retry of it may again)
    PRIMARY KEY (query_id, nonce)
) WITHOUT ROWID;
