-- ldpcollect PostgreSQL schema, version 2: device admission (docs/admission.md).

-- NULL: the query takes reports without tokens; else the TokenChallenge issuer name every
-- report's token must answer.
ALTER TABLE queries ADD COLUMN token_issuer text;

-- Token nonces redeemed, per query. The primary key is the replay rule across replicas: the
-- first report to insert a nonce spends it; the same report id may redeem it again (a retry).
CREATE TABLE spent_tokens (
    query_id  text NOT NULL,
    nonce     bytea NOT NULL,
    report_id bytea NOT NULL,
    PRIMARY KEY (query_id, nonce)
);
