package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// TestGenericPlansUseIndexes plans every statement of the store as the
// store runs it (a generic plan, prepared once per connection) on a freshly
// migrated, empty schema, and checks that none reads the big tables (runs,
// tasks, events) from end to end.
//
// A connection keeps its plans for its lifetime, so a plan chosen while the
// tables were empty still runs when they hold millions of rows. It caught
// "WHERE id = ANY($1) LIMIT 1", which the planner turned into a sequential
// scan expected to stop at the first match: creating 5,000 runs then took
// 1.3 s of scanning on a 100,000-run table instead of a few milliseconds.
func TestGenericPlansUseIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx) // rolled back: leaves no prepared statements behind
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	stmts := pgstore.Statements(schema)
	analyzeWorkedOff(t, pool, schema)
	leading := leadingColumns(t, pool, schema)
	_, err = tx.Exec(ctx, stmts["genericPlans"]) // as every transaction of the store starts
	require.NoError(t, err)
	requireNoParallelWorkers(t, tx)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range stmts {
			if !yield(n) {
				return
			}
		}
	})
	require.Greater(t, len(names), 30, "the statements were not found")
	bigTables := regexp.MustCompile(`Seq Scan on (runs|tasks|events|ready|incoming)(?:_\w+)?\b`)
	hashOrMerge := regexp.MustCompile(`(Hash|Merge) (Semi |Anti )?Join`)
	param := regexp.MustCompile(`\$(\d+)`)
	for i, name := range names {
		sql := stmts[name]
		n := 0
		for _, m := range param.FindAllStringSubmatch(sql, -1) {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
		stmt := fmt.Sprintf("p%d", i)
		plans := "genericPlans" // as every transaction of the store starts
		if strings.HasPrefix(name, "stats") {
			plans = "queuePlans"
		}
		_, err := tx.Exec(ctx, "SELECT set_config('enable_bitmapscan', 'on', true)")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, stmts[plans])
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "PREPARE "+stmt+" AS "+sql)
		require.NoError(t, err, "%s: prepare", name)
		args := strings.TrimSuffix(strings.Repeat("NULL,", n), ",")
		explain := "EXPLAIN EXECUTE " + stmt
		if n > 0 {
			explain += "(" + args + ")"
		}
		rows, err := tx.Query(ctx, explain)
		require.NoError(t, err, "%s: explain", name)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, "%s: explain", name)
		plan := strings.Join(lines, "\n")
		if m := bigTables.FindStringSubmatch(plan); m != nil && wholeTableReads[name] != m[1] {
			t.Errorf("%s scans a whole table:\n%s\n%s", name, sql, plan)
		}
		if scan := unkeyedScan(lines, leading); scan != "" && !orderedWalks[name] &&
			!(queueWalks[name] != "" && strings.Contains(scan, " on "+queueWalks[name]+" ")) {
			t.Errorf("%s reads a table whole through an index (no Index Cond): %s\n%s\n%s", name, scan, sql, plan)
		}
		if m := runsNotByID(plan); m != "" && strings.HasPrefix(name, "stats") {
			t.Errorf("%s reads runs other than by ID (%s): the tasks in flight must drive the join\n%s\n%s", name, m, sql, plan)
		}
		if m := hashOrMerge.FindString(plan); m != "" {
			t.Errorf("%s reads a table whole into a %s:\n%s\n%s", name, m, sql, plan)
		}
		if plans == "queuePlans" && strings.Contains(plan, "Bitmap") {
			t.Errorf("%s reads a queue through a bitmap:\n%s\n%s", name, sql, plan)
		}
		if strings.Contains(plan, "JIT:") {
			t.Errorf("%s would be JIT-compiled at every execution:\n%s\n%s", name, sql, plan)
		}
	}
}

// runsNotByID returns the first scan of runs in an EXPLAIN output that is
// not through its primary key, or "". The stats find the runs in flight
// from the queues and the partial indexes of tasks, then look each run up
// by ID: a plan that walks runs instead (say, in workflow order, to skip a
// sort, probing a materialized list of the tasks for each run) reads the
// whole history, and took 9.6 s on 1,000,000 runs with 300 waiting.
func runsNotByID(plan string) string {
	scan := regexp.MustCompile(`(?:Seq Scan on runs(?:_\w+)?\b|Scan (?:Backward )?using (\S+) on runs(?:_\w+)?\b)`)
	for _, m := range scan.FindAllStringSubmatch(plan, -1) {
		if !regexp.MustCompile(`^runs(_\w+)?_pkey$`).MatchString(m[1]) { // a partition's
			return m[0]
		}
	}
	return ""
}

// unkeyedScan returns the first index scan of one of the big tables in an
// EXPLAIN output whose Index Cond does not bound the index's first column
// (leading, the first column of each index): one that reads the whole
// index, the planner's choice for a table it takes for empty; or "".
func unkeyedScan(lines []string, leading map[string]string) string {
	scan := regexp.MustCompile(`(?:Index|Index Only|Bitmap Index) Scan (?:Backward )?(?:using|on) (\S+) on (?:runs|tasks|events|ready|incoming)(?:_\w+)?\b`)
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ->")) }
	for i, l := range lines {
		m := scan.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		first := regexp.MustCompile(`\b` + regexp.QuoteMeta(leading[m[1]]) + `\b`)
		keyed := false
		for _, d := range lines[i+1:] {
			if indent(d) <= indent(l) || strings.Contains(d, "->") {
				break
			}
			keyed = keyed || (strings.Contains(d, "Index Cond:") && first.MatchString(d))
		}
		if !keyed {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// leadingColumns maps each index of the schema to its first column.
func leadingColumns(t *testing.T, pool *pgxpool.Pool, schema string) map[string]string {
	t.Helper()
	rows, err := pool.Query(ctx, `
SELECT c.relname, a.attname FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE n.nspname = $1`, schema)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var idx, col string
		require.NoError(t, rows.Scan(&idx, &col))
		out[idx] = col
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out)
	return out
}

// orderedWalks are the statements allowed to read an index from its start
// without a key: those that walk a queue in its order and stop at a LIMIT
// or at the first row (the claim, incoming runs, the next timer), and
// those that read the partial index of RUNNING tasks, whose size is the
// fleet's concurrency, not the history (heartbeats, stats). lockReady is
// the slow path of a transition that raced a claim, taken again with the
// run's ready rows locked in claim order.
var orderedWalks = map[string]bool{
	"claim": true, "takeIncoming": true, "leaderCheck": true, "nextTimer": true, "timerCheck": true,
	"heartbeatTasks": true, "statsTasks": true, "statsInflight": true, "lockReady": true,
	// The head of the queue for a reorder by priority, as the claim walks
	// it; whether any ready task is above the default priority (the first
	// entry of the partial index of those).
	"reorderHead": true, "anyPriority": true,
	// The claims probe that index for its first entry (anyPrioritySQL).
	"claimIDs": true,
}

// analyzeWorkedOff leaves the queue tables' statistics as autovacuum
// finds them whenever the workers have caught up: ready and incoming held
// rows, hold none now, and were vacuumed and analyzed then. The planner
// takes them for empty until the next ANALYZE, however much they hold by
// then, and a generic plan made meanwhile is kept: with these statistics a
// settle-path delete from a queue table (a table of the runs in flight,
// since removed) read the whole table at each settlement (seconds at
// 250,000 runs in flight, so that the backlog grew until the next ANALYZE,
// a minute later).
func analyzeWorkedOff(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	q := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	for _, sql := range []string{
		`INSERT INTO ` + q("ready") + ` (id, run_id, name, workflow, tenant)
		 SELECT g, gen_random_uuid(), 'a', 'wf', 't' FROM generate_series(1, 5000) g`,
		`INSERT INTO ` + q("incoming") + ` (run_id, name, workflow, tenant)
		 SELECT gen_random_uuid(), 'a', 'wf', 't' FROM generate_series(1, 5000)`,
		`DELETE FROM ` + q("ready"),
		`DELETE FROM ` + q("incoming"),
		`VACUUM (ANALYZE) ` + q("ready") + `, ` + q("incoming"),
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
}

// requireNoParallelWorkers: the store's statements plan no parallel
// workers. An empty schema never gets a parallel plan, so the setting is
// checked rather than the plans: on 200,000 runs with the dead index
// entries of their settled runs, the first page of the runs in flight took
// a parallel plan and 60-100 ms, most of it starting the workers; 0.3 ms
// without.
func requireNoParallelWorkers(t *testing.T, tx pgx.Tx) {
	t.Helper()
	var workers string
	require.NoError(t, tx.QueryRow(ctx, "SHOW max_parallel_workers_per_gather").Scan(&workers))
	require.Equal(t, "0", workers)
}

// wholeTableReads are the statements allowed to read one of the big tables
// whole, each for a reason: the stats count the ready queue, whose size is
// the backlog (not the history), and the runs in flight; no index on them
// is worth its cost on the claim and settle paths.
var wholeTableReads = map[string]string{"statsReady": "ready", "statsInflight": "ready"}

// queueWalks are the statements allowed to walk a small queue whole
// through an index, as queuePlans makes the reads of whole queues do: the
// stats count the incoming rows (runs created in callers' transactions,
// until promoted) as ready.
var queueWalks = map[string]string{"statsReady": "incoming"}

// TestOrderedStatementsDoNotSort: statements that take the first rows in
// an order read them in that order from an index, so that their LIMIT reads
// only the rows they return: 100,000 timers due at one instant once made every
// FireTimers call read and sort all of them (6.3 s to fire them, 2.3 s with
// the index on (due_at, run_id, idx)).
func TestOrderedStatementsDoNotSort(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	stmts := pgstore.Statements(schema)
	_, err = tx.Exec(ctx, stmts["genericPlans"])
	require.NoError(t, err)
	for name, args := range map[string]string{"dueTimers": "(NULL, 1000, NULL)"} {
		sql := stmts[name]
		_, err := tx.Exec(ctx, "PREPARE ordered_"+name+" AS "+sql)
		require.NoError(t, err, name)
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE ordered_"+name+args)
		require.NoError(t, err, name)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, name)
		plan := strings.Join(lines, "\n")
		// An incremental sort streams: it sorts only the rows that share
		// its presorted key (timers of one run due at one instant), so the
		// LIMIT still stops the index scans early.
		require.NotRegexp(t, `(?m)^\s*(->\s+)?Sort\s+\(`, plan, "%s sorts:\n%s", name, plan)
	}
}

// TestListQueriesUseIndexes plans the queries of ListRuns, for every kind of
// filter, with and without a cursor, as generic plans on an empty schema:
// each walks an index newest first, neither scanning the runs table whole
// nor sorting it, so that the first and a deep page cost the same however
// many runs are kept.
func TestListQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	analyzeWorkedOff(t, pool, schema)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cursor := &store.RunKey{CreatedAt: now, ID: uuid.New()}
	filters := map[string]store.RunFilter{
		"all":            {},
		"tenant":         {Tenant: "acme"},
		"workflow":       {Workflow: "wf"},
		"failed":         {Statuses: []durabletype.RunStatus{durabletype.RunFailed}},
		"unsuccessful":   {Statuses: []durabletype.RunStatus{durabletype.RunFailed, durabletype.RunCancelled}},
		"running":        {Statuses: []durabletype.RunStatus{durabletype.RunRunning}},
		"completed":      {Statuses: []durabletype.RunStatus{durabletype.RunCompleted}},
		"tenant running": {Tenant: "acme", Statuses: []durabletype.RunStatus{durabletype.RunRunning}},
		"created":        {CreatedAfter: now.Add(-time.Hour), CreatedBefore: now},
		"finished":       {FinishedAfter: now.Add(-time.Hour)},
		"tenant failed since": {Tenant: "acme", Statuses: []durabletype.RunStatus{durabletype.RunFailed},
			CreatedAfter: now.Add(-24 * time.Hour)},
		"children":           {Parent: uuid.New()},
		"top-level":          {TopLevel: true},
		"tenant top-level":   {Tenant: "acme", TopLevel: true},
		"failed top-level":   {Statuses: []durabletype.RunStatus{durabletype.RunFailed}, TopLevel: true},
		"running top-level":  {Statuses: []durabletype.RunStatus{durabletype.RunRunning}, TopLevel: true},
		"idempotency key":    {IdempotencyKey: "inv-1"},
		"tenant key":         {Tenant: "acme", IdempotencyKey: "inv-1"},
		"workflow key":       {Workflow: "wf", IdempotencyKey: "inv-1"},
		"input":              {InputContains: []byte(`{"customer":"c-42"}`)},
		"workflow input":     {Workflow: "wf", InputContains: []byte(`{"customer":"c-42"}`)},
		"tenant running key": {Tenant: "acme", Statuses: []durabletype.RunStatus{durabletype.RunRunning}, IdempotencyKey: "inv-1"},
	}
	i := 0
	for name, f := range filters {
		for _, after := range []*store.RunKey{nil, cursor} {
			sql, args, inflight, err := pgstore.ListQuery(s, &store.ListRunsParams{Filter: f, After: after, Limit: 50})
			require.NoError(t, err)
			require.Equal(t, slices.Equal(f.Statuses, []durabletype.RunStatus{durabletype.RunRunning}), inflight, name)
			plans := "listPlans"
			if inflight {
				plans = "queuePlans"
			}
			_, err = tx.Exec(ctx, pgstore.Statements(schema)[plans])
			require.NoError(t, err)
			requireNoParallelWorkers(t, tx)
			i++
			stmt := fmt.Sprintf("list%d", i)
			_, err = tx.Exec(ctx, "PREPARE "+stmt+" AS "+sql)
			require.NoError(t, err, "%s: prepare %s", name, sql)
			// EXPLAIN EXECUTE with the real arguments, written as literals.
			params := make([]string, len(args))
			for k, a := range args {
				switch v := a.(type) {
				case string:
					params[k] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
				case time.Time:
					params[k] = "'" + v.Format(time.RFC3339Nano) + "'::timestamptz"
				case [16]byte:
					params[k] = "'" + uuid.UUID(v).String() + "'::uuid"
				case int:
					params[k] = strconv.Itoa(v)
				default:
					t.Fatalf("%s: an argument of type %T", name, a)
				}
			}
			rows, err := tx.Query(ctx, "EXPLAIN EXECUTE "+stmt+"("+strings.Join(params, ", ")+")")
			require.NoError(t, err, "%s: explain", name)
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err, "%s: explain", name)
			plan := strings.Join(lines, "\n")
			require.NotRegexp(t, `Seq Scan on runs(_\w+)?\b`, plan, "%s (cursor %v) scans a table whole:\n%s\n%s", name, after != nil, sql, plan)
			require.NotRegexp(t, `(Hash|Merge) Join`, plan, "%s (cursor %v) joins whole tables:\n%s\n%s", name, after != nil, sql, plan)
			if inflight {
				// The runs in flight, found from the queues, read by key and
				// sorted: never a walk of the runs kept.
				require.Regexp(t, `Index Scan using runs(_\w+)?_pkey on runs(_\w+)? r[^\n]*\n\s+Index Cond: \(id = ANY`, plan,
					"%s (cursor %v) reads runs by key:\n%s\n%s", name, after != nil, sql, plan)
				require.NotRegexp(t, `using runs_(\w+_)?(tenant_)?created_idx`, plan, "%s (cursor %v) walks the runs kept:\n%s", name, after != nil, plan)
				require.NotContains(t, plan, "Bitmap", "%s (cursor %v) reads a queue through a bitmap:\n%s", name, after != nil, plan)
				continue
			}
			require.NotRegexp(t, `(?m)^\s*(->\s+)?(Incremental )?Sort\b`, plan, "%s (cursor %v) sorts:\n%s\n%s", name, after != nil, sql, plan)
			if f.IdempotencyKey != "" {
				// A run is found by its key through the index of keys,
				// whatever else the filter names.
				require.Regexp(t, `runs(_\w+)?_idem_key_created_idx`, plan, "%s (cursor %v):\n%s\n%s", name, after != nil, sql, plan)
			}
		}
	}
}

// TestSettlingRunsIsHOT: no index of runs covers a column that settling a
// run writes (in its key, an expression or a predicate), so that a run that
// completes is a heap-only update when its page has room: every such index
// would take a new entry per settled run (19% fewer runs/s in `durable
// bench --scenario single`, measured when partial indexes on status and
// finished_at were tried). unsuccessful is the exception by design: it
// changes only when a run fails, is cancelled or is replayed.
func TestSettlingRunsIsHOT(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	rows, err := pool.Query(ctx, `
SELECT i.indexrelid::regclass::text, a.attname
FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum > 0 AND NOT a.attisdropped
WHERE i.indrelid = $1::regclass
  AND (a.attnum = ANY(i.indkey)
       OR pg_get_expr(i.indpred, i.indrelid) ~ ('\m' || a.attname || '\M')
       OR pg_get_expr(i.indexprs, i.indrelid) ~ ('\m' || a.attname || '\M'))`,
		pgx.Identifier{schema, "runs"}.Sanitize())
	require.NoError(t, err)
	covered := map[string][]string{}
	for rows.Next() {
		var index, column string
		require.NoError(t, rows.Scan(&index, &column))
		covered[column] = append(covered[column], index)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, covered["id"], "the query found the primary key")
	require.NotEmpty(t, covered["unsuccessful"], "the query reads predicates")
	for _, col := range []string{"status", "finished_at", "error", "failed_step"} {
		require.Empty(t, covered[col], "settling a run writes %s, which these indexes cover", col)
	}
	var fillfactor string
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class WHERE oid = $1::regclass`,
		pgx.Identifier{schema, "runs_default"}.Sanitize()).Scan(&fillfactor))
	require.Equal(t, "fillfactor=40", fillfactor, "room on each page for the settled version of its runs")
}

// TestStoreTransactionsTimeOutIdle: every transaction of the store's ends
// its session once idle for 10 s (a process stopped mid-transaction), so the
// runs it locked do not hold up everyone else; the setting is the
// transaction's own and does not outlive it on the pooled connection.
func TestStoreTransactionsTimeOutIdle(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	stmts := pgstore.Statements(schema)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, stmts["genericPlans"])
	require.NoError(t, err)
	var v string
	require.NoError(t, tx.QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout')").Scan(&v))
	require.Equal(t, "10s", v)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout')").Scan(&v))
	require.Equal(t, "0", v, "a caller's later transaction on the connection is not limited")

	// The mechanism, shortened: a stopped holder of a lock loses its
	// session, and the waiter gets the lock.
	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	htx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = htx.Exec(ctx, stmts["genericPlans"])
	require.NoError(t, err)
	// One statement: a pause between the two would end the session before
	// it took the lock.
	_, err = htx.Exec(ctx, "SELECT pg_advisory_xact_lock(4242), set_config('idle_in_transaction_session_timeout', '200ms', true)")
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = pool.Exec(wctx, "SELECT pg_advisory_lock(4242), pg_advisory_unlock(4242)")
	require.NoError(t, err, "the idle holder's session ended and released its lock")
	require.Error(t, htx.Commit(ctx), "the holder's session is gone")
}
