package pgstore

import (
	"strconv"
	"time"

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/internal/fairq"
	"github.com/effectivelabs/durable/store"
)

// queries holds the store's SQL with the schema substituted once, at New.
// Statements take arrays and unnest them, so that one statement writes a
// whole batch; pgx prepares and caches each of them per connection.
type queries struct {
	genericPlans string
	listPlans    string
	queuePlans   string
	now          string
	loadShapes   string
	insertShapes string
	reshapeRuns  string
	listVersions string

	runsExist     string
	keysExist     string
	insertRunsNew string
	ensureTenants string
	ensureLanes   string
	lockLanes     string
	readFrontiers string
	pruneFrontier string
	leaderCheck   string
	eventBlock    string
	updateLanes   string
	lockRuns      string
	loadTasks     string
	lockReady     string
	deleteReady   string
	insertRuns    string
	updateRuns    string
	countSettled  string
	insertTasks   string
	updateTasks   string
	// The same for batches with waits, maps or items, and child runs.
	insertTasksWaits string
	updateTasksWaits string
	insertChildRuns  string
	insertReady      string
	insertIncoming   string
	takeIncoming     string
	insertEvents     string
	notify           string
	nextTimer        string
	timerCheck       string
	dueTimers        string
	heartbeatTasks   string

	claim          string
	claimIDs       string
	claimCandidate string
	anyPriority    string
	reorderHead    string
	reorderBest    string
	reorderTake    string
	reorderPut     string
	tryTenantLocks string
	runningCounts  string
	parentOutputs  string

	getRun     string
	listTasks  string
	listEvents string
	runExists  string
	listWaits  string

	statsReady    string
	statsTasks    string
	statsInflight string
	statsCounts   string
	pruneCounts   string
	compactCounts string
	pruneRuns     string
	pruneShapes   string

	// insertRuns, insertChildRuns and insertRunsNew with the runs' trace
	// parents.
	insertRunsTraced, insertChildRunsTraced, insertRunsNewTraced string

	flowQueries
	waitQueries
}

func newQueries(schema string) queries {
	r := func(sql string) string { return render(schema, sql) }
	q := queries{
		// The store's statements are prepared once per connection and
		// executed with array parameters; PostgreSQL's default (auto) keeps
		// re-planning them as custom plans, which costs as much as running
		// them. Every transaction the store owns starts with this; a caller's
		// transaction (CreateRunsTx) is left alone.
		//
		// A generic plan lives as long as the connection (or until the
		// table is next analyzed), so one made while the tables were nearly
		// empty would keep scanning them whole as they grow. Every statement
		// here reaches its rows by key, so sequential scans are priced out
		// (TestGenericPlansUseIndexes checks each plan on an empty schema).
		// JIT is off: the inflated cost of the few scans that remain (the
		// one-row-per-claimer frontier) would otherwise compile them at
		// every execution, for milliseconds each. Parallel workers are off:
		// starting them costs tens of milliseconds here, more than any of
		// these statements should take (a list of the runs in flight took
		// 60-100 ms in a parallel plan, 0.3 ms without).
		// Hash and merge joins are off for the same reason as sequential
		// scans: on a table analyzed while empty, as autovacuum finds the
		// queue tables whenever the workers have caught up, they read the
		// whole table into the join, and the plan is kept while the table
		// fills up. (Nested loops can read a whole index on such statistics
		// too; see deleteReady. TestGenericPlansUseIndexes plans every
		// statement after filling, draining, vacuuming and analyzing the
		// queue tables, and fails on such a read.)
		genericPlans: `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true), set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`,
		// Lists take the first rows in index order; without sorts the
		// planner keeps to that order even where it expects few rows (its
		// estimates on an empty table are what a generic plan keeps).
		listPlans: `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true), set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), set_config('enable_sort', 'off', true)`,
		// Reads of whole queues (the stats, the runs in flight) walk their
		// indexes without bitmaps: a plain index scan marks the entries of
		// deleted rows it meets dead, so that the next read skips them
		// without visiting the heap. Until vacuum, a queue's index holds an
		// entry per task that went through it (a million after a million
		// runs); with bitmap scans every read visited all their heap pages
		// (285 ms for the stats on 1,000,000 runs), with index scans
		// the first read does and the next ones take about 2 ms.
		queuePlans: `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true), set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), set_config('enable_bitmapscan', 'off', true)`,
		now:        `SELECT now()`,
		loadShapes: r(`SELECT id, shape FROM {{schema}}.shapes WHERE id = ANY($1::uuid[])`),
		// A shape already there gets its used_at refreshed, so that retention
		// leaves it alone while this store trusts it (shapeTrust).
		insertShapes: r(`
INSERT INTO {{schema}}.shapes (id, workflow, shape, version)
SELECT id, workflow, shape::jsonb, coalesce(shape::jsonb->>'version', '') FROM unnest($1::uuid[], $2::text[], $3::text[]) AS s(id, workflow, shape)
ON CONFLICT (id) DO UPDATE SET used_at = now()
WHERE shapes.used_at < now() - interval '` + strconv.Itoa(int(shapeTrust/time.Second)) + ` seconds'`),
		// Runs moved to another version (queueReshapes): their records,
		// the version of their queue rows, and their on-failure task's
		// index (it follows the steps, which may be more now).
		reshapeRuns: r(`
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
WHERE t.ctid = ANY (ARRAY (SELECT (SELECT y.ctid FROM {{schema}}.tasks y WHERE y.run_id = u.id AND y.name = '` + store.OnFailureTask + `') FROM u))`),
		// The versions recorded, newest first per workflow.
		listVersions: r(`
SELECT workflow, version, shape, created_at FROM {{schema}}.shapes
WHERE $1::text IS NULL OR workflow = $1 ORDER BY workflow, created_at DESC, id`),

		// No LIMIT: "LIMIT 1" invites a sequential scan expected to stop
		// at the first match, which is wrong for a check that finds nothing.
		runsExist: r(`SELECT id, workflow, tenant FROM {{schema}}.runs WHERE id = ANY($1::uuid[])`),
		// Runs holding idempotency keys, through their unique index.
		keysExist: r(`
SELECT r.id, r.workflow, r.tenant, r.idem_key FROM unnest($1::text[], $2::text[], $3::text[]) AS k(workflow, tenant, key)
JOIN {{schema}}.runs r ON r.workflow = k.workflow AND r.tenant = k.tenant AND r.idem_key = k.key
WHERE r.idem_key IS NOT NULL`),
		// New tenants get their groups in the order of $1 (sorted by the
		// caller), and only when no run ID of the batch is taken ($2): the
		// batch fails on it, or it is a duplicate (and create adds the lanes
		// of the other runs),
		// so that sequential calls leave no gaps in the groups.
		ensureTenants: r(`
INSERT INTO {{schema}}.tenants (name, grp)
SELECT n.name, nextval('{{schema}}.tenant_groups')
FROM unnest($1::text[]) WITH ORDINALITY AS n(name, ord)
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.tenants t WHERE t.name = n.name)
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.runs WHERE id = ANY($2::uuid[]))
ORDER BY n.ord
ON CONFLICT (name) DO NOTHING`),
		// Lanes of new runs, in the order of $1/$2 (sorted by the caller),
		// with the group of their tenant. (Unlike tenants' groups, lanes use
		// no sequence: the lanes of a batch that fails on an existing run
		// leave no gaps, and need no guard.)
		ensureLanes: r(`
INSERT INTO {{schema}}.lanes (workflow, tenant, grp)
SELECT u.workflow, u.tenant, t.grp
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(workflow, tenant, ord)
JOIN {{schema}}.tenants t ON t.name = u.tenant
ORDER BY u.ord
ON CONFLICT (workflow, tenant) DO NOTHING`),
		lockLanes: r(`
SELECT l.workflow, l.tenant, l.grp, l.last_block
FROM {{schema}}.lanes l JOIN unnest($1::text[], $2::text[]) AS u(workflow, tenant)
  ON l.workflow = u.workflow AND l.tenant = u.tenant
ORDER BY l.workflow, l.tenant FOR UPDATE OF l`),
		// Every claimer's frontier; fairq.Frontiers computes each
		// workflow's from them. The table holds a row per claimer, and the
		// leader prunes the rows that decide no workflow's frontier.
		readFrontiers: r(`SELECT block, workflows FROM {{schema}}.frontier`),
		pruneFrontier: r(`DELETE FROM {{schema}}.frontier r WHERE ` + obsoleteFrontier),
		// What the leader's periodic pass has to do, in one statement: the
		// candidates for a rescue (RUNNING tasks whose claim and last
		// heartbeat are both DeadAfter old; dag.Dead decides once their runs
		// are locked), whether incoming tasks wait for promotion, whether
		// frontier rows are obsolete, and whether messages for runs are
		// pending (left by a process that died before applying them). An
		// idle fleet costs this one statement per pass.
		leaderCheck: r(`
WITH dead AS (
  SELECT t.run_id, t.idx, t.name FROM {{schema}}.tasks t
  WHERE t.state = 'RUNNING'
    AND greatest(t.started_at, t.heartbeat_at) <= coalesce($1, now()) - $2::bigint * interval '1 microsecond'
  ORDER BY t.run_id, t.idx, t.item NULLS FIRST LIMIT $3
)
SELECT d.run_id, d.idx, d.name,
       EXISTS (SELECT 1 FROM {{schema}}.incoming),
       EXISTS (SELECT 1 FROM {{schema}}.frontier r WHERE ` + obsoleteFrontier + `),
       (SELECT max(id) FROM {{schema}}.inbox)
FROM (SELECT 1) AS one LEFT JOIN dead d ON true`),
		// Taken after the runs are locked, so that event ids and times follow
		// the order in which transitions of a run commit.
		eventBlock: r(`SELECT nextval('{{schema}}.event_blocks'), clock_timestamp()`),
		updateLanes: r(`
UPDATE {{schema}}.lanes l SET last_block = u.last_block
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(workflow, tenant, last_block)
WHERE l.workflow = u.workflow AND l.tenant = u.tenant`),
		lockRuns: r(`
SELECT id, workflow, tenant, shape_id, status, coalesce(failed_step, ''), coalesce(error, ''), created_at, finished_at,
       priority, deadline_at, parent_id, parent_step, parent_result, version
FROM {{schema}}.runs WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`),
		// Outputs are not loaded: the core never reads them, and a task's
		// output is written when it completes, and cleared when a replay
		// resets it (attempt 0; see updateTasks). Items are not loaded
		// either (names from '~' on; see dag.ItemName): a transition loads
		// those it needs (loadItems, loadMapItems).
		loadTasks: r(`
SELECT ` + stepColumns + `
FROM {{schema}}.tasks WHERE run_id = ANY($1::uuid[]) AND name < '~' ORDER BY run_id, idx`),
		lockReady: r(`SELECT id FROM {{schema}}.ready WHERE run_id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`),
		// Rows of the ready queue are found one key at a time, each by a
		// subquery on the whole unique key (run_id, name), then deleted by
		// ctid: the planner probes the key for each row even on statistics
		// that call the table empty, where it planned a join with the keys
		// as a read of the whole index (see genericPlans; the plan test
		// checks it).
		deleteReady: r(`
DELETE FROM {{schema}}.ready WHERE ctid = ANY (ARRAY (
  SELECT (SELECT r.ctid FROM {{schema}}.ready r WHERE r.run_id = d.run_id AND r.name = d.name)
  FROM unnest($1::uuid[], $2::text[]) AS d(run_id, name)))`),
		// unsuccessful follows status (see migration 003): it changes when a
		// run fails, is cancelled or is replayed, never when it completes,
		// so that settling stays a HOT update.
		insertRuns:      r(insertRunsSQL(false, false)),
		insertChildRuns: r(insertRunsSQL(true, false)),
		// Batches of runs without trace parents (most) are inserted by
		// statements without their column.
		insertRunsTraced:      r(insertRunsSQL(false, true)),
		insertChildRunsTraced: r(insertRunsSQL(true, true)),
		insertRunsNewTraced:   r(insertRunsSQL(false, true) + onConflictNew),
		// The same inside a caller's transaction: a run another transaction
		// creates at the same moment (its key or ID) is skipped instead of
		// aborting the caller's transaction, and reported as a duplicate.
		insertRunsNew: r(insertRunsSQL(false, false) + onConflictNew),

		updateRuns: r(`
UPDATE {{schema}}.runs r
SET status = u.status, failed_step = nullif(u.failed_step, ''), error = nullif(u.error, ''), finished_at = u.finished_at,
    unsuccessful = u.status IN ('FAILED', 'CANCELLED'), deadline_at = u.deadline_at
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[])
  AS u(id, status, failed_step, error, finished_at, deadline_at)
WHERE r.id = u.id`),
		// Settled runs counted per minute, into the rows of this
		// connection's shard; the keys come sorted and distinct, so that two
		// transactions on one shard lock rows in the same order.
		countSettled: r(`
INSERT INTO {{schema}}.run_counts AS c (minute, workflow, tenant, status, shard, n)
SELECT minute, workflow, tenant, status, (pg_backend_pid() % ` + strconv.Itoa(countShards) + `)::smallint, n
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bigint[]) AS u(minute, workflow, tenant, status, n)
ON CONFLICT (minute, workflow, tenant, status, shard) DO UPDATE SET n = c.n + excluded.n`),
		// Tasks of batches without waits, maps or items (most) are written
		// by statements without their columns (the ...Waits variants).
		insertTasks:      r(insertTasksSQL(false)),
		insertTasksWaits: r(insertTasksSQL(true)),
		updateTasks:      r(updateTasksSQL(false)),
		updateTasksWaits: r(updateTasksSQL(true)),
		insertIncoming: r(`
INSERT INTO {{schema}}.incoming (run_id, name, workflow, tenant, priority, version)
SELECT run_id, name, workflow, tenant, coalesce(priority, 0), coalesce(version, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::text[]) AS u(run_id, name, workflow, tenant, priority, version)`),
		takeIncoming: r(`
DELETE FROM {{schema}}.incoming WHERE seq IN (
  SELECT seq FROM {{schema}}.incoming ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING seq, run_id, name, workflow, tenant, priority, version`),
		insertReady: r(`
INSERT INTO {{schema}}.ready (id, run_id, name, workflow, tenant, queued_at, priority, rate_until, version)
SELECT id, run_id, name, workflow, tenant, coalesce($6, now()), coalesce(priority, 0), rate_until, coalesce(version, '')
FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::text[], $7::smallint[], $8::timestamptz[], $9::text[])
  AS u(id, run_id, name, workflow, tenant, priority, rate_until, version)`),
		insertEvents: r(`
INSERT INTO {{schema}}.events (run_id, id, step, type, attempt, at, detail, due_at)
SELECT run_id, id, step, type, attempt, at, nullif(detail, ''), due_at
FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::int[], $6::timestamptz[], $7::text[], $8::timestamptz[])
  AS u(run_id, id, step, type, attempt, at, detail, due_at)`),
		notify:    `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`,
		nextTimer: r(`SELECT ` + nextTimerSQL),
		// The timer index is on (due_at, run_id, idx): the LIMIT reads only
		// the timers it returns, however many are due at one instant.
		// Due times and timeouts each by their index, merged with the runs
		// past their deadlines (idx -1) and the ready tasks whose rate-limit
		// window ended unclaimed (idx -2 - the task's).
		// A waiting event step's timeout comes with its tenant and key: the
		// transaction that fires it takes the key's lock before it reads
		// the messages pending for the step (see waits.go).
		dueTimers: r(`
SELECT run_id, idx, name, tenant, wait_key FROM (
  (SELECT due_at AS at, run_id, idx, item, name, tenant, CASE WHEN state = 'WAITING' AND kind = 'event' THEN wait_key END AS wait_key
   FROM {{schema}}.tasks WHERE due_at IS NOT NULL AND due_at <= coalesce($1, now())
   ORDER BY due_at, run_id, idx LIMIT $2)
  UNION ALL
  (SELECT timeout_at, run_id, idx, item, name, NULL, NULL FROM {{schema}}.tasks WHERE timeout_at IS NOT NULL AND timeout_at <= coalesce($1, now())
   ORDER BY timeout_at, run_id, idx LIMIT $2)
  UNION ALL
  (SELECT deadline_at, id, -1, NULL, NULL, NULL, NULL FROM {{schema}}.runs WHERE deadline_at IS NOT NULL AND deadline_at <= coalesce($1, now())
   ORDER BY deadline_at, id LIMIT $2)
  UNION ALL
  (SELECT r.rate_until, r.run_id, -2 - t.idx, NULL, r.name, NULL, NULL FROM {{schema}}.ready r
   JOIN {{schema}}.tasks t ON t.run_id = r.run_id AND t.name = r.name
   WHERE r.rate_until IS NOT NULL AND r.rate_until <= coalesce($1, now())
   ORDER BY r.rate_until, r.run_id, r.name LIMIT $2)
) d ORDER BY at, run_id, idx, item NULLS FIRST LIMIT $2`),
		// The next timer and the time, read before FireTimers opens a
		// transaction: an idle leader stops here.
		timerCheck: r(`SELECT ` + nextTimerSQL + `, coalesce($1, now())`),
		// Stamps the listed claims whose tasks run under them (skipping rows
		// a transition holds: it is finishing them) and reads the tasks back,
		// as they were before the statement, for dag.Current to tell which
		// claims are lost.
		heartbeatTasks: r(`
WITH u AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(run_id, name, token, ord)
),
stamped AS (
  UPDATE {{schema}}.tasks t SET heartbeat_at = coalesce($4, now())
  WHERE t.ctid IN (
    SELECT t2.ctid FROM {{schema}}.tasks t2 JOIN u ON t2.run_id = u.run_id AND t2.name = u.name
    WHERE t2.state = 'RUNNING' AND t2.token = u.token
    FOR UPDATE OF t2 SKIP LOCKED)
)
SELECT u.ord, t.kind, t.state, t.token, r.status, starts_with(coalesce(t.error, ''), '` + dag.ErrTimeoutText + `')
FROM u
JOIN {{schema}}.tasks t ON t.run_id = u.run_id AND t.name = u.name
JOIN {{schema}}.runs r ON r.id = u.run_id`),

		// array_position rather than = ANY: the planner cannot estimate its
		// selectivity, so it keeps walking the primary key in fair order
		// instead of sorting the whole queue when statistics are missing or
		// the plan is generic.
		// A row whose lane holds a row of a higher priority is passed over
		// (notOutranked): reorderLanes gives that row its slot first.
		claim: r(claimSQL("SELECT ctid FROM {{schema}}.ready r WHERE array_position($1::text[], workflow) > 0 AND "+servedVersion("$5")+" AND (NOT (SELECT p FROM prio) OR "+notOutranked+") AND "+rateOpen("coalesce($4, clock_timestamp())")+" ORDER BY id, workflow LIMIT $2 FOR UPDATE SKIP LOCKED", "$1")),
		// Whether any ready task of these workflows is above the default
		// priority, through the partial index that holds only those.
		anyPriority: r(`SELECT EXISTS (SELECT 1 FROM {{schema}}.ready WHERE priority > 0 AND array_position($1::text[], workflow) > 0)`),
		// reorderLanes: the head of the queue, locked, and the rows above
		// the default priority of its lanes, best first.
		reorderHead: r(`
SELECT ctid, id, workflow, version, tenant, priority FROM {{schema}}.ready r
WHERE array_position($1::text[], workflow) > 0 AND ` + servedVersion("$3") + ` ORDER BY id, workflow LIMIT $2 FOR UPDATE SKIP LOCKED`),
		reorderBest: r(`
SELECT b.ctid, b.id, b.workflow, b.version, b.tenant, b.priority
FROM unnest($1::text[], $2::text[], $3::int[], $4::text[]) AS l(workflow, tenant, n, version)
CROSS JOIN LATERAL (
  SELECT ctid, id, workflow, version, tenant, priority FROM {{schema}}.ready
  WHERE priority > 0 AND workflow = l.workflow AND tenant = l.tenant AND version = l.version
  ORDER BY priority DESC, id LIMIT l.n FOR UPDATE SKIP LOCKED) b`),
		reorderTake: r(`
DELETE FROM {{schema}}.ready WHERE ctid = ANY($1::tid[])
RETURNING id, run_id, name, workflow, tenant, queued_at, priority, rate_until, version`),
		reorderPut: r(`
INSERT INTO {{schema}}.ready (id, run_id, name, workflow, tenant, queued_at, priority, rate_until, version)
SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::smallint[], $8::timestamptz[], $9::text[])`),
		claimIDs: r(claimSQL("SELECT ctid FROM {{schema}}.ready WHERE ctid = ANY($1::tid[]) AND $2::int IS NOT NULL", "$5")),
		// Candidates of a capped claim, locked, after the key ($3, $4).
		claimCandidate: r(`
SELECT ctid, id, workflow, tenant FROM {{schema}}.ready r
WHERE array_position($1::text[], workflow) > 0 AND ` + servedVersion("$7") + ` AND tenant <> ALL($2::text[]) AND (id, workflow) > ($3, $4)
  AND ` + notOutranked + ` AND ` + rateOpen("coalesce($6::timestamptz, clock_timestamp())") + `
ORDER BY id, workflow LIMIT $5 FOR UPDATE SKIP LOCKED`),
		tryTenantLocks: `SELECT k.name, pg_try_advisory_xact_lock(k.key) FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS k(name, key, ord) ORDER BY k.ord`,
		runningCounts: r(`
SELECT tenant, count(*) FROM {{schema}}.tasks WHERE state = 'RUNNING' AND tenant = ANY($1::text[]) GROUP BY tenant`),
		parentOutputs: r(`
SELECT t.run_id, t.name, t.output FROM {{schema}}.tasks t
JOIN unnest($1::uuid[], $2::text[]) AS u(run_id, name) ON t.run_id = u.run_id AND t.name = u.name
WHERE t.state = 'COMPLETED'`),

		getRun: r(`
SELECT id, workflow, tenant, status, input, coalesce(failed_step, ''), coalesce(error, ''), created_at, finished_at, shape_id,
       coalesce(idem_key, ''), priority, deadline_at, parent_id, coalesce(parent_step, ''), coalesce(parent_result, ''),
       coalesce(trace_parent, ''), version
FROM {{schema}}.runs WHERE id = $1`),
		// A map step's items come right after it, in item order.
		listTasks: r(`
SELECT run_id, name, kind, state, attempt, token, coalesce(worker, ''), due_at, output, coalesce(error, ''), started_at, finished_at,
       heartbeat_at, timeout_at, coalesce(ckey, ''), coalesce(rkey, ''), coalesce(wait_key, ''), child_id,
       coalesce(items, 0), coalesce(items_left, 0), coalesce(item, 0), item_input
FROM {{schema}}.tasks WHERE run_id = $1 ORDER BY idx, item NULLS FIRST`),
		// The steps of runs that wait (store.Waits), through the primary
		// key (run_id, name): steps only (items are named from '~' on), no
		// outputs. $2 is the tenant, or NULL for any.
		listWaits: r(`
SELECT run_id, name, kind, state, attempt, due_at, coalesce(wait_key, ''), child_id, coalesce(items, 0), coalesce(items_left, 0)
FROM {{schema}}.tasks
WHERE run_id = ANY($1::uuid[]) AND name < '~' AND ($2::text IS NULL OR tenant = $2)
  AND (state IN ('WAITING', 'SLEEPING') OR (state = 'QUEUED' AND due_at IS NOT NULL))
ORDER BY run_id, idx`),
		// The log is the events table plus the happy-path events kept in
		// task rows.
		listEvents: r(`
SELECT id, run_id, step, type, attempt, at, coalesce(detail, ''), due_at FROM {{schema}}.events WHERE run_id = $1
UNION ALL
SELECT q_id, run_id, name, 'QUEUED', q_attempt, q_at, '', NULL FROM {{schema}}.tasks WHERE run_id = $1 AND q_id IS NOT NULL
UNION ALL
SELECT s_id, run_id, name, 'STARTED', attempt, started_at, '', NULL FROM {{schema}}.tasks WHERE run_id = $1 AND s_id IS NOT NULL
UNION ALL
SELECT c_id, run_id, name, 'COMPLETED', attempt, finished_at, '', NULL FROM {{schema}}.tasks WHERE run_id = $1 AND c_id IS NOT NULL
ORDER BY 1`),
		runExists: r(`SELECT EXISTS (SELECT 1 FROM {{schema}}.runs WHERE id = $1)`),

		// Stats: the ready queue (its size is the backlog); the tasks waiting
		// for a timer and running, through their partial indexes; the runs in
		// flight, found from those (inflightRuns); the settled runs counted
		// per minute within the window (run_counts). None reads the history
		// of settled runs.
		statsReady: r(`
SELECT workflow, version, tenant, count(*), min(queued_at) FROM {{schema}}.ready
WHERE $1::text IS NULL OR tenant = $1 GROUP BY workflow, version, tenant`),
		// Each task in flight looks its run up by ID: the lateral
		// subquery (kept apart by OFFSET 0) fixes that join order. A plain
		// join let the planner walk all of runs in workflow order, probing
		// the tasks for each (the sequential scan of concurrency_waiting,
		// off for the stats, priced the tasks' side as too dear to read
		// twice): 9.6 s on 1,000,000 runs with 300 waiting, 12 ms now.
		statsTasks: r(`
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
GROUP BY r.workflow, r.version, r.tenant`),
		statsInflight: r(`
SELECT r.workflow, r.version, r.tenant, r.status, count(*)::int FROM {{schema}}.runs r
WHERE r.id = ANY (ARRAY (` + inflightRuns("$1") + `)) AND r.finished_at IS NULL
GROUP BY r.workflow, r.version, r.tenant, r.status`),
		statsCounts: r(`
SELECT workflow, '', tenant, status, sum(n)::bigint FROM {{schema}}.run_counts
WHERE minute >= ` + minuteOf(`coalesce($2, now()) - $3::bigint * interval '1 microsecond'`) + ` AND ($1::text IS NULL OR tenant = $1)
GROUP BY workflow, tenant, status`),
		// Retention: the oldest settled runs that finished $2 microseconds
		// before $1 (the database's now() when NULL), skipping
		// runs a transition holds (their tasks go with them, by the foreign
		// key).
		pruneRuns: r(`
WITH cutoff AS (
  SELECT coalesce($1, now()) - $2::bigint * interval '1 microsecond' AS at
), doomed AS (
  SELECT id FROM {{schema}}.runs
  WHERE created_at < (SELECT at FROM cutoff) AND finished_at < (SELECT at FROM cutoff)
  ORDER BY created_at, id LIMIT $3 FOR UPDATE SKIP LOCKED
), events_gone AS (
  DELETE FROM {{schema}}.events e USING doomed d WHERE e.run_id = d.id
), signals_gone AS (
  DELETE FROM {{schema}}.messages m USING doomed d WHERE m.run_id = d.id
), inbox_gone AS (
  DELETE FROM {{schema}}.inbox i USING doomed d WHERE i.run_id = d.id
)
DELETE FROM {{schema}}.runs r USING doomed d WHERE r.id = d.id`),
		// The counts of each closed minute (ended more than a minute ago)
		// merged into shard 0, one row per workflow, tenant and status
		// instead of one per shard: the shards only keep the transactions
		// of the current minute from waiting for one another. Only the last
		// ten minutes are looked at, so that a pass reads what it merges; a
		// transaction that settles runs later than that into an older minute
		// leaves a row in its shard, which the stats count all the same.
		compactCounts: r(`
WITH moved AS (
  DELETE FROM {{schema}}.run_counts
  WHERE minute >= ` + minuteOf(`coalesce($1, now()) - interval '11 minutes'`) + `
    AND minute < ` + minuteOf(`coalesce($1, now()) - interval '1 minute'`) + ` AND shard <> 0
  RETURNING minute, workflow, tenant, status, n
)
INSERT INTO {{schema}}.run_counts AS c (minute, workflow, tenant, status, shard, n)
SELECT minute, workflow, tenant, status, 0, sum(n) FROM moved GROUP BY minute, workflow, tenant, status
ORDER BY minute, workflow, tenant, status
ON CONFLICT (minute, workflow, tenant, status, shard) DO UPDATE SET n = c.n + excluded.n`),
		pruneCounts: r(`
DELETE FROM {{schema}}.run_counts
WHERE minute < ` + minuteOf(`coalesce($1, now()) - $2::bigint * interval '1 microsecond'`)),
		pruneShapes: r(`
DELETE FROM {{schema}}.shapes s
WHERE s.used_at < now() - $1::bigint * interval '1 microsecond'
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.runs r WHERE r.shape_id = s.id)`),
	}
	q.flowQueries = newFlowQueries(r)
	q.waitQueries = newWaitQueries(r)
	return q
}

// claimSQL is the claim statement around a query picking (and locking)
// ready rows by ctid (stable while locked: deleting by it spares an index
// descent per row); its parameters are $1 and $2 of pick, then $3 the
// worker, $4 the time (NULL: the database's clock at the claim) and
// workflows the parameter holding the workflows the claimer serves.
//
// A ready row exists exactly while its task is claimable (dag.Claimable;
// the core's Effects maintain the queue), so taking one is the decision to
// claim; the rest applies dag.Run.Claim in SQL: the ready rows are deleted,
// their tasks become RUNNING with the attempt incremented and the fair id
// as claim token, and the STARTED events, numbered in token order from one
// event block, are kept in the tasks' s_id (empty for a QUEUED task: the
// transition that requeued it moved its previous STARTED event to events).
// The conformance suite compares the claimed tasks with dag.Run.Claim's.
// The task guard (QUEUED, no due time) only protects that invariant.
//
// Claims are stamped with clock_timestamp(), read after the rows are
// locked: the transaction that enqueued them committed before, so a STARTED
// event never precedes the QUEUED event before it.
//
// Fair queuing: the claimer's frontier row advances to the highest block
// claimed, with the workflows it serves (fairq.Claimer.Advance), one row
// whatever the number of workflows.
func claimSQL(pick, workflows string) string {
	return `
WITH prio AS (` + anyPrioritySQL + `),
picked AS (` + pick + `),
deleted AS (
  DELETE FROM {{schema}}.ready r WHERE r.ctid = ANY (ARRAY (SELECT p.ctid FROM picked p))
  RETURNING r.id, r.workflow, r.run_id, r.name, r.queued_at
),
numbered AS (
  SELECT d.id, d.run_id, d.name, d.queued_at, row_number() OVER (ORDER BY d.id, d.workflow) AS k FROM deleted d
),
block AS (
  SELECT nextval('{{schema}}.event_blocks') * ` + strconv.FormatInt(eventBlockSize, 10) + ` AS base,
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
  SELECT $3, m.block, ` + workflows + `::text[]
  FROM (SELECT max(id) / ` + strconv.FormatInt(fairq.BlockLength, 10) + ` AS block FROM deleted) m
  WHERE m.block IS NOT NULL
  ON CONFLICT (shard) DO UPDATE SET block = excluded.block, workflows = excluded.workflows
  WHERE frontier.block < excluded.block
)
SELECT c.run_id, c.name, c.idx, c.kind, c.attempt, c.token, r.workflow, r.version, r.tenant,
       CASE WHEN c.item IS NULL THEN r.input ELSE c.item_input END, r.shape_id,
       coalesce(r.failed_step, ''), coalesce(r.error, ''), (SELECT p FROM prio), coalesce(c.item, 0),
       c.queued_at, c.started_at, coalesce(r.trace_parent, '')
FROM claimed c JOIN {{schema}}.runs r ON r.id = c.run_id
ORDER BY c.token, r.workflow`
}

// insertRunsSQL inserts new runs from arrays; the arrays of features no
// run of the batch uses may be NULL (unnest pads them with NULLs). With
// children, it takes the parents of child runs too ($15-$17); traced, the
// runs' trace parents (the parameter after those).
func insertRunsSQL(children, traced bool) string {
	cols, sel, params, as := "", "", "", ""
	if children {
		cols = ", parent_id, parent_step, parent_result"
		sel = ",\n       parent_id, nullif(parent_step, ''), nullif(parent_result, '')"
		params = ", $15::uuid[], $16::text[], $17::text[]"
		as = ", parent_id, parent_step, parent_result"
	}
	if traced {
		n := 15
		if children {
			n = 18
		}
		cols += ", trace_parent"
		sel += ", nullif(trace_parent, '')"
		params += ", $" + strconv.Itoa(n) + "::text[]"
		as += ", trace_parent"
	}
	return `
INSERT INTO {{schema}}.runs (id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, unsuccessful,
                             idem_key, priority, deadline_at, version` + cols + `)
SELECT id, workflow, tenant, shape_id, status, input, nullif(failed_step, ''), nullif(error, ''), created_at, finished_at,
       status IN ('FAILED', 'CANCELLED'), nullif(idem_key, ''), coalesce(priority, 0), deadline_at, coalesce(version, '')` + sel + `
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[],
            $11::text[], $12::smallint[], $13::timestamptz[], $14::text[]` + params + `)
  AS u(id, workflow, tenant, shape_id, status, input, failed_step, error, created_at, finished_at, idem_key, priority, deadline_at, version` + as + `)`
}

// insertTasksSQL inserts tasks from arrays; with waits, the items' numbers
// and inputs too ($22-$23).
func insertTasksSQL(waits bool) string {
	cols, sel, params := "", "", ""
	if waits {
		cols, sel, params = ", item, item_input", ", item, item_input", ",\n            $22::int[], $23::bytea[]"
	}
	return `
INSERT INTO {{schema}}.tasks (run_id, name, tenant, idx, kind, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
                              q_id, q_at, q_attempt, s_id, c_id, timeout_at, timeout_us` + cols + `)
SELECT run_id, name, tenant, idx, kind, state, attempt, token, nullif(worker, ''), due_at, output, nullif(error, ''), started_at, finished_at,
       nullif(q_id, 0), q_at, CASE WHEN q_id = 0 THEN NULL ELSE q_attempt END, nullif(s_id, 0), nullif(c_id, 0), timeout_at, nullif(timeout_us, 0)` + sel + `
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::int[], $8::bigint[], $9::text[],
            $10::timestamptz[], $11::bytea[], $12::text[], $13::timestamptz[], $14::timestamptz[],
            $15::bigint[], $16::timestamptz[], $17::int[], $18::bigint[], $19::bigint[], $20::timestamptz[], $21::bigint[]` + params + `)
  AS u(run_id, name, tenant, idx, kind, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
       q_id, q_at, q_attempt, s_id, c_id, timeout_at, timeout_us` + cols + `)`
}

// updateTasksSQL updates tasks from arrays; with waits, the columns of
// waits and maps too ($18-$22; an item's input changes only when its map
// step fans out again after a replay).
func updateTasksSQL(waits bool) string {
	set, params, as := "", "", ""
	if waits {
		set = `,
    wait_key = nullif(u.wait_key, ''), child_id = coalesce(u.child_id, t.child_id), items = coalesce(u.items, t.items),
    items_left = coalesce(u.items_left, t.items_left), item_input = coalesce(u.item_input, t.item_input)`
		params = ",\n            $18::text[], $19::uuid[], $20::int[], $21::int[], $22::bytea[]"
		as = ", wait_key, child_id, items, items_left, item_input"
	}
	return `
UPDATE {{schema}}.tasks t
SET state = u.state, attempt = u.attempt, token = u.token, worker = nullif(u.worker, ''), due_at = u.due_at,
    output = CASE WHEN u.state = 'COMPLETED' OR u.attempt = 0 THEN u.output ELSE t.output END,
    error = nullif(u.error, ''), started_at = u.started_at, finished_at = u.finished_at,
    q_id = nullif(u.q_id, 0), q_at = u.q_at, q_attempt = CASE WHEN u.q_id = 0 THEN NULL ELSE u.q_attempt END,
    s_id = nullif(u.s_id, 0), c_id = nullif(u.c_id, 0), timeout_at = u.timeout_at` + set + `
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::timestamptz[], $8::bytea[],
            $9::text[], $10::timestamptz[], $11::timestamptz[],
            $12::bigint[], $13::timestamptz[], $14::int[], $15::bigint[], $16::bigint[], $17::timestamptz[]` + params + `)
  AS u(run_id, name, state, attempt, token, worker, due_at, output, error, started_at, finished_at,
       q_id, q_at, q_attempt, s_id, c_id, timeout_at` + as + `)
WHERE t.run_id = u.run_id AND t.name = u.name`
}

// onConflictNew ends the insert of runs inside a caller's transaction.
const onConflictNew = `
ON CONFLICT DO NOTHING RETURNING id`

// anyPrioritySQL is the SQL of whether any ready task is above the default
// priority: the first entry of the partial index of those, empty unless
// priorities are used. A claim computes it once (an InitPlan), probes lanes
// (notOutranked) only when it holds, and returns it, so that the next claim
// reorders lanes first (reorderLanes).
const anyPrioritySQL = `SELECT EXISTS (SELECT 1 FROM {{schema}}.ready WHERE priority > 0) AS p`

// servedVersion is the SQL of the condition on a ready row r that the
// claimer serves the version of its run: queues, the parameter holding
// the claimer's dag.Queue names, is NULL (every version) or lists the
// row's (dag.ServesQueue; the conformance suite holds the two to the same
// claims).
func servedVersion(queues string) string {
	return "(" + queues + "::text[] IS NULL OR array_position(" + queues + "::text[], r.workflow || '@' || r.version) > 0)"
}

// rateOpen is the SQL of the condition on a ready row r that it may be
// claimed at now: it was not admitted under a rate limit, or the window
// that admitted it has not ended (flow.Expired).
func rateOpen(now string) string {
	return "(r.rate_until IS NULL OR r.rate_until > " + now + ")"
}

// notOutranked is the condition on a ready row r that no row of its lane
// has a higher priority (fairq.Outranks), probed in the partial index of
// rows above the default priority, which is empty unless priorities are
// used. Priorities rank the rows of one version of a workflow in a lane
// (see priority.go).
//
// A correlated subquery with its own LIMIT rather than NOT EXISTS: the
// planner turns NOT EXISTS into an anti join that may read the whole
// partial index per row; the subquery probes it by lane.
const notOutranked = `coalesce((SELECT h.priority FROM {{schema}}.ready h
  WHERE h.priority > 0 AND h.workflow = r.workflow AND h.tenant = r.tenant AND h.version = r.version
  ORDER BY h.priority DESC LIMIT 1), 0) <= r.priority`

// nextTimerSQL is the SQL of the next timer due: the earliest due time
// (sleeps, backoffs, delayed starts), timeout and run deadline, each read
// from its own partial index.
const nextTimerSQL = `least(
  (SELECT min(due_at) FROM {{schema}}.tasks WHERE due_at IS NOT NULL),
  (SELECT min(timeout_at) FROM {{schema}}.tasks WHERE timeout_at IS NOT NULL),
  (SELECT min(deadline_at) FROM {{schema}}.runs WHERE deadline_at IS NOT NULL),
  (SELECT min(rate_until) FROM {{schema}}.ready WHERE rate_until IS NOT NULL))`

// obsoleteFrontier is the condition on a frontier row r whose deletion
// changes no workflow's frontier: for each workflow it serves another row
// serving it is ahead (by block, then shard, so that of two rows tied the
// later shard stays), and it is not the highest row of all.
const obsoleteFrontier = `
NOT EXISTS (
  SELECT 1 FROM unnest(r.workflows) AS w(workflow)
  WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}.frontier r2
    WHERE w.workflow = ANY(r2.workflows) AND (r2.block, r2.shard) > (r.block, r.shard)))
AND EXISTS (SELECT 1 FROM {{schema}}.frontier r3 WHERE (r3.block, r3.shard) > (r.block, r.shard))`

// eventBlockSize is the number of event ids a transaction can number from
// its event block.
const eventBlockSize = 1 << 20

// countShards is the number of rows of run_counts that share one minute,
// workflow, tenant and status: each connection adds to its own (by backend
// PID), so that transactions settling runs at once rarely wait for one
// another.
const countShards = 8

// inflightRuns is the SQL of the IDs of the runs in flight (not settled),
// of the tenant given by the parameter tenant when it is not NULL: every
// such run has a task that is ready, waiting for a timer (a sleep or a
// retry backoff), running, parked behind its concurrency key, or incoming
// (its run created in a caller's transaction), and no settled run has one, since every task of a settled
// run is terminal (dag.Run.checkRun). So the runs in flight are found
// from the queues, whose size is the work in flight, not the history.
func inflightRuns(tenant string) string {
	of := "(" + tenant + "::text IS NULL OR tenant = " + tenant + ")"
	return `SELECT run_id FROM {{schema}}.ready WHERE ` + of + `
UNION SELECT run_id FROM {{schema}}.incoming WHERE ` + of + `
UNION SELECT run_id FROM {{schema}}.concurrency_waiting WHERE ` + of + `
UNION SELECT run_id FROM {{schema}}.tasks WHERE due_at IS NOT NULL AND ` + of + `
UNION SELECT run_id FROM {{schema}}.tasks WHERE state = 'RUNNING' AND ` + of + `
UNION SELECT run_id FROM {{schema}}.tasks WHERE state = 'WAITING' AND ` + of
}

// minuteOf is the SQL of the start of the minute of the timestamptz
// expression ts, as dag.Minute computes it: whole minutes since the Unix
// epoch, whatever the session's time zone.
func minuteOf(ts string) string {
	return `to_timestamp(floor(extract(epoch FROM ` + ts + `) / 60) * 60)`
}
