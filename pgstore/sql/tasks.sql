-- Tasks: the steps of runs, and the items of map steps (named from '~' on;
-- see dag.ItemName). The timers (due times, timeouts) are columns of
-- tasks, read through partial indexes.

-- name: loadTasks
-- route: $1
-- The steps of the runs a transition locked, in shape order, as scanTask
-- reads them (loadItems and loadMapItems read the same columns, and the
-- items' number and input).
--
-- Outputs are not loaded: the core never reads them, and a task's output
-- is written when it completes, and cleared when a replay resets it
-- (attempt 0; see updateTasks). Items are not loaded either: a transition
-- loads those it needs (loadItems, loadMapItems).
SELECT run_id, name, kind, state, attempt, token, coalesce(worker, ''), due_at, coalesce(error, ''), started_at, finished_at,
       coalesce(q_id, 0), q_at, coalesce(q_attempt, 0), coalesce(s_id, 0), coalesce(c_id, 0), heartbeat_at, timeout_at,
       coalesce(ckey, ''), coalesce(rkey, ''), wait_key, child_id, items, items_left, coalesce(lost, 0)
FROM {{schema}}.tasks WHERE run_id = ANY($1::uuid[]) AND name < '~' ORDER BY run_id, idx;

-- name: loadItems
-- route: $1
-- Items by key: those the outcomes, timers and rescues of a call name.
-- The columns of loadTasks, and the items' number and input.
SELECT run_id, name, kind, state, attempt, token, coalesce(worker, ''), due_at, coalesce(error, ''), started_at, finished_at,
       coalesce(q_id, 0), q_at, coalesce(q_attempt, 0), coalesce(s_id, 0), coalesce(c_id, 0), heartbeat_at, timeout_at,
       coalesce(ckey, ''), coalesce(rkey, ''), wait_key, child_id, items, items_left, coalesce(lost, 0), coalesce(item, 0), item_input
FROM unnest($1::uuid[], $2::text[]) AS u(rid, rname)
JOIN {{schema}}.tasks t ON t.run_id = u.rid AND t.name = u.rname;

-- name: loadMapItems
-- route: $1
-- Every item of a map step, or every record of a function's body: the
-- range of their names in the primary key ($2 <= name < $3; see
-- dag.ItemPrefix). The columns of loadItems.
SELECT run_id, name, kind, state, attempt, token, coalesce(worker, ''), due_at, coalesce(error, ''), started_at, finished_at,
       coalesce(q_id, 0), q_at, coalesce(q_attempt, 0), coalesce(s_id, 0), coalesce(c_id, 0), heartbeat_at, timeout_at,
       coalesce(ckey, ''), coalesce(rkey, ''), wait_key, child_id, items, items_left, coalesce(lost, 0), coalesce(item, 0), item_input
FROM {{schema}}.tasks
WHERE run_id = $1 AND name >= $2 AND name < $3 ORDER BY item;

-- name: insertTasks
-- route: $1
-- Tasks from arrays. Tasks of batches without waits, maps or items (most)
-- are written by this statement, without their columns; insertTasksWaits
-- is the same with them (a change to one goes to the other).
INSERT INTO {{schema}}.tasks (run_id, name, tenant, idx, kind, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
                              q_id, q_at, q_attempt, s_id, c_id, timeout_at, timeout_us)
SELECT run_id, name, tenant, idx, kind, state, attempt, token, nullif(worker, ''), due_at, output, nullif(error, ''), started_at, finished_at,
       nullif(q_id, 0), q_at, CASE WHEN q_id = 0 THEN NULL ELSE q_attempt END, nullif(s_id, 0), nullif(c_id, 0), timeout_at, nullif(timeout_us, 0)
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::int[], $8::bigint[], $9::text[],
            $10::timestamptz[], $11::bytea[], $12::text[], $13::timestamptz[], $14::timestamptz[],
            $15::bigint[], $16::timestamptz[], $17::int[], $18::bigint[], $19::bigint[], $20::timestamptz[], $21::bigint[])
  AS u(run_id, name, tenant, idx, kind, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
       q_id, q_at, q_attempt, s_id, c_id, timeout_at, timeout_us);

-- name: insertTasksWaits
-- route: $1
-- insertTasks with the items' numbers and inputs ($22-$23), and the child
-- run a function's record starts ($24).
INSERT INTO {{schema}}.tasks (run_id, name, tenant, idx, kind, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
                              q_id, q_at, q_attempt, s_id, c_id, timeout_at, timeout_us, item, item_input, child_id)
SELECT run_id, name, tenant, idx, kind, state, attempt, token, nullif(worker, ''), due_at, output, nullif(error, ''), started_at, finished_at,
       nullif(q_id, 0), q_at, CASE WHEN q_id = 0 THEN NULL ELSE q_attempt END, nullif(s_id, 0), nullif(c_id, 0), timeout_at, nullif(timeout_us, 0),
       item, item_input, child_id
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::int[], $8::bigint[], $9::text[],
            $10::timestamptz[], $11::bytea[], $12::text[], $13::timestamptz[], $14::timestamptz[],
            $15::bigint[], $16::timestamptz[], $17::int[], $18::bigint[], $19::bigint[], $20::timestamptz[], $21::bigint[],
            $22::int[], $23::bytea[], $24::uuid[])
  AS u(run_id, name, tenant, idx, kind, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
       q_id, q_at, q_attempt, s_id, c_id, timeout_at, timeout_us, item, item_input, child_id);

-- name: updateTasks
-- route: $1
-- Tasks from arrays, by key. As with insertTasks, updateTasksWaits is the
-- same with the columns of waits and maps (a change to one goes to the
-- other).
UPDATE {{schema}}.tasks t
SET state = u.state, attempt = u.attempt, token = u.token, worker = nullif(u.worker, ''), due_at = u.due_at,
    output = CASE WHEN u.state = 'COMPLETED' OR u.attempt = 0 THEN u.output ELSE t.output END,
    error = nullif(u.error, ''), started_at = u.started_at, finished_at = u.finished_at,
    q_id = nullif(u.q_id, 0), q_at = u.q_at, q_attempt = CASE WHEN u.q_id = 0 THEN NULL ELSE u.q_attempt END,
    s_id = nullif(u.s_id, 0), c_id = nullif(u.c_id, 0), timeout_at = u.timeout_at, lost = nullif(u.lost, 0)
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::timestamptz[], $8::bytea[],
            $9::text[], $10::timestamptz[], $11::timestamptz[],
            $12::bigint[], $13::timestamptz[], $14::int[], $15::bigint[], $16::bigint[], $17::timestamptz[], $18::int[])
  AS u(run_id, name, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
       q_id, q_at, q_attempt, s_id, c_id, timeout_at, lost)
WHERE t.run_id = u.run_id AND t.name = u.name;

-- name: updateTasksWaits
-- route: $1
-- updateTasks with the columns of waits and maps ($19-$23; an item's
-- input changes only when its map step fans out again after a replay).
UPDATE {{schema}}.tasks t
SET state = u.state, attempt = u.attempt, token = u.token, worker = nullif(u.worker, ''), due_at = u.due_at,
    output = CASE WHEN u.state = 'COMPLETED' OR u.attempt = 0 THEN u.output ELSE t.output END,
    error = nullif(u.error, ''), started_at = u.started_at, finished_at = u.finished_at,
    q_id = nullif(u.q_id, 0), q_at = u.q_at, q_attempt = CASE WHEN u.q_id = 0 THEN NULL ELSE u.q_attempt END,
    s_id = nullif(u.s_id, 0), c_id = nullif(u.c_id, 0), timeout_at = u.timeout_at, lost = nullif(u.lost, 0),
    wait_key = nullif(u.wait_key, ''), child_id = coalesce(u.child_id, t.child_id), items = coalesce(u.items, t.items),
    items_left = coalesce(u.items_left, t.items_left), item_input = coalesce(u.item_input, t.item_input)
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::timestamptz[], $8::bytea[],
            $9::text[], $10::timestamptz[], $11::timestamptz[],
            $12::bigint[], $13::timestamptz[], $14::int[], $15::bigint[], $16::bigint[], $17::timestamptz[], $18::int[],
            $19::text[], $20::uuid[], $21::int[], $22::int[], $23::bytea[])
  AS u(run_id, name, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
       q_id, q_at, q_attempt, s_id, c_id, timeout_at, lost, wait_key, child_id, items, items_left, item_input)
WHERE t.run_id = u.run_id AND t.name = u.name;

-- name: setKeys
-- route: $1
-- The concurrency and rate-limit keys of keyed tasks (flow.go).
UPDATE {{schema}}.tasks t SET ckey = nullif(u.ckey, ''), rkey = nullif(u.rkey, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS u(run_id, name, ckey, rkey)
WHERE t.run_id = u.run_id AND t.name = u.name;

-- name: deleteItems
-- route: $1
DELETE FROM {{schema}}.tasks t USING unnest($1::uuid[], $2::text[]) AS u(run_id, name)
WHERE t.run_id = u.run_id AND t.name = u.name;

-- name: mapOutputs
-- route: $1
-- The outputs of the items of completed map steps, for the claims of
-- their children: ($1, $2, $3, $4) name each map step's run, step and
-- item name range.
SELECT u.ord, t.item, t.output
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(run_id, step, lo, hi, ord)
JOIN {{schema}}.tasks m ON m.run_id = u.run_id AND m.name = u.step AND m.state = 'COMPLETED'
JOIN {{schema}}.tasks t ON t.run_id = u.run_id AND t.name >= u.lo AND t.name < u.hi AND t.kind = 'item'
  AND t.item < coalesce(m.items, 0)
ORDER BY u.ord, t.item;

-- name: taskCompleted
-- route: $1
SELECT EXISTS (SELECT 1 FROM {{schema}}.tasks WHERE run_id = $1 AND name = $2 AND state = 'COMPLETED');

-- name: loadRecords
-- route: $1
-- Every record of the function bodies ($1, $2: runs and bodies; $3, $4:
-- the range of their records' names, dag.ItemPrefix), in one statement for
-- every body a call names. The columns of loadItems.
SELECT t.run_id, t.name, t.kind, t.state, t.attempt, t.token, coalesce(t.worker, ''), t.due_at, coalesce(t.error, ''), t.started_at, t.finished_at,
       coalesce(t.q_id, 0), t.q_at, coalesce(t.q_attempt, 0), coalesce(t.s_id, 0), coalesce(t.c_id, 0), t.heartbeat_at, t.timeout_at,
       coalesce(t.ckey, ''), coalesce(t.rkey, ''), t.wait_key, t.child_id, t.items, t.items_left, coalesce(t.lost, 0), coalesce(t.item, 0), t.item_input
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS u(run_id, body, lo, hi)
JOIN {{schema}}.tasks t ON t.run_id = u.run_id AND t.name >= u.lo AND t.name < u.hi
ORDER BY t.run_id, t.item;

-- name: funcRecords
-- route: $1
-- The records of the function bodies claimed ($1): every item of their
-- runs (a function's run has no other), through the primary key.
SELECT run_id, name, kind, state, attempt, output, coalesce(error, ''), child_id, coalesce(item, 0), item_input
FROM {{schema}}.tasks WHERE run_id = ANY($1::uuid[]) AND name >= '~' ORDER BY run_id, item;

-- name: parentOutputs
-- route: $1
SELECT t.run_id, t.name, t.output FROM {{schema}}.tasks t
JOIN unnest($1::uuid[], $2::text[]) AS u(run_id, name) ON t.run_id = u.run_id AND t.name = u.name
WHERE t.state = 'COMPLETED';

-- name: runningCounts
SELECT tenant, count(*) FROM {{schema}}.tasks WHERE state = 'RUNNING' AND tenant = ANY($1::text[]) GROUP BY tenant;

-- name: heartbeatTasks
-- route: $1
-- Stamps the listed claims whose tasks run under them (skipping rows a
-- transition holds: it is finishing them) and reads the tasks back, as
-- they were before the statement, for dag.Current to tell which claims
-- are lost, and dag.LostToCancel and LostToTimeout why (the task's
-- recorded error says whether its attempt timed out).
WITH u AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(run_id, name, token, ord)
),
stamped AS (
  UPDATE {{schema}}.tasks t SET heartbeat_at = coalesce($4, now())
  FROM (
    SELECT t2.run_id, t2.name FROM {{schema}}.tasks t2 JOIN u ON t2.run_id = u.run_id AND t2.name = u.name
    WHERE t2.state = 'RUNNING' AND t2.token = u.token
    FOR UPDATE OF t2 SKIP LOCKED) l
  WHERE t.run_id = l.run_id AND t.name = l.name
)
SELECT u.ord, t.kind, t.state, t.token, r.status, coalesce(t.error, '')
FROM u
JOIN {{schema}}.tasks t ON t.run_id = u.run_id AND t.name = u.name
JOIN {{schema}}.runs r ON r.id = u.run_id;

-- name: listTasks
-- A map step's items come right after it, in item order.
SELECT run_id, name, kind, state, attempt, token, coalesce(worker, ''), due_at, output, coalesce(error, ''), started_at, finished_at,
       heartbeat_at, timeout_at, coalesce(ckey, ''), coalesce(rkey, ''), coalesce(wait_key, ''), child_id,
       coalesce(items, 0), coalesce(items_left, 0), coalesce(item, 0), item_input, coalesce(lost, 0)
FROM {{schema}}.tasks WHERE run_id = $1 ORDER BY idx, item NULLS FIRST;

-- name: listWaits
-- The steps of runs that wait (store.Waits), through the primary key
-- (run_id, name): steps only (items are named from '~' on), no outputs.
-- $2 is the tenant, or NULL for any.
SELECT run_id, name, kind, state, attempt, due_at, coalesce(wait_key, ''), child_id, coalesce(items, 0), coalesce(items_left, 0)
FROM {{schema}}.tasks
WHERE run_id = ANY($1::uuid[]) AND name < '~' AND ($2::text IS NULL OR tenant = $2)
  AND (state IN ('WAITING', 'SLEEPING') OR (state = 'QUEUED' AND due_at IS NOT NULL))
ORDER BY run_id, idx;

-- name: statsTasks
-- The tasks waiting for a timer and running, through their partial
-- indexes, per workflow, version and tenant (see statsReady).
--
-- Each task in flight looks its run up by ID: the lateral subquery (kept
-- apart by OFFSET 0) fixes that join order. A plain join let the planner
-- walk all of runs in workflow order, probing the tasks for each (the
-- sequential scan of concurrency_waiting, off for the stats, priced the
-- tasks' side as too dear to read twice): 9.6 s on 1,000,000 runs with
-- 300 waiting, 12 ms now.
SELECT r.workflow, r.version, r.tenant, sum(x.waiting)::int, sum(x.running)::int
FROM (
  SELECT t.run_id, 1 AS waiting, 0 AS running FROM {{schema}}.tasks t
  WHERE t.due_at IS NOT NULL AND ($1::text IS NULL OR t.tenant = $1)
  UNION ALL
  SELECT t.run_id, 0, 1 FROM {{schema}}.tasks t
  WHERE t.state = 'RUNNING' AND ($1::text IS NULL OR t.tenant = $1)
  UNION ALL
  SELECT w.run_id, 1, 0 FROM {{schema}}.concurrency_waiting w
  WHERE $1::text IS NULL OR w.tenant = $1
  UNION ALL
  SELECT t.run_id, 1, 0 FROM {{schema}}.tasks t
  WHERE t.state = 'WAITING' AND t.due_at IS NULL AND ($1::text IS NULL OR t.tenant = $1)
) x CROSS JOIN LATERAL (SELECT workflow, version, tenant FROM {{schema}}.runs WHERE id = x.run_id OFFSET 0) r
GROUP BY r.workflow, r.version, r.tenant;

-- name: nextTimer
-- The next timer due: the earliest due time (sleeps, backoffs, delayed
-- starts), timeout, run deadline and end of a rate-limit window, each read
-- from its own partial index. timerCheck reads the same (a change to one
-- goes to the other).
SELECT least(
  (SELECT min(due_at) FROM {{schema}}.tasks WHERE due_at IS NOT NULL),
  (SELECT min(timeout_at) FROM {{schema}}.tasks WHERE timeout_at IS NOT NULL),
  (SELECT min(deadline_at) FROM {{schema}}.runs WHERE deadline_at IS NOT NULL),
  (SELECT min(rate_until) FROM {{schema}}.ready WHERE rate_until IS NOT NULL));

-- name: timerCheck
-- The next timer (as nextTimer) and the time, read before FireTimers opens
-- a transaction: an idle leader stops here.
SELECT least(
  (SELECT min(due_at) FROM {{schema}}.tasks WHERE due_at IS NOT NULL),
  (SELECT min(timeout_at) FROM {{schema}}.tasks WHERE timeout_at IS NOT NULL),
  (SELECT min(deadline_at) FROM {{schema}}.runs WHERE deadline_at IS NOT NULL),
  (SELECT min(rate_until) FROM {{schema}}.ready WHERE rate_until IS NOT NULL)), coalesce($1, now());

-- name: dueTimers
-- The timer index is on (due_at, run_id, idx): the LIMIT reads only the
-- timers it returns, however many are due at one instant. Due times and
-- timeouts each by their index, merged with the runs past their deadlines
-- (idx -1) and the ready tasks whose rate-limit window ended unclaimed
-- (idx -2 - the task's).
-- A waiting event step's timeout comes with its tenant and key: the
-- transaction that fires it takes the key's lock before it reads the
-- messages pending for the step (see waits.go).
-- $3 are runs to pass over: the call left them alone (their shapes are
-- unreadable here) and looks again past them.
SELECT run_id, idx, name, tenant, wait_key FROM (
  (SELECT due_at AS at, run_id, idx, item, name, tenant, CASE WHEN state = 'WAITING' THEN wait_key END AS wait_key
   FROM {{schema}}.tasks WHERE due_at IS NOT NULL AND due_at <= coalesce($1, now()) AND run_id <> ALL(coalesce($3::uuid[], '{}'))
   ORDER BY due_at, run_id, idx LIMIT $2)
  UNION ALL
  (SELECT timeout_at, run_id, idx, item, name, NULL, NULL FROM {{schema}}.tasks WHERE timeout_at IS NOT NULL AND timeout_at <= coalesce($1, now()) AND run_id <> ALL(coalesce($3::uuid[], '{}'))
   ORDER BY timeout_at, run_id, idx LIMIT $2)
  UNION ALL
  (SELECT deadline_at, id, -1, NULL, NULL, NULL, NULL FROM {{schema}}.runs WHERE deadline_at IS NOT NULL AND deadline_at <= coalesce($1, now()) AND id <> ALL(coalesce($3::uuid[], '{}'))
   ORDER BY deadline_at, id LIMIT $2)
  UNION ALL
  (SELECT r.rate_until, r.run_id, -2 - t.idx, NULL, r.name, NULL, NULL FROM {{schema}}.ready r
   JOIN {{schema}}.tasks t ON t.run_id = r.run_id AND t.name = r.name
   WHERE r.rate_until IS NOT NULL AND r.rate_until <= coalesce($1, now()) AND r.run_id <> ALL(coalesce($3::uuid[], '{}'))
   ORDER BY r.rate_until, r.run_id, r.name LIMIT $2)
) d ORDER BY at, run_id, idx, item NULLS FIRST LIMIT $2;

-- name: leaderCheck
-- What the leader's periodic pass has to do, in one statement: the
-- candidates for a rescue (RUNNING tasks whose claim and last heartbeat
-- are both DeadAfter old; dag.Dead decides once their runs are locked),
-- whether incoming tasks wait for promotion, whether frontier rows are
-- obsolete (the condition of pruneFrontier, in frontier.sql), and whether
-- messages for runs are pending (left by a process that died before
-- applying them), and which queue tables have grown large with dead rows
-- while few are live, so that the leader recycles them (recycle.go: the
-- size is the file's, the counts the statistics collector's, which counts
-- deletes whether or not autovacuum runs, but reaches its totals a second
-- or so late; the size drops at once when a table is recycled). An idle fleet costs this one statement per pass.
WITH dead AS (
  SELECT t.run_id, t.idx, t.name FROM {{schema}}.tasks t
  WHERE t.state = 'RUNNING'
    AND greatest(t.started_at, t.heartbeat_at) <= coalesce($1, now()) - $2::bigint * interval '1 microsecond'
  ORDER BY t.run_id, t.idx, t.item NULLS FIRST LIMIT $3
)
SELECT d.run_id, d.idx, d.name,
       EXISTS (SELECT 1 FROM {{schema}}.incoming),
       EXISTS (SELECT 1 FROM {{schema}}.frontier r
               WHERE NOT EXISTS (
                 SELECT 1 FROM unnest(r.workflows) AS w(workflow)
                 WHERE NOT EXISTS (
                   SELECT 1 FROM {{schema}}.frontier r2
                   WHERE w.workflow = ANY(r2.workflows) AND (r2.block, r2.shard) > (r.block, r.shard)))
               AND EXISTS (SELECT 1 FROM {{schema}}.frontier r3 WHERE (r3.block, r3.shard) > (r.block, r.shard))),
       (SELECT max(id) FROM {{schema}}.inbox),
       ARRAY(SELECT q.name FROM (VALUES ('ready', '{{schema}}.ready'::regclass), ('incoming', '{{schema}}.incoming'::regclass),
                                        ('inbox', '{{schema}}.inbox'::regclass), ('concurrency_waiting', '{{schema}}.concurrency_waiting'::regclass)) AS q(name, rel)
             WHERE pg_relation_size(q.rel) >= {{recycleMinBytes}}
               AND pg_stat_get_live_tuples(q.rel) <= {{recycleMaxLive}}
               AND pg_stat_get_dead_tuples(q.rel) >= pg_stat_get_live_tuples(q.rel))
FROM (SELECT 1) AS one LEFT JOIN dead d ON true;
