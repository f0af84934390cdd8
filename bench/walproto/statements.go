package main

import (
	"strings"
)

// The engine's statements (pgstore/sql), copied as they are for d0, and
// adapted for the designs whose queue is a partial index of tasks. The
// placeholders are pgstore's: {{schema}}, {{unsuccessfulStatuses}},
// {{countShards}}, {{eventBlockSize}}, {{blockLength}}; {{queued}} (and
// {{queuedH}}) is the queue index's predicate, {{claimClears}} what a
// claim also sets.

// runs.sql lockRuns.
const lockRunsSQL = `
SELECT id, workflow, tenant, shape_id, status, coalesce(failed_step, ''), coalesce(error, ''), created_at, finished_at,
       priority, deadline_at, parent_id, parent_step, parent_result, version
FROM {{schema}}.runs WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`

// runs.sql insertRuns.
const insertRunsSQL = `
INSERT INTO {{schema}}.runs (id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, unsuccessful,
                             idem_key, priority, deadline_at, version)
SELECT id, workflow, tenant, shape_id, status, input, nullif(failed_step, ''), nullif(error, ''), created_at, finished_at,
       status IN ({{unsuccessfulStatuses}}), nullif(idem_key, ''), coalesce(priority, 0), deadline_at, coalesce(version, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[],
            $11::text[], $12::smallint[], $13::timestamptz[], $14::text[])
  AS u(id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, idem_key, priority, deadline_at, version)`

// runs.sql updateRuns.
const updateRunsSQL = `
UPDATE {{schema}}.runs r
SET status = u.status, failed_step = nullif(u.failed_step, ''), error = nullif(u.error, ''), finished_at = u.finished_at,
    unsuccessful = u.status IN ({{unsuccessfulStatuses}}), deadline_at = u.deadline_at
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[])
  AS u(id, status, failed_step, error, finished_at, deadline_at)
WHERE r.id = u.id`

// run_counts.sql countSettled.
const countSettledSQL = `
INSERT INTO {{schema}}.run_counts AS c (minute, workflow, tenant, status, shard, n)
SELECT minute, workflow, tenant, status, (pg_backend_pid() % {{countShards}})::smallint, n
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bigint[]) AS u(minute, workflow, tenant, status, n)
ON CONFLICT (minute, workflow, tenant, status, shard) DO UPDATE SET n = c.n + excluded.n`

// events.sql eventBlock.
const eventBlockSQL = `SELECT nextval('{{schema}}.event_blocks'), clock_timestamp()`

// lanes.sql lockLanes and updateLanes (one lane here: one workflow, one
// tenant).
const lockLanesSQL = `
SELECT l.workflow, l.tenant, l.grp, l.last_block
FROM {{schema}}.lanes l JOIN unnest($1::text[], $2::text[]) AS u(workflow, tenant)
  ON l.workflow = u.workflow AND l.tenant = u.tenant
ORDER BY l.workflow, l.tenant FOR UPDATE OF l`

const updateLanesSQL = `
UPDATE {{schema}}.lanes l SET last_block = u.last_block
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(workflow, tenant, last_block)
WHERE l.workflow = u.workflow AND l.tenant = u.tenant`

// tasks.sql insertTasks; {{qcols}} and {{qvals}} are the queue's columns
// in the designs without a ready table ($22-$26).
const insertTasksSQL = `
INSERT INTO {{schema}}.tasks (run_id, name, tenant, idx, kind, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
                              q_id, q_at, q_attempt, s_id, c_id, timeout_at, timeout_us{{qcols}})
SELECT run_id, name, tenant, idx, kind, state, attempt, token, nullif(worker, ''), due_at, output, nullif(error, ''), started_at, finished_at,
       nullif(q_id, 0), q_at, CASE WHEN q_id = 0 THEN NULL ELSE q_attempt END, nullif(s_id, 0), nullif(c_id, 0), timeout_at, nullif(timeout_us, 0){{qvals}}
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::int[], $8::bigint[], $9::text[],
            $10::timestamptz[], $11::bytea[], $12::text[], $13::timestamptz[], $14::timestamptz[],
            $15::bigint[], $16::timestamptz[], $17::int[], $18::bigint[], $19::bigint[], $20::timestamptz[], $21::bigint[]{{qargs}})
  AS u(run_id, name, tenant, idx, kind, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
       q_id, q_at, q_attempt, s_id, c_id, timeout_at, timeout_us{{qnames}})`

// tasks.sql loadTasks (with the fair id where tasks has it).
const loadTasksSQL = `
SELECT run_id, name, idx, kind, state, attempt, token, coalesce(worker, ''), due_at, coalesce(error, ''), started_at, finished_at,
       coalesce(q_id, 0), q_at, coalesce(q_attempt, 0), coalesce(s_id, 0), coalesce(c_id, 0), heartbeat_at, timeout_at,
       coalesce(ckey, ''), coalesce(rkey, ''), wait_key, child_id, items, items_left, coalesce(lost, 0){{fair}}
FROM {{schema}}.tasks WHERE run_id = ANY($1::uuid[]) AND name < '~' ORDER BY run_id, idx`

// tasks.sql updateTasks; {{fairSet}} and {{fairArg}} write the fair id
// ($19) in the designs without a ready table.
const updateTasksSQL = `
UPDATE {{schema}}.tasks t
SET state = u.state, attempt = u.attempt, token = u.token, worker = nullif(u.worker, ''), due_at = u.due_at,
    output = CASE WHEN u.state = 'COMPLETED' OR u.attempt = 0 THEN u.output ELSE t.output END,
    error = nullif(u.error, ''), started_at = u.started_at, finished_at = u.finished_at,
    q_id = nullif(u.q_id, 0), q_at = u.q_at, q_attempt = CASE WHEN u.q_id = 0 THEN NULL ELSE u.q_attempt END,
    s_id = nullif(u.s_id, 0), c_id = nullif(u.c_id, 0), timeout_at = u.timeout_at, lost = nullif(u.lost, 0){{fairSet}}
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::timestamptz[], $8::bytea[],
            $9::text[], $10::timestamptz[], $11::timestamptz[],
            $12::bigint[], $13::timestamptz[], $14::int[], $15::bigint[], $16::bigint[], $17::timestamptz[], $18::int[]{{fairArg}})
  AS u(run_id, name, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
       q_id, q_at, q_attempt, s_id, c_id, timeout_at, lost{{fairName}})
WHERE t.run_id = u.run_id AND t.name = u.name`

// ready.sql insertReady.
const insertReadySQL = `
INSERT INTO {{schema}}.ready (id, run_id, name, workflow, tenant, queued_at, priority, rate_until, version)
SELECT id, run_id, name, workflow, tenant, coalesce($6, now()), coalesce(priority, 0), rate_until, coalesce(version, '')
FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::text[], $7::smallint[], $8::timestamptz[], $9::text[])
  AS u(id, run_id, name, workflow, tenant, priority, rate_until, version)`

// ready.sql claim, as it is.
const claimReadySQL = `
WITH prio AS (SELECT EXISTS (SELECT 1 FROM {{schema}}.ready WHERE priority > 0) AS p),
picked AS (
  SELECT ctid FROM {{schema}}.ready r
  WHERE array_position($1::text[], workflow) > 0
    AND ($5::text[] IS NULL OR array_position($5::text[], r.workflow || '@' || r.version) > 0)
    AND (NOT (SELECT p FROM prio) OR coalesce((SELECT h.priority FROM {{schema}}.ready h
          WHERE h.priority > 0 AND h.workflow = r.workflow AND h.tenant = r.tenant AND h.version = r.version
          ORDER BY h.priority DESC LIMIT 1), 0) <= r.priority)
    AND (r.rate_until IS NULL OR r.rate_until > coalesce($4, clock_timestamp()))
  ORDER BY id, workflow LIMIT $2 FOR UPDATE SKIP LOCKED
),
deleted AS (
  DELETE FROM {{schema}}.ready r WHERE r.ctid = ANY (ARRAY (SELECT p.ctid FROM picked p))
  RETURNING r.id, r.workflow, r.run_id, r.name, r.queued_at
),
numbered AS (
  SELECT d.id, d.run_id, d.name, d.queued_at, row_number() OVER (ORDER BY d.id, d.workflow) AS k FROM deleted d
),
block AS (
  SELECT nextval('{{schema}}.event_blocks') * {{eventBlockSize}} AS base,
         coalesce($4, clock_timestamp()) AS at
),
claimed AS (
  UPDATE {{schema}}.tasks t
  SET state = 'RUNNING', attempt = t.attempt + 1, token = n.id, worker = $3, started_at = (SELECT at FROM block),
      heartbeat_at = NULL, finished_at = NULL, s_id = (SELECT base FROM block) + n.k,
      timeout_at = (SELECT at FROM block) + t.timeout_us * interval '1 microsecond'
  FROM numbered n
  WHERE t.run_id = n.run_id AND t.name = n.name AND t.state = 'QUEUED' AND t.due_at IS NULL
  RETURNING t.run_id, t.name, t.idx, t.kind, t.attempt, t.token, t.started_at, t.item, t.item_input, n.queued_at
),
advanced AS (
  INSERT INTO {{schema}}.frontier (shard, block, workflows)
  SELECT $3, m.block, $1::text[]
  FROM (SELECT max(id) / {{blockLength}} AS block FROM deleted) m
  WHERE m.block IS NOT NULL
  ON CONFLICT (shard) DO UPDATE SET block = excluded.block, workflows = excluded.workflows
  WHERE frontier.block < excluded.block
)
SELECT c.run_id, c.name, c.idx, c.kind, c.attempt, c.token, r.workflow, r.version, r.tenant,
       CASE WHEN c.item IS NULL THEN r.input ELSE c.item_input END, r.shape_id,
       coalesce(r.failed_step, ''), coalesce(r.error, ''), (SELECT p FROM prio), coalesce(c.item, 0),
       c.queued_at, c.started_at, coalesce(r.trace_parent, ''), r.priority
FROM claimed c JOIN {{schema}}.runs r ON r.id = c.run_id
ORDER BY c.token, r.workflow`

// The claim of a queue that is a partial index of tasks: the same
// conditions, ordering, numbering, frontier and result as claimReadySQL,
// with the queued tasks locked (FOR UPDATE SKIP LOCKED) and updated to
// RUNNING in one statement, instead of ready rows locked and deleted.
const claimTasksSQL = claimPrioSQL + `
picked AS (
  SELECT t.ctid, t.fair_id, t.workflow FROM {{schema}}.tasks t
  WHERE {{queued}}
    AND array_position($1::text[], t.workflow) > 0
    AND ($5::text[] IS NULL OR array_position($5::text[], t.workflow || '@' || t.version) > 0)
    AND (NOT (SELECT p FROM prio) OR coalesce((SELECT h.priority FROM {{schema}}.tasks h
          WHERE h.priority > 0 AND {{queuedH}} AND h.workflow = t.workflow AND h.tenant = t.tenant AND h.version = t.version
          ORDER BY h.priority DESC LIMIT 1), 0) <= t.priority)
    AND (t.rate_until IS NULL OR t.rate_until > coalesce($4, clock_timestamp()))
  ORDER BY t.fair_id, t.workflow LIMIT $2 FOR UPDATE OF t SKIP LOCKED
),
numbered AS (
  SELECT p.ctid, p.fair_id, row_number() OVER (ORDER BY p.fair_id, p.workflow) AS k FROM picked p
),
block AS (
  SELECT nextval('{{schema}}.event_blocks') * {{eventBlockSize}} AS base,
         coalesce($4, clock_timestamp()) AS at
),
claimed AS (
  UPDATE {{schema}}.tasks t
  SET state = 'RUNNING', attempt = t.attempt + 1, token = n.fair_id, worker = $3, started_at = (SELECT at FROM block),
      heartbeat_at = NULL, finished_at = NULL, s_id = (SELECT base FROM block) + n.k,
      timeout_at = (SELECT at FROM block) + t.timeout_us * interval '1 microsecond'{{claimClears}}
  FROM numbered n
  WHERE t.ctid = n.ctid
  RETURNING t.run_id, t.name, t.idx, t.kind, t.attempt, t.token, t.started_at, t.item, t.item_input, t.q_at
),
advanced AS (
  INSERT INTO {{schema}}.frontier (shard, block, workflows)
  SELECT $3, m.block, $1::text[]
  FROM (SELECT max(token) / {{blockLength}} AS block FROM claimed) m
  WHERE m.block IS NOT NULL
  ON CONFLICT (shard) DO UPDATE SET block = excluded.block, workflows = excluded.workflows
  WHERE frontier.block < excluded.block
)
SELECT c.run_id, c.name, c.idx, c.kind, c.attempt, c.token, r.workflow, r.version, r.tenant,
       CASE WHEN c.item IS NULL THEN r.input ELSE c.item_input END, r.shape_id,
       coalesce(r.failed_step, ''), coalesce(r.error, ''), (SELECT p FROM prio), coalesce(c.item, 0),
       c.q_at, c.started_at, coalesce(r.trace_parent, ''), r.priority
FROM claimed c JOIN {{schema}}.runs r ON r.id = c.run_id
ORDER BY c.token, r.workflow`

const claimPrioSQL = `
WITH prio AS (SELECT EXISTS (SELECT 1 FROM {{schema}}.tasks h WHERE h.priority > 0 AND {{queuedH}}) AS p),`

// stmts are a design's statements, rendered for its schema.
type stmts struct {
	lockRuns, insertRuns, updateRuns, countSettled, eventBlock string
	lockLanes, updateLanes                                     string
	insertTasks, loadTasks, updateTasks                        string
	insertReady, claim                                         string
}

func newStmts(d design, schema string) stmts {
	queued, queuedH, clears := "t.state = 'QUEUED' AND t.due_at IS NULL", "h.state = 'QUEUED'", ""
	if d.fairPred {
		queued, queuedH, clears = "t.fair_id IS NOT NULL", "h.fair_id IS NOT NULL", ", fair_id = NULL"
	}
	r := strings.NewReplacer(
		"{{schema}}", schema,
		"{{unsuccessfulStatuses}}", "'FAILED', 'CANCELLED'",
		"{{countShards}}", "8",
		"{{eventBlockSize}}", "1048576",
		"{{blockLength}}", "1048576",
		"{{queued}}", queued,
		"{{queuedH}}", queuedH,
		"{{claimClears}}", clears,
	)
	q := r.Replace
	s := stmts{
		lockRuns: q(lockRunsSQL), insertRuns: q(insertRunsSQL), updateRuns: q(updateRunsSQL),
		countSettled: q(countSettledSQL), eventBlock: q(eventBlockSQL),
		lockLanes: q(lockLanesSQL), updateLanes: q(updateLanesSQL),
	}
	if d.ready {
		s.insertTasks = strings.NewReplacer("{{qcols}}", "", "{{qvals}}", "", "{{qargs}}", "", "{{qnames}}", "").Replace(q(insertTasksSQL))
		s.loadTasks = strings.ReplaceAll(q(loadTasksSQL), "{{fair}}", ", 0::bigint")
		s.updateTasks = strings.NewReplacer("{{fairSet}}", "", "{{fairArg}}", "", "{{fairName}}", "").Replace(q(updateTasksSQL))
		s.insertReady = q(insertReadySQL)
		s.claim = q(claimReadySQL)
	} else {
		s.insertTasks = strings.NewReplacer(
			"{{qcols}}", ", fair_id, workflow, version, priority, rate_until",
			"{{qvals}}", ", nullif(fair_id, 0), workflow, coalesce(version, ''), coalesce(priority, 0), rate_until",
			"{{qargs}}", ", $22::bigint[], $23::text[], $24::text[], $25::smallint[], $26::timestamptz[]",
			"{{qnames}}", ", fair_id, workflow, version, priority, rate_until").Replace(q(insertTasksSQL))
		s.loadTasks = strings.ReplaceAll(q(loadTasksSQL), "{{fair}}", ", coalesce(fair_id, 0)")
		s.updateTasks = strings.NewReplacer(
			"{{fairSet}}", ", fair_id = nullif(u.fair_id, 0)",
			"{{fairArg}}", ", $19::bigint[]",
			"{{fairName}}", ", fair_id").Replace(q(updateTasksSQL))
		s.claim = q(claimTasksSQL)
		if d.noPriority {
			s.claim = strings.Replace(s.claim, q(claimPrioSQL), "WITH prio AS (SELECT false AS p),", 1)
		}
	}
	return s
}
