package pgstore_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// period is a row of history_partitions.
type period struct {
	Lo, Hi uuid.UUID
	Suffix string
}

func periods(t *testing.T, pool *pgxpool.Pool, schema string) []period {
	t.Helper()
	rows, err := pool.Query(ctx, "SELECT lo, hi, suffix FROM "+pgx.Identifier{schema, "history_partitions"}.Sanitize()+" ORDER BY lo")
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[period])
	require.NoError(t, err)
	return out
}

// partitionOf is the partition of table holding the rows of run id.
func partitionOf(t *testing.T, pool *pgxpool.Pool, schema, table string, id uuid.UUID) string {
	t.Helper()
	col := "run_id"
	if table == "runs" {
		col = "id"
	}
	var name string
	require.NoError(t, pool.QueryRow(ctx, "SELECT DISTINCT tableoid::regclass::text FROM "+pgx.Identifier{schema, table}.Sanitize()+
		" WHERE "+col+" = $1", id).Scan(&name))
	return name
}

func dbNow(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT now()").Scan(&now))
	return now
}

// TestHistoryPeriods: the leader's retention creates the periods'
// partitions ahead; runs with time-ordered ids (the engine's) land in their
// period's partitions with their tasks and events, the others (a caller's
// UUIDv4) in the default partitions; both work through claims and
// outcomes, the period's through statements naming its partitions. Once a
// period has expired, retention drops its partitions whole: its settled
// runs are gone with their keys, while a run still in flight moves to the
// default partition, keeps its key, and goes on, even for a store that
// still knew the dropped partitions.
func TestHistoryPeriods(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	other, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	const retention = time.Hour // periods of 15 minutes
	now := dbNow(t, pool)
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, schema)
	require.Len(t, ps, 2, "the next two periods (the current one's runs are in the default partition)")
	require.Equal(t, ps[0].Hi, ps[1].Lo)
	start := now.Truncate(15 * time.Minute).Add(15 * time.Minute)
	require.Equal(t, dag.TimeOrderedID(uuid.UUID{}, start).String()[:13], ps[0].Lo.String()[:13])
	require.Equal(t, dag.TimeOrderedID(uuid.UUID{}, start.Add(15*time.Minute)).String()[:13], ps[0].Hi.String()[:13])
	in := start.Add(time.Minute) // a time of the period: its runs' IDs
	for _, table := range []string{"runs", "tasks", "events"} {
		// The partitions' indexes are the partitioned tables', made
		// before the attach adopts them: none missing, none extra.
		var parent, adopted, stray int
		require.NoError(t, pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM pg_index WHERE indrelid = $1::regclass),
       (SELECT count(*) FROM pg_index i JOIN pg_inherits h ON h.inhrelid = i.indexrelid WHERE i.indrelid = $2::regclass),
       (SELECT count(*) FROM pg_index i WHERE i.indrelid = $2::regclass AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.indexrelid))`,
			pgx.Identifier{schema, table}.Sanitize(), pgx.Identifier{schema, table + "_" + ps[0].Suffix}.Sanitize()).Scan(&parent, &adopted, &stray))
		require.Positive(t, parent, table)
		require.Equal(t, parent, adopted, table)
		require.Zero(t, stray, table)
	}

	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	mk := func(id uuid.UUID, key string) store.NewRun {
		r := newRun("wf", "t", sh)
		r.ID, r.IdempotencyKey = id, key
		return r
	}
	done := mk(dag.TimeOrderedID(uuid.New(), in), "done-key")
	flying := mk(dag.TimeOrderedID(uuid.New(), in), "flying-key")
	legacy := mk(uuid.New(), "")
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{done, flying, legacy}})))
	part := "runs_" + ps[0].Suffix
	for _, id := range []uuid.UUID{done.ID, flying.ID} {
		require.Equal(t, schema+"."+part, partitionOf(t, pool, schema, "runs", id))
		require.Equal(t, schema+"."+"tasks_"+ps[0].Suffix, partitionOf(t, pool, schema, "tasks", id))
	}
	require.Equal(t, schema+"."+"runs_default", partitionOf(t, pool, schema, "runs", legacy.ID))

	// done and legacy complete; flying is claimed by the other store, which
	// reads the periods as it finishes nothing yet.
	cs := claimAll(t, s, "wf", 10)
	require.Len(t, cs, 3)
	var outs []store.Outcome
	var flyingClaim *store.ClaimedTask
	for _, c := range cs {
		if c.RunID == flying.ID {
			flyingClaim = c
			continue
		}
		outs = append(outs, complete(c))
	}
	_, err = s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: outs})
	require.NoError(t, err)
	_, err = other.Heartbeat(ctx, &store.HeartbeatParams{Tasks: []store.TaskRef{flyingClaim.Ref()}})
	require.NoError(t, err)
	for _, id := range []uuid.UUID{done.ID, legacy.ID} {
		r, err := s.GetRun(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, r.Status)
	}

	// An hour after its end, the period has expired.
	later := timeOfBound(ps[0].Hi).Add(retention + time.Second)
	res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: later, OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.Equal(t, 2, res.Deleted, "done, with its period; legacy, row by row")
	for _, p := range ps[:1] {
		var gone bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NULL", pgx.Identifier{schema, "runs_" + p.Suffix}.Sanitize()).Scan(&gone))
		require.True(t, gone, "runs_%s is dropped", p.Suffix)
	}
	require.NotContains(t, periods(t, pool, schema), ps[0])
	require.Empty(t, goneTables(t, pool, schema), "the renamed partitions are dropped")
	_, err = s.GetRun(ctx, done.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	_, err = s.GetRun(ctx, legacy.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	require.Equal(t, schema+"."+"runs_default", partitionOf(t, pool, schema, "runs", flying.ID))
	require.Equal(t, schema+"."+"tasks_default", partitionOf(t, pool, schema, "tasks", flying.ID))

	// done's key is free again; flying's is still taken.
	again := mk(dag.TimeOrderedID(uuid.New(), in), "done-key")
	dup := mk(dag.TimeOrderedID(uuid.New(), in), "flying-key")
	cr, err := s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{again, dup}})
	require.NoError(t, err)
	require.False(t, cr.Runs[0].Duplicate)
	require.True(t, cr.Runs[1].Duplicate)
	require.Equal(t, flying.ID, cr.Runs[1].ID)

	// The other store still routes flying's statements to the dropped
	// partitions: its first try may fail, as a transient error, and the
	// next goes through the parent tables.
	var fin []store.FinishResult
	for try := 0; ; try++ {
		fin, err = other.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{complete(flyingClaim)}})
		if err == nil || try == 1 {
			break
		}
		require.ErrorIs(t, err, durabletype.ErrTransient)
	}
	require.NoError(t, err)
	require.Equal(t, store.FinishApplied, fin[0].Status)
	r, err := s.GetRun(ctx, flying.ID)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, r.Status)
}

// goneTables lists the tables of schema whose names end in _gone.
func goneTables(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	return names(t, pool, `SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename LIKE '%\_gone' ORDER BY 1`, schema)
}

// names runs a query of one text column in schema and returns its rows.
func names(t *testing.T, pool *pgxpool.Pool, sql, schema string) []string {
	t.Helper()
	rows, err := pool.Query(ctx, sql, schema)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// TestHistoryDropsWhatADropLeft: a drop detaches and renames a period's
// partitions in one transaction and drops them in a second; when the
// second never happens (the process died between the two), the next pass
// drops them, and leaves alone the tables that are not a period's.
func TestHistoryDropsWhatADropLeft(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const retention = time.Hour
	_, err := s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, schema)
	require.NotEmpty(t, ps)
	id := pgx.Identifier{schema}.Sanitize()
	var first []string
	for _, table := range []string{"runs", "tasks", "events"} {
		part := table + "_" + ps[0].Suffix
		first = append(first,
			`ALTER TABLE `+id+`.`+table+` DETACH PARTITION `+id+`.`+part,
			`ALTER TABLE `+id+`.`+part+` RENAME TO `+part+`_gone`)
	}
	first = append(first,
		`DELETE FROM `+id+`.history_partitions WHERE suffix = '`+ps[0].Suffix+`'`,
		`CREATE TABLE `+id+`.mine_gone (x int)`) // not a period's: kept
	for _, q := range first {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	require.Len(t, goneTables(t, pool, schema), 4)
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.Equal(t, []string{"mine_gone"}, goneTables(t, pool, schema))
}

// freeConstraints lists the constraints of the default partitions that
// exclude a period's range (made before a period is attached).
func freeConstraints(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	return names(t, pool, `SELECT c.conname::text FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
JOIN pg_namespace n ON n.oid = r.relnamespace WHERE n.nspname = $1 AND c.conname LIKE '%\_free\_%' ORDER BY 1`, schema)
}

// TestHistoryFreeConstraints: before a period's partitions are attached,
// the default partitions get a validated constraint excluding its range,
// so that the attach need not read them under the lock. While one is
// there, a run whose id falls in that range fails as a transient error
// and loses nothing; a pass drops the constraints a creation left behind
// (its process died) before it makes the period, and none is left after.
func TestHistoryFreeConstraints(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const retention = time.Hour // periods of 15 minutes
	now := dbNow(t, pool)
	start := now.Truncate(15 * time.Minute).Add(15 * time.Minute)
	lo, hi := dag.TimeOrderedID(uuid.UUID{}, start), dag.TimeOrderedID(uuid.UUID{}, start.Add(15*time.Minute))
	for i := 6; i < 16; i++ { // the bounds: 48 bits of time, zeros after

		lo[i], hi[i] = 0, 0
	}
	suffix := "p" + start.UTC().Format("20060102t150405")
	id := pgx.Identifier{schema}.Sanitize()
	// What a creation that died left: the constraints of the period the
	// pass makes first, and one of a period it never made.
	for _, q := range []string{
		`ALTER TABLE ` + id + `.runs_default ADD CONSTRAINT runs_default_free_` + suffix + ` CHECK (id < '` + lo.String() + `' OR id >= '` + hi.String() + `') NOT VALID`,
		`ALTER TABLE ` + id + `.tasks_default ADD CONSTRAINT tasks_default_free_p20990101t000000 CHECK (run_id < '` + lo.String() + `')`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	require.Len(t, freeConstraints(t, pool, schema), 2)

	// While runs_default excludes the period's range, a run with an id in
	// it cannot be recorded there: a transient error, then it goes in
	// once the period is made.
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	ahead := newRun("wf", "t", sh)
	ahead.ID = dag.TimeOrderedID(uuid.New(), start.Add(time.Minute))
	_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{ahead}})
	require.ErrorIs(t, err, durabletype.ErrTransient)

	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, schema)
	require.Len(t, ps, 2)
	require.Equal(t, suffix, ps[0].Suffix)
	require.Empty(t, freeConstraints(t, pool, schema))

	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{ahead}})))
	require.Equal(t, schema+".runs_"+suffix, partitionOf(t, pool, schema, "runs", ahead.ID))
}

// timeOfBound is the time of a period's bound (UUIDv7 layout).
func timeOfBound(u uuid.UUID) time.Time {
	var ms int64
	for _, b := range u[:6] {
		ms = ms<<8 | int64(b)
	}
	return time.UnixMilli(ms)
}

// TestHistoryPeriodTakesItsRuns: runs recorded in the default partition
// with IDs in a period's range before it exists (a caller's IDs, a clock
// ahead) move into its partitions when it is made, with their tasks, and
// go on; the partitions keep the tables' fillfactor.
func TestHistoryPeriodTakesItsRuns(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	now := dbNow(t, pool)
	in := now.Truncate(15 * time.Minute).Add(16 * time.Minute) // in the next period
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	early := newRun("wf", "t", sh)
	early.ID = dag.TimeOrderedID(early.ID, in)
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{early}})))
	require.Equal(t, schema+".runs_default", partitionOf(t, pool, schema, "runs", early.ID))

	_, err := s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: time.Hour, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, schema)
	require.Len(t, ps, 2)
	require.Equal(t, schema+".runs_"+ps[0].Suffix, partitionOf(t, pool, schema, "runs", early.ID))
	require.Equal(t, schema+".tasks_"+ps[0].Suffix, partitionOf(t, pool, schema, "tasks", early.ID))
	for _, tb := range []string{"runs", "tasks"} {
		var opts string
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class WHERE oid = $1::regclass`,
			pgx.Identifier{schema, tb + "_" + ps[0].Suffix}.Sanitize()).Scan(&opts))
		require.Equal(t, "fillfactor=40", opts, tb)
	}
	cs := claimAll(t, s, "wf", 10)
	require.Len(t, cs, 1)
	_, err = s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{complete(cs[0])}})
	require.NoError(t, err)
	r, err := s.GetRun(ctx, early.ID)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, r.Status)
}

// waitingOn is the backend waiting for a lock on the relation rel (a
// schema-qualified name), or 0 while none is.
func waitingOn(t *testing.T, pool *pgxpool.Pool, rel string) int {
	t.Helper()
	var pid int
	err := pool.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'relation' AND relation = $1::regclass AND NOT granted LIMIT 1`, rel).Scan(&pid)
	if err == pgx.ErrNoRows {
		return 0
	}
	require.NoError(t, err)
	return pid
}

// TestClaimLocksTasksFirst: a claim locks the partitioned table tasks
// before runs. A period change takes their locks in that order
// (lockHistoryParents in sql/history.sql): should the claim change its
// order, the change must follow.
func TestClaimLocksTasksFirst(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{newRun("wf", "t", sh)}})))
	runs, tasks := pgx.Identifier{schema, "runs"}.Sanitize(), pgx.Identifier{schema, "tasks"}.Sanitize()

	hold, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, "LOCK TABLE ONLY "+runs+" IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	claimed := make(chan []*store.ClaimedTask, 1)
	go func() {
		cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: "w", Limit: 10, Workflows: []string{"wf"}})
		assert.NoError(t, err)
		claimed <- cs
	}()
	var pid int
	require.Eventually(t, func() bool { pid = waitingOn(t, pool, runs); return pid != 0 }, time.Minute, time.Millisecond, "the claim waits for runs")
	var holds bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'relation' AND relation = $2::regclass AND granted)`,
		pid, tasks).Scan(&holds))
	require.True(t, holds, "the claim waiting for runs holds tasks")
	require.NoError(t, hold.Rollback(ctx))
	require.Len(t, <-claimed, 1)
}

// TestHistoryLockOrder: a period change (creation, then drop) takes the
// partitioned tables in the claims' order. While it waits for tasks,
// which a claim under way holds, it holds nothing that claim goes on to
// need (runs): the claim finishes and the change goes through. In the
// other order the two waited for each other until the change's
// lock_timeout, holding up every statement behind them.
func TestHistoryLockOrder(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const retention = time.Hour // periods of 15 minutes
	runs, tasks := pgx.Identifier{schema, "runs"}.Sanitize(), pgx.Identifier{schema, "tasks"}.Sanitize()
	// holding begins a transaction that locks table in mode, then starts a
	// pass of retention at now, and waits until a lock on waitedFor
	// waits: the pass's change, behind the transaction.
	holding := func(table, mode string, now time.Time, waitedFor string) (pgx.Tx, chan error) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		_, err = tx.Exec(ctx, "LOCK TABLE ONLY "+table+" IN "+mode+" MODE")
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: now, OlderThan: retention, Limit: 500, Lazy: true})
			done <- err
		}()
		require.Eventually(t, func() bool { return waitingOn(t, pool, waitedFor) != 0 }, time.Minute, time.Millisecond, "the change waits for %s", waitedFor)
		return tx, done
	}
	// change runs one pass of retention at now while a claim-like
	// transaction holds tasks, and checks that the transaction can then
	// lock runs at once.
	change := func(now time.Time) {
		claim, done := holding(tasks, "ROW EXCLUSIVE", now, tasks)
		_, err := claim.Exec(ctx, "LOCK TABLE ONLY "+runs+" IN ACCESS SHARE MODE NOWAIT")
		require.NoError(t, err, "the change waiting for tasks holds runs")
		require.NoError(t, claim.Commit(ctx))
		require.NoError(t, <-done)
	}
	change(time.Time{})
	ps := periods(t, pool, schema)
	require.Len(t, ps, 2)
	later := timeOfBound(ps[0].Hi).Add(retention + time.Second)
	change(later)
	require.NotContains(t, periods(t, pool, schema), ps[0], "the first period is dropped")

	// A transaction that takes runs before tasks (a create whose runs no
	// period holds) and then waits for the change's tasks: the change
	// gives way, the transaction goes on, and the change goes through
	// later.
	create, done := holding(runs, "ROW EXCLUSIVE", later.Add(30*time.Minute), runs)
	_, err := create.Exec(ctx, "LOCK TABLE ONLY "+tasks+" IN ROW EXCLUSIVE MODE")
	require.NoError(t, err, "the change gave way")
	require.NoError(t, create.Commit(ctx))
	require.NoError(t, <-done)
	// The pass has dropped the period on a later try, or (on a slow
	// machine, out of tries) leaves it to the next pass.
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{Now: later.Add(30 * time.Minute), OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.NotContains(t, periods(t, pool, schema), ps[1], "the second period is dropped")
}
