-- The ready queue: a row exists exactly while its task is claimable
-- (dag.Claimable; the core's Effects maintain the queue), in fair order
-- (id: the block of its lane, then its sequence; see internal/core/fairq).

-- name: lockReady
-- The ready rows of the runs, locked in claim order: the slow path of a
-- transition that raced a claim.
SELECT id FROM {{schema}}.ready WHERE run_id = ANY($1::uuid[]) ORDER BY id FOR UPDATE;

-- name: deleteReady
-- Rows of the ready queue are found one key at a time, each by a subquery
-- on the whole unique key (run_id, name), then deleted by ctid: the
-- planner probes the key for each row even on statistics that call the
-- table empty, where it planned a join with the keys as a read of the
-- whole index (see genericPlans; the plan test checks it).
DELETE FROM {{schema}}.ready WHERE ctid = ANY (ARRAY (
  SELECT (SELECT r.ctid FROM {{schema}}.ready r WHERE r.run_id = d.run_id AND r.name = d.name)
  FROM unnest($1::uuid[], $2::text[]) AS d(run_id, name)));

-- name: insertReady
INSERT INTO {{schema}}.ready (id, run_id, name, workflow, tenant, queued_at, priority, rate_until, version)
SELECT id, run_id, name, workflow, tenant, coalesce($6, now()), coalesce(priority, 0), rate_until, coalesce(version, '')
FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::text[], $7::smallint[], $8::timestamptz[], $9::text[])
  AS u(id, run_id, name, workflow, tenant, priority, rate_until, version);

-- name: claim
-- Claims the first $2 ready rows of the workflows $1 in fair order, for
-- the worker $3 at the time $4 (NULL: the database's clock at the claim),
-- of the versions $5 (NULL: every version). claimIDs is the same claim of
-- rows picked beforehand: the two differ only in the CTE picked and the
-- parameter of the workflows the frontier row records (a change to the
-- rest goes to both).
--
-- The claim picks (and locks) ready rows by ctid (stable while locked:
-- deleting by it spares an index descent per row). Taking one is the
-- decision to claim; the rest applies dag.Run.Claim in SQL: the ready rows
-- are deleted, their tasks become RUNNING with the attempt incremented and
-- the fair id as claim token, and the STARTED events, numbered in token
-- order from one event block, are kept in the tasks' s_id (empty for a
-- QUEUED task: the transition that requeued it moved its previous STARTED
-- event to events). The conformance suite compares the claimed tasks with
-- dag.Run.Claim's. The task guard (QUEUED, no due time) only protects that
-- invariant.
--
-- Claims are stamped with clock_timestamp(), read after the rows are
-- locked: the transaction that enqueued them committed before, so a
-- STARTED event never precedes the QUEUED event before it.
--
-- Fair queuing: the claimer's frontier row advances to the highest block
-- claimed, with the workflows it serves (fairq.Claimer.Advance), one row
-- whatever the number of workflows.
--
-- prio is whether any ready task is above the default priority: the first
-- entry of the partial index of those, empty unless priorities are used.
-- The claim computes it once (an InitPlan), probes lanes only when it
-- holds, and returns it, so that the next claim reorders lanes first
-- (reorderLanes).
--
-- In picked: array_position rather than = ANY: the planner cannot
-- estimate its selectivity, so it keeps walking the primary key in fair
-- order instead of sorting the whole queue when statistics are missing or
-- the plan is generic. The claimer serves the version of a row's run when
-- $5 is NULL or lists the row's queue (dag.ServesQueue; the conformance
-- suite holds the two to the same claims). A row whose lane holds a row of
-- a higher priority is passed over (fairq.Outranks): reorderLanes gives
-- that row its slot first. The probe is in the partial index of rows above
-- the default priority (priorities rank the rows of one version of a
-- workflow in a lane; see priority.go): a correlated subquery with its own
-- LIMIT rather than NOT EXISTS, which the planner turns into an anti join
-- that may read the whole partial index per row. A row admitted under a
-- rate limit is claimed only while the window that admitted it lasts
-- (flow.Expired).
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
ORDER BY c.token, r.workflow;

-- name: claimIDs
-- The claim of the ready rows $1 (ctids, picked and locked beforehand by
-- a capped claim: claimCandidate; $2 is passed 0, only typed), for the
-- worker $3 at the time $4, recording the workflows $5 in the frontier
-- row. Apart from picked and that parameter, the same as claim.
WITH prio AS (SELECT EXISTS (SELECT 1 FROM {{schema}}.ready WHERE priority > 0) AS p),
picked AS (
  SELECT ctid FROM {{schema}}.ready WHERE ctid = ANY($1::tid[]) AND $2::int IS NOT NULL
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
  SELECT $3, m.block, $5::text[]
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
ORDER BY c.token, r.workflow;

-- name: claimCandidate
-- Candidates of a capped claim, locked, after the key ($3, $4): the rows
-- claim would pick (its conditions, with every row's lane probed for a
-- higher priority) of tenants other than $2.
SELECT ctid, id, workflow, tenant FROM {{schema}}.ready r
WHERE array_position($1::text[], workflow) > 0
  AND ($7::text[] IS NULL OR array_position($7::text[], r.workflow || '@' || r.version) > 0)
  AND tenant <> ALL($2::text[]) AND (id, workflow) > ($3, $4)
  AND coalesce((SELECT h.priority FROM {{schema}}.ready h
       WHERE h.priority > 0 AND h.workflow = r.workflow AND h.tenant = r.tenant AND h.version = r.version
       ORDER BY h.priority DESC LIMIT 1), 0) <= r.priority
  AND (r.rate_until IS NULL OR r.rate_until > coalesce($6::timestamptz, clock_timestamp()))
ORDER BY id, workflow LIMIT $5 FOR UPDATE SKIP LOCKED;

-- name: displaceAfterClaim
-- displaceClaimed (priority.go): after a claim took the ready row $4 (its
-- id) of priority $5 in the lane of workflow $1, tenant $2 and version $3,
-- the lowest row of that lane below it and of a lower priority (the task
-- whose slot it took, fairq.Displace) moves to its id. Rows past their
-- rate-limit window at $6 are not claimable and keep their slots.
WITH d AS (
  SELECT ctid FROM {{schema}}.ready
  WHERE workflow = $1 AND tenant = $2 AND version = $3 AND id < $4 AND priority < $5
    AND (rate_until IS NULL OR rate_until > coalesce($6::timestamptz, clock_timestamp()))
  ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.ready r SET id = $4 FROM d WHERE r.ctid = d.ctid;

-- name: anyPriority
-- Whether any ready task of these workflows is above the default
-- priority, through the partial index that holds only those.
SELECT EXISTS (SELECT 1 FROM {{schema}}.ready WHERE priority > 0 AND array_position($1::text[], workflow) > 0);

-- name: reorderHead
-- reorderLanes (priority.go): the head of the queue, locked, of the
-- versions served (as claim), and (reorderBest) the rows above the default
-- priority of its lanes, best first.
SELECT ctid, id, workflow, version, tenant, priority FROM {{schema}}.ready r
WHERE array_position($1::text[], workflow) > 0
  AND ($3::text[] IS NULL OR array_position($3::text[], r.workflow || '@' || r.version) > 0)
ORDER BY id, workflow LIMIT $2 FOR UPDATE SKIP LOCKED;

-- name: reorderBest
SELECT b.ctid, b.id, b.workflow, b.version, b.tenant, b.priority
FROM unnest($1::text[], $2::text[], $3::int[], $4::text[]) AS l(workflow, tenant, n, version)
CROSS JOIN LATERAL (
  SELECT ctid, id, workflow, version, tenant, priority FROM {{schema}}.ready
  WHERE priority > 0 AND workflow = l.workflow AND tenant = l.tenant AND version = l.version
  ORDER BY priority DESC, id LIMIT l.n FOR UPDATE SKIP LOCKED) b;

-- name: reorderTake
DELETE FROM {{schema}}.ready WHERE ctid = ANY($1::tid[])
RETURNING id, run_id, name, workflow, tenant, queued_at, priority, rate_until, version;

-- name: reorderPut
INSERT INTO {{schema}}.ready (id, run_id, name, workflow, tenant, queued_at, priority, rate_until, version)
SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::smallint[], $8::timestamptz[], $9::text[]);

-- name: statsReady
-- Stats: the ready queue (its size is the backlog); the tasks waiting for
-- a timer and running, through their partial indexes (statsTasks); the
-- runs in flight, found from those (statsInflight); the settled runs
-- counted per minute within the window (statsCounts). None reads the
-- history of settled runs.
-- The tasks of runs created in a caller's transaction count ready from
-- their incoming rows (until a claim or the leader promotes them), queued
-- since the QUEUED event their task rows keep (q_at).
SELECT workflow, version, tenant, sum(n)::bigint, min(oldest) FROM (
  SELECT workflow, version, tenant, count(*) AS n, min(queued_at) AS oldest FROM {{schema}}.ready
  WHERE $1::text IS NULL OR tenant = $1 GROUP BY workflow, version, tenant
  UNION ALL
  SELECT i.workflow, i.version, i.tenant, count(*), min(t.q_at) FROM {{schema}}.incoming i
  JOIN {{schema}}.tasks t ON t.run_id = i.run_id AND t.name = i.name
  WHERE $1::text IS NULL OR i.tenant = $1 GROUP BY i.workflow, i.version, i.tenant) q
GROUP BY workflow, version, tenant;
