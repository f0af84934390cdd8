-- Keyed tasks parked behind their concurrency key, in the order they
-- arrived (flow.go, internal/flow).

-- name: dequeueKeyed
-- A keyed task leaving the queue unclaimed is in ready (admitted: it
-- frees a slot) or parked; each row is found by its unique key.
WITH d AS (SELECT * FROM unnest($1::uuid[], $2::text[]) AS d(run_id, name)),
r AS (
  DELETE FROM {{schema}}.ready WHERE ctid = ANY (ARRAY (
    SELECT (SELECT r.ctid FROM {{schema}}.ready r WHERE r.run_id = d.run_id AND r.name = d.name) FROM d))
  RETURNING run_id, name
),
w AS (
  DELETE FROM {{schema}}.concurrency_waiting WHERE seq = ANY (ARRAY (
    SELECT (SELECT w.seq FROM {{schema}}.concurrency_waiting w WHERE w.run_id = d.run_id AND w.name = d.name) FROM d))
  RETURNING run_id, name
)
SELECT true, run_id, name FROM r UNION ALL SELECT false, run_id, name FROM w;

-- name: parkedHeads
SELECT w.seq, w.key, w.run_id, w.name, w.workflow, w.tenant, w.priority, w.version
FROM unnest($1::text[], $2::int[]) AS k(key, n)
CROSS JOIN LATERAL (
  SELECT * FROM {{schema}}.concurrency_waiting w WHERE w.key = k.key ORDER BY w.seq LIMIT k.n) w
ORDER BY w.key, w.seq;

-- name: unpark
DELETE FROM {{schema}}.concurrency_waiting WHERE seq = ANY ($1::bigint[]);

-- name: park
INSERT INTO {{schema}}.concurrency_waiting (key, run_id, name, workflow, tenant, priority, version)
SELECT key, run_id, name, workflow, tenant, priority, version
FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::smallint[], $7::text[])
  WITH ORDINALITY AS u(key, run_id, name, workflow, tenant, priority, version, ord)
ORDER BY ord;
