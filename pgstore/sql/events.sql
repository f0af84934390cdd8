-- The events of runs' logs. The happy path's events (QUEUED, STARTED,
-- COMPLETED) are kept in the task rows (q_id, s_id, c_id); the others are
-- rows of events. Event ids come from blocks of the event_blocks sequence.

-- name: eventBlock
-- Taken after the runs are locked, so that event ids and times follow the
-- order in which transitions of a run commit.
SELECT nextval('{{schema}}.event_blocks'), clock_timestamp();

-- name: insertEvents
-- route: $1
INSERT INTO {{schema}}.events (run_id, id, step, type, attempt, at, detail, due_at)
SELECT run_id, id, step, type, attempt, at, nullif(detail, ''), due_at
FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::int[], $6::timestamptz[], $7::text[], $8::timestamptz[])
  AS u(run_id, id, step, type, attempt, at, detail, due_at);

-- name: listEvents
-- The log is the events table plus the happy-path events kept in task
-- rows.
SELECT id, run_id, step, type, attempt, at, coalesce(detail, ''), due_at FROM {{schema}}.events WHERE run_id = $1
UNION ALL
SELECT q_id, run_id, name, 'QUEUED', q_attempt, q_at, '', NULL FROM {{schema}}.tasks WHERE run_id = $1 AND q_id IS NOT NULL
UNION ALL
SELECT s_id, run_id, name, 'STARTED', attempt, started_at, '', NULL FROM {{schema}}.tasks WHERE run_id = $1 AND s_id IS NOT NULL
UNION ALL
SELECT c_id, run_id, name, 'COMPLETED', attempt, finished_at, '', NULL FROM {{schema}}.tasks WHERE run_id = $1 AND c_id IS NOT NULL
ORDER BY 1;
