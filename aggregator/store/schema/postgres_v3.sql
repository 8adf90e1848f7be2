-- ldpcollect PostgreSQL schema, version 3: one counter row per (query, shard).
-- Up to version 2 a transaction added its counts to one row per (round, target) of a shard
-- (100 upserts for 100 targets) and its progress to another row. Now the shard is ONE row:
-- progress and every count (an array), updated by one upsert. Still split by `ord` so that
-- concurrent writers rarely update the same row (no hot row); only `counts` and the progress
-- change, no indexed column, and fillfactor 50 leaves room: HOT updates.
CREATE TABLE count_shards (
    query_id       text NOT NULL,
    ord            smallint NOT NULL,
    round1_reports bigint NOT NULL,
    round2_reports bigint NOT NULL,
    completed      bigint NOT NULL,
    counts         bigint[] NOT NULL,  -- rounds x targets, row-major: (round - 1) * T + target
    PRIMARY KEY (query_id, ord)
) WITH (fillfactor = 50);

-- Existing shards, with their counts laid out densely (absent rows count 0). A query has
-- 2 rounds for Sampling Privacy ("sp"), else 1; `targets` holds 8 bytes per target.
INSERT INTO count_shards (query_id, ord, round1_reports, round2_reports, completed, counts)
SELECT p.query_id, p.ord, p.round1_reports, p.round2_reports, p.completed,
       ARRAY(SELECT coalesce(t.n, 0)
             FROM generate_series(1, CASE q.mechanism WHEN 'sp' THEN 2 ELSE 1 END) AS r(round)
             CROSS JOIN generate_series(0, length(q.targets) / 8 - 1) AS k(target)
             LEFT JOIN target_counts t ON t.query_id = p.query_id AND t.ord = p.ord
                  AND t.round = r.round AND t.target = k.target
             ORDER BY r.round, k.target)
FROM progress_counts p JOIN queries q ON q.query_id = p.query_id;

DROP TABLE target_counts;
DROP TABLE progress_counts;
