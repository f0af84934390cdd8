package pgstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// queueFile is a queue table's file: it changes when the table is
// truncated.
func queueFile(t *testing.T, pool *pgxpool.Pool, schema, table string) (file uint32) {
	t.Helper()
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_relation_filenode($1::regclass)", pgx.Identifier{schema, table}.Sanitize()).Scan(&file))
	return file
}

// deadRows is what the statistics collector counts of a table's dead rows.
func deadRows(t *testing.T, pool *pgxpool.Pool, schema, table string) (n int64) {
	t.Helper()
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_stat_get_dead_tuples($1::regclass)", pgx.Identifier{schema, table}.Sanitize()).Scan(&n))
	return n
}

// leaderPass runs the leader's periodic pass once, rescuing nothing.
func leaderPass(t *testing.T, s *pgstore.Store) {
	t.Helper()
	_, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: t0, DeadAfter: time.Hour, Limit: 1000})
	require.NoError(t, err)
}

// createOneStepRuns creates n one-step runs of wf, in batches.
func createOneStepRuns(t *testing.T, s *pgstore.Store, wf string, n int) []uuid.UUID {
	t.Helper()
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	var ids []uuid.UUID
	for len(ids) < n {
		var batch []store.NewRun
		for range min(1000, n-len(ids)) {
			r := newRun(wf, "t", sh)
			batch = append(batch, r)
			ids = append(ids, r.ID)
		}
		require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: batch})))
	}
	return ids
}

// TestRecycleQueue: once the ready queue holds many dead rows and few live
// ones, the leader's pass recycles it whole (a new file: nothing left to
// vacuum), and the rows that were live are still there, claimable once
// each, with their fair-queue ids.
func TestRecycleQueue(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	createOneStepRuns(t, s, "wf", 20_000)
	// Claim all but a few: 19,990 dead rows (past a megabyte), 10 live.
	var claimed int
	for claimed < 19_990 {
		cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: "w", Limit: min(1000, 19_990-claimed), Workflows: []string{"wf"}})
		require.NoError(t, err)
		require.NotEmpty(t, cs)
		claimed += len(cs)
	}
	ready := pgx.Identifier{schema, "ready"}.Sanitize()
	type row struct {
		ID   int64
		Run  uuid.UUID
		Name string
	}
	readRows := func() []row {
		rows, err := pool.Query(ctx, "SELECT id, run_id, name FROM "+ready+" ORDER BY id")
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		require.NoError(t, err)
		return out
	}
	before := readRows()
	require.Len(t, before, 10)
	file := queueFile(t, pool, schema, "ready")

	// The collector's counts reach it within a second or so of the
	// deletes; until then the pass leaves the table alone.
	require.Eventually(t, func() bool { return deadRows(t, pool, schema, "ready") >= 19_000 }, 30*time.Second, 50*time.Millisecond)
	leaderPass(t, s)
	require.NotEqual(t, file, queueFile(t, pool, schema, "ready"), "the ready queue was not recycled")
	require.Equal(t, before, readRows())
	var pages int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_relation_size($1::regclass) / 8192", ready).Scan(&pages))
	require.LessOrEqual(t, pages, int64(1), "the recycled queue keeps only its live rows")

	// Still claimable, once each.
	cs := claimAll(t, s, "wf", 100)
	require.Len(t, cs, 10)
	for i, c := range cs {
		require.Equal(t, before[i].Run, c.RunID)
		require.Equal(t, before[i].ID, c.Token)
	}

	// A table with few dead rows is left alone.
	file = queueFile(t, pool, schema, "ready")
	leaderPass(t, s)
	require.Equal(t, file, queueFile(t, pool, schema, "ready"))
}

// TestRecycleUnderLoad: the leader recycles the queues while runs are
// created (directly and in callers' transactions, through incoming) and
// claimed: every task is claimed exactly once, none is lost.
func TestRecycleUnderLoad(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	files := map[string]uint32{"ready": queueFile(t, pool, schema, "ready"), "incoming": queueFile(t, pool, schema, "incoming")}
	recycled := func(table string) bool { return queueFile(t, pool, schema, table) != files[table] }

	var (
		mu      sync.Mutex
		want    = map[uuid.UUID]bool{}
		got     = map[uuid.UUID]int{}
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		errs    = make(chan error, 8)
		produce = func(direct bool) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var batch []store.NewRun
				for range 200 {
					batch = append(batch, newRun("wf", "t", sh))
				}
				var err error
				if direct {
					_, err = s.CreateRuns(ctx, &store.CreateRunsParams{Runs: batch})
				} else {
					var tx pgx.Tx
					if tx, err = pool.Begin(ctx); err == nil {
						if _, err = s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: batch}); err == nil {
							err = tx.Commit(ctx)
						} else {
							_ = tx.Rollback(ctx)
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, r := range batch {
					want[r.ID] = true
				}
				mu.Unlock()
			}
		}
		claim = func(worker string) {
			defer wg.Done()
			for {
				cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: worker, Limit: 300, Workflows: []string{"wf"}})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, c := range cs {
					got[c.RunID]++
				}
				mu.Unlock()
				if len(cs) == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
			}
		}
	)
	wg.Add(4)
	go produce(true)
	go produce(false)
	go claim("w1")
	go claim("w2")
	// The leader's passes go on until both queues were recycled under load.
	deadline := time.Now().Add(2 * time.Minute)
	for !(recycled("ready") && recycled("incoming")) && time.Now().Before(deadline) && len(errs) == 0 {
		leaderPass(t, s)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.True(t, recycled("ready"), "the ready queue was never recycled")
	require.True(t, recycled("incoming"), "incoming was never recycled")

	// Drain what is left: the incoming runs' roots are promoted by the
	// leader's pass.
	for {
		leaderPass(t, s)
		cs := claimAll(t, s, "wf", 1000)
		for _, c := range cs {
			got[c.RunID]++
		}
		if len(cs) == 0 {
			break
		}
	}
	require.Len(t, got, len(want), "every run's task is claimed")
	for id, n := range got {
		require.True(t, want[id], "claimed a run never created")
		require.Equal(t, 1, n, "run %s claimed %d times", id, n)
	}
}

// TestRecycleKeepsIdentity: recycling a queue whose rows carry identity
// columns (incoming's seq) writes them back as they were, and the
// sequence goes on after them.
func TestRecycleKeepsIdentity(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var runs []store.NewRun
	for range 5 {
		runs = append(runs, newRun("wf", "t", sh))
	}
	require.NoError(t, created(s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: runs})))
	require.NoError(t, tx.Commit(ctx))
	incoming := pgx.Identifier{schema, "incoming"}.Sanitize()
	read := func() [][]any {
		rows, err := pool.Query(ctx, "SELECT * FROM "+incoming+" ORDER BY seq")
		require.NoError(t, err)
		var out [][]any
		for rows.Next() {
			v, err := rows.Values()
			require.NoError(t, err)
			out = append(out, v)
		}
		require.NoError(t, rows.Err())
		return out
	}
	before := read()
	require.Len(t, before, 5)
	file := queueFile(t, pool, schema, "incoming")
	done, err := pgstore.Recycle(ctx, s, "incoming")
	require.NoError(t, err)
	require.True(t, done)
	require.NotEqual(t, file, queueFile(t, pool, schema, "incoming"))
	require.Equal(t, before, read())

	// New rows take seqs after the old ones.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, created(s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{newRun("wf", "t", sh)}})))
	require.NoError(t, tx.Commit(ctx))
	after := read()
	require.Len(t, after, 6)
	require.Greater(t, after[5][0].(int64), before[4][0].(int64))

	// All six are promoted and claimed, once each.
	leaderPass(t, s)
	require.Len(t, claimAll(t, s, "wf", 100), 6)
}
