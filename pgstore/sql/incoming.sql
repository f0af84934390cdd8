-- Tasks of runs created in a caller's transaction (CreateRunsTx), waiting
-- for the leader to promote them to the ready queue (incoming.go).

-- name: insertIncoming
INSERT INTO {{schema}}.incoming (run_id, name, workflow, tenant, priority, version)
SELECT run_id, name, workflow, tenant, coalesce(priority, 0), coalesce(version, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::text[]) AS u(run_id, name, workflow, tenant, priority, version);

-- name: takeIncoming
DELETE FROM {{schema}}.incoming WHERE seq IN (
  SELECT seq FROM {{schema}}.incoming ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING seq, run_id, name, workflow, tenant, priority, version;
