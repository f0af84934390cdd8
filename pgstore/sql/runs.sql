-- Runs. Their tasks are in tasks.sql; the statements that create runs and
-- their tasks, lanes, queue rows and events in one go are queued together
-- by create.go.

-- name: runsExist
-- route: $1
-- No LIMIT: "LIMIT 1" invites a sequential scan expected to stop at the
-- first match, which is wrong for a check that finds nothing.
SELECT id, workflow, tenant FROM {{schema}}.runs WHERE id = ANY($1::uuid[]);

-- name: keysExist
-- Runs holding idempotency keys, through the keys' table (migration 017:
-- a partitioned table holds no unique index but on its partition key).
SELECT r.id, r.workflow, r.tenant, x.key FROM unnest($1::text[], $2::text[], $3::text[]) AS k(workflow, tenant, key)
JOIN {{schema}}.idem_keys x ON x.workflow = k.workflow AND x.tenant = k.tenant AND x.key = k.key
JOIN {{schema}}.runs r ON r.id = x.run_id;

-- name: lockRuns
-- route: $1
SELECT id, workflow, tenant, shape_id, status, coalesce(failed_step, ''), coalesce(error, ''), created_at, finished_at,
       priority, deadline_at, parent_id, parent_step, parent_result, version
FROM {{schema}}.runs WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE;

-- name: insertRuns
-- route: $1
-- New runs from arrays; the arrays of features no run of the batch uses
-- may be NULL (unnest pads them with NULLs).
--
-- unsuccessful follows status (see migration 003): it is true for the
-- statuses durabletype.RunStatus.Unsuccessful names ({{unsuccessfulStatuses}},
-- made from it). It changes when a run fails, is cancelled or is
-- replayed, never when it completes, so that settling stays a HOT update.
--
-- Five variants follow, for batches with child runs (the parents, $15-$17),
-- with trace parents (the parameter after those), and inside a caller's
-- transaction: a change to one goes to all six. Batches of runs without
-- trace parents (most) are inserted by statements without their column.
INSERT INTO {{schema}}.runs (id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, unsuccessful,
                             idem_key, priority, deadline_at, version)
SELECT id, workflow, tenant, shape_id, status, input, nullif(failed_step, ''), nullif(error, ''), created_at, finished_at,
       status IN ({{unsuccessfulStatuses}}), nullif(idem_key, ''), coalesce(priority, 0), deadline_at, coalesce(version, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[],
            $11::text[], $12::smallint[], $13::timestamptz[], $14::text[])
  AS u(id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, idem_key, priority, deadline_at, version);

-- name: insertChildRuns
-- route: $1
-- insertRuns with the parents of child runs ($15-$17).
INSERT INTO {{schema}}.runs (id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, unsuccessful,
                             idem_key, priority, deadline_at, version, parent_id, parent_step, parent_result)
SELECT id, workflow, tenant, shape_id, status, input, nullif(failed_step, ''), nullif(error, ''), created_at, finished_at,
       status IN ({{unsuccessfulStatuses}}), nullif(idem_key, ''), coalesce(priority, 0), deadline_at, coalesce(version, ''),
       parent_id, nullif(parent_step, ''), nullif(parent_result, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[],
            $11::text[], $12::smallint[], $13::timestamptz[], $14::text[], $15::uuid[], $16::text[], $17::text[])
  AS u(id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, idem_key, priority, deadline_at, version,
       parent_id, parent_step, parent_result);

-- name: insertRunsTraced
-- route: $1
-- insertRuns with the runs' trace parents ($15).
INSERT INTO {{schema}}.runs (id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, unsuccessful,
                             idem_key, priority, deadline_at, version, trace_parent)
SELECT id, workflow, tenant, shape_id, status, input, nullif(failed_step, ''), nullif(error, ''), created_at, finished_at,
       status IN ({{unsuccessfulStatuses}}), nullif(idem_key, ''), coalesce(priority, 0), deadline_at, coalesce(version, ''),
       nullif(trace_parent, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[],
            $11::text[], $12::smallint[], $13::timestamptz[], $14::text[], $15::text[])
  AS u(id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, idem_key, priority, deadline_at, version,
       trace_parent);

-- name: insertChildRunsTraced
-- route: $1
-- insertRuns with the parents of child runs ($15-$17) and the runs' trace
-- parents ($18).
INSERT INTO {{schema}}.runs (id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, unsuccessful,
                             idem_key, priority, deadline_at, version, parent_id, parent_step, parent_result, trace_parent)
SELECT id, workflow, tenant, shape_id, status, input, nullif(failed_step, ''), nullif(error, ''), created_at, finished_at,
       status IN ({{unsuccessfulStatuses}}), nullif(idem_key, ''), coalesce(priority, 0), deadline_at, coalesce(version, ''),
       parent_id, nullif(parent_step, ''), nullif(parent_result, ''), nullif(trace_parent, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[],
            $11::text[], $12::smallint[], $13::timestamptz[], $14::text[], $15::uuid[], $16::text[], $17::text[], $18::text[])
  AS u(id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, idem_key, priority, deadline_at, version,
       parent_id, parent_step, parent_result, trace_parent);

-- name: insertRunsNew
-- route: $1
-- insertRuns inside a caller's transaction: a run another transaction
-- creates at the same moment (its key or ID) is skipped instead of
-- aborting the caller's transaction, and reported as a duplicate.
INSERT INTO {{schema}}.runs (id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, unsuccessful,
                             idem_key, priority, deadline_at, version)
SELECT id, workflow, tenant, shape_id, status, input, nullif(failed_step, ''), nullif(error, ''), created_at, finished_at,
       status IN ({{unsuccessfulStatuses}}), nullif(idem_key, ''), coalesce(priority, 0), deadline_at, coalesce(version, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[],
            $11::text[], $12::smallint[], $13::timestamptz[], $14::text[])
  AS u(id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, idem_key, priority, deadline_at, version)
ON CONFLICT DO NOTHING RETURNING id;

-- name: releaseSkippedKeys
-- After insertRunsNew, for the runs it skipped: the trigger (take_idem_key)
-- took a run's key before the insert met its ID, taken by a transaction
-- that committed meanwhile, and ON CONFLICT DO NOTHING skipped the run,
-- not the key. A key that points at a run which does not hold it is
-- released.
DELETE FROM {{schema}}.idem_keys k
USING unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS u(id, workflow, tenant, key)
WHERE k.workflow = u.workflow AND k.tenant = u.tenant AND k.key = u.key AND k.run_id = u.id
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.runs r
                  WHERE r.id = u.id AND r.workflow = u.workflow AND r.tenant = u.tenant AND r.idem_key = u.key);

-- name: insertRunsNewTraced
-- route: $1
-- insertRunsNew with the runs' trace parents ($15).
INSERT INTO {{schema}}.runs (id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, unsuccessful,
                             idem_key, priority, deadline_at, version, trace_parent)
SELECT id, workflow, tenant, shape_id, status, input, nullif(failed_step, ''), nullif(error, ''), created_at, finished_at,
       status IN ({{unsuccessfulStatuses}}), nullif(idem_key, ''), coalesce(priority, 0), deadline_at, coalesce(version, ''),
       nullif(trace_parent, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[],
            $11::text[], $12::smallint[], $13::timestamptz[], $14::text[], $15::text[])
  AS u(id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, idem_key, priority, deadline_at, version,
       trace_parent)
ON CONFLICT DO NOTHING RETURNING id;

-- name: updateRuns
-- route: $1
-- unsuccessful follows status (see insertRuns).
UPDATE {{schema}}.runs r
SET status = u.status, failed_step = nullif(u.failed_step, ''), error = nullif(u.error, ''), finished_at = u.finished_at,
    unsuccessful = u.status IN ({{unsuccessfulStatuses}}), deadline_at = u.deadline_at
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[])
  AS u(id, status, failed_step, error, finished_at, deadline_at)
WHERE r.id = u.id;

-- name: reshapeRuns
-- route: $1
-- Runs moved to another version (queueReshapes): their records, the
-- version of their queue rows, and their on-failure task's index (it
-- follows the steps, which may be more now).
WITH u AS (
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[]) AS u(id, shape_id, version, handler)
), runs_set AS (
  UPDATE {{schema}}.runs r SET shape_id = u.shape_id, version = u.version FROM u WHERE r.id = u.id
), ready_set AS (
  UPDATE {{schema}}.ready x SET version = (SELECT u.version FROM u WHERE u.id = x.run_id)
  WHERE x.ctid = ANY (ARRAY (SELECT unnest(ARRAY (SELECT y.ctid FROM {{schema}}.ready y WHERE y.run_id = u.id)) FROM u))
), incoming_set AS (
  UPDATE {{schema}}.incoming x SET version = (SELECT u.version FROM u WHERE u.id = x.run_id)
  WHERE x.ctid = ANY (ARRAY (SELECT unnest(ARRAY (SELECT y.ctid FROM {{schema}}.incoming y WHERE y.run_id = u.id)) FROM u))
), parked_set AS (
  UPDATE {{schema}}.concurrency_waiting x SET version = (SELECT u.version FROM u WHERE u.id = x.run_id)
  WHERE x.ctid = ANY (ARRAY (SELECT unnest(ARRAY (SELECT y.ctid FROM {{schema}}.concurrency_waiting y WHERE y.run_id = u.id)) FROM u))
)
UPDATE {{schema}}.tasks t SET idx = (SELECT u.handler FROM u WHERE u.id = t.run_id)
WHERE t.run_id = ANY (ARRAY (SELECT u.id FROM u)) AND t.name = '{{onFailureTask}}';

-- name: getRun
SELECT id, workflow, tenant, status, input, coalesce(failed_step, ''), coalesce(error, ''), created_at, finished_at, shape_id,
       coalesce(idem_key, ''), priority, deadline_at, parent_id, coalesce(parent_step, ''), coalesce(parent_result, ''),
       coalesce(trace_parent, ''), version
FROM {{schema}}.runs WHERE id = $1;

-- name: runExists
SELECT EXISTS (SELECT 1 FROM {{schema}}.runs WHERE id = $1);

-- name: statsInflight
-- The runs in flight of the tenant $1 (any when NULL), counted: the runs
-- of inflightRuns, with $1 as its tenant.
SELECT r.workflow, r.version, r.tenant, r.status, count(*)::int FROM {{schema}}.runs r
WHERE r.id = ANY (ARRAY ({{inflightRuns(tenant=$1)}})) AND r.finished_at IS NULL
GROUP BY r.workflow, r.version, r.tenant, r.status;

-- fragment: inflightRuns
-- The IDs of the runs in flight (dag.InFlight; the callers keep those
-- not settled, finished_at IS NULL), of the tenant given by {{tenant}},
-- an SQL expression that the Go code using this fragment fills in (a
-- parameter, or NULL for every tenant). A run in flight is active
-- (durabletype.RunStatus.Active), or settling (FAILED while steps or its
-- on-failure handler still run), or held (in flight but not active:
-- heldStatuses). An active or settling run has a task that is ready,
-- waiting for a timer (a sleep or a retry backoff), running, waiting,
-- parked behind its concurrency key, or incoming (its run created in a
-- caller's transaction), and no settled run has one, since every task of a
-- settled run is terminal (dag.Run.checkRun). So those runs are found from
-- the queues, whose size is the work in flight, not the history. A held
-- run may have no such task: the runs of the held statuses are added by
-- their status. There are none today ({{heldStatuses}} is NULL and the
-- planner drops the branch); a status that adds some needs an index that
-- finds its runs without reading the history, and without covering status
-- (see docs/design.md, "What the hot path pays"): TestGenericPlansUseIndexes
-- fails on the scan of runs until it has one. ListRuns builds its query
-- around this fragment (listQuery), Stats counts it (statsInflight).
SELECT run_id FROM {{schema}}.ready WHERE ({{tenant}}::text IS NULL OR tenant = {{tenant}})
UNION SELECT run_id FROM {{schema}}.incoming WHERE ({{tenant}}::text IS NULL OR tenant = {{tenant}})
UNION SELECT run_id FROM {{schema}}.concurrency_waiting WHERE ({{tenant}}::text IS NULL OR tenant = {{tenant}})
UNION SELECT run_id FROM {{schema}}.tasks WHERE due_at IS NOT NULL AND ({{tenant}}::text IS NULL OR tenant = {{tenant}})
UNION SELECT run_id FROM {{schema}}.tasks WHERE state = 'RUNNING' AND ({{tenant}}::text IS NULL OR tenant = {{tenant}})
UNION SELECT run_id FROM {{schema}}.tasks WHERE state = 'WAITING' AND ({{tenant}}::text IS NULL OR tenant = {{tenant}})
UNION SELECT id FROM {{schema}}.runs WHERE status IN ({{heldStatuses}}) AND ({{tenant}}::text IS NULL OR tenant = {{tenant}})

-- fragment: pruneFrom
-- Retention: the oldest settled runs of {{table}} (runs, or a partition of
-- it) that finished $2 microseconds before $1 (the database's now() when
-- NULL), skipping runs a transition holds, with their events, signals and
-- inbox, deleted through runs, whose trigger takes their tasks and keys
-- (runs_delete_tasks: migrations 012 and 017).
WITH cutoff AS (
  SELECT coalesce($1, now()) - $2::bigint * interval '1 microsecond' AS at
), doomed AS (
  SELECT id FROM {{schema}}.{{table}}
  WHERE created_at < (SELECT at FROM cutoff) AND finished_at < (SELECT at FROM cutoff)
  ORDER BY created_at, id LIMIT $3 FOR UPDATE SKIP LOCKED
), events_gone AS (
  DELETE FROM {{schema}}.events e USING doomed d WHERE e.run_id = d.id
), signals_gone AS (
  DELETE FROM {{schema}}.messages m USING doomed d WHERE m.run_id = d.id
), inbox_gone AS (
  DELETE FROM {{schema}}.inbox i USING doomed d WHERE i.run_id = d.id
)
DELETE FROM {{schema}}.runs r USING doomed d WHERE r.id = d.id

-- name: pruneRuns
-- Retention of every run (pruneFrom): an operator's prune, exact
-- (store.PruneRunsParams.Lazy unset).
{{pruneFrom(table=runs)}};

-- name: pruneRunsDefault
-- Retention of the runs in the default partition only (migration 017):
-- the leader's (store.PruneRunsParams.Lazy), which deletes the runs of the
-- periods' partitions with the partitions (history.go).
{{pruneFrom(table=runs_default)}};
