-- The inbox: what ends a wait (an event, a child run's settlement, the
-- cancellation of a child whose parent gave it up), written by the
-- transaction that causes it and applied to the waiting task's run by a
-- transition of its own (see waits.go).

-- name: insertInbox
-- A child's settlement carries its result step's output, read from the
-- row this transaction wrote.
INSERT INTO {{schema}}.inbox (run_id, kind, step, child_id, status, result, result_state, error, payload)
SELECT u.run_id, u.kind, nullif(u.step, ''), u.child_id, nullif(u.status, ''), nullif(u.result, ''), nullif(u.result_state, ''),
       nullif(u.error, ''),
       CASE WHEN u.kind = 'child' THEN (SELECT t.output FROM {{schema}}.tasks t
                                        WHERE t.run_id = u.child_id AND t.name = u.result AND t.state = 'COMPLETED') END
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[])
  WITH ORDINALITY AS u(run_id, kind, step, child_id, status, result, result_state, error, ord)
ORDER BY u.ord;

-- name: loadInbox
-- Taken after the runs are locked: every transition applying a run's
-- messages holds its lock.
SELECT id, run_id, kind, coalesce(step, ''), coalesce(token, 0), child_id, coalesce(status, ''), coalesce(result, ''),
       coalesce(result_state, ''), coalesce(error, ''), payload
FROM {{schema}}.inbox WHERE run_id = ANY($1::uuid[]) ORDER BY id FOR UPDATE;

-- name: deleteInbox
DELETE FROM {{schema}}.inbox WHERE id = ANY($1::bigint[]);

-- name: pendingRuns
-- The runs with messages pending, oldest message first.
SELECT run_id FROM (
  SELECT run_id, min(id) AS first FROM {{schema}}.inbox WHERE $2::bigint IS NULL OR id <= $2 GROUP BY run_id) p
ORDER BY first LIMIT $1;
