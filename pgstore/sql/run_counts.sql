-- Settled runs counted per minute, workflow, tenant and status, in
-- countShards rows each (one per connection's shard), for the stats.
--
-- The start of a minute is written as dag.Minute computes it, whole
-- minutes since the Unix epoch, whatever the session's time zone:
--   to_timestamp(floor(extract(epoch FROM ts) / 60) * 60)

-- name: countSettled
-- Settled runs counted per minute, into the rows of this connection's
-- shard; the keys come sorted and distinct, so that two transactions on
-- one shard lock rows in the same order. A replayed run is counted out
-- (n = -1) under the key it settled with, so that the stats count each
-- run once, under its current status.
INSERT INTO {{schema}}.run_counts AS c (minute, workflow, tenant, status, shard, n)
SELECT minute, workflow, tenant, status, (pg_backend_pid() % {{countShards}})::smallint, n
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bigint[]) AS u(minute, workflow, tenant, status, n)
ON CONFLICT (minute, workflow, tenant, status, shard) DO UPDATE SET n = c.n + excluded.n;

-- name: statsCounts
-- The runs settled within the window ($3 microseconds before $2, the
-- database's now() when NULL), of the tenant $1 (any when NULL).
SELECT workflow, '', tenant, status, sum(n)::bigint FROM {{schema}}.run_counts
WHERE minute >= to_timestamp(floor(extract(epoch FROM coalesce($2, now()) - $3::bigint * interval '1 microsecond') / 60) * 60)
  AND ($1::text IS NULL OR tenant = $1)
GROUP BY workflow, tenant, status
HAVING sum(n) > 0;

-- name: compactCounts
-- The counts of each closed minute (ended more than a minute ago) merged
-- into shard 0, one row per workflow, tenant and status instead of one per
-- shard: the shards only keep the transactions of the current minute from
-- waiting for one another. Only the last ten minutes are looked at, so
-- that a pass reads what it merges; a transaction that settles runs later
-- than that into an older minute leaves a row in its shard, which the
-- stats count all the same.
WITH moved AS (
  DELETE FROM {{schema}}.run_counts
  WHERE minute >= to_timestamp(floor(extract(epoch FROM coalesce($1, now()) - interval '11 minutes') / 60) * 60)
    AND minute < to_timestamp(floor(extract(epoch FROM coalesce($1, now()) - interval '1 minute') / 60) * 60) AND shard <> 0
  RETURNING minute, workflow, tenant, status, n
)
INSERT INTO {{schema}}.run_counts AS c (minute, workflow, tenant, status, shard, n)
SELECT minute, workflow, tenant, status, 0, sum(n) FROM moved GROUP BY minute, workflow, tenant, status
ORDER BY minute, workflow, tenant, status
ON CONFLICT (minute, workflow, tenant, status, shard) DO UPDATE SET n = c.n + excluded.n;

-- name: pruneCounts
DELETE FROM {{schema}}.run_counts
WHERE minute < to_timestamp(floor(extract(epoch FROM coalesce($1, now()) - $2::bigint * interval '1 microsecond') / 60) * 60);
