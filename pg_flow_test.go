package durable_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// TestPGIdempotencyKeyRace: ten engines, each with a store of its own (as
// ten processes would have), trigger one key at once, some of them inside
// transactions of their callers: exactly one run is started, every trigger
// returns its ID, and the run runs once.
func TestPGIdempotencyKeyRace(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	var ran counter
	wf := durable.NewWorkflow[string]("idem")
	durable.Step(wf, "charge", func(ctx durable.Context, in string) (string, error) {
		ran.inc(in)
		return "charged " + in, nil
	})
	worker := pgStart(t, env.store, durable.Config{}, wf)
	ctx := pgCtx(t, 60*time.Second)

	for round := range 3 {
		key := "order-" + uuid.NewString()
		const engines = 10
		results := make([]durable.Started, engines)
		errs := make([]error, engines)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range engines {
			e := pgClient(t, env.newStore(t))
			wg.Go(func() {
				<-start
				if i%3 == 0 { // inside a caller's transaction
					tx, err := env.pool.Begin(ctx)
					if err != nil {
						errs[i] = err
						return
					}
					results[i], errs[i] = wf.StartTx(ctx, e, tx, "t", key, durable.WithIdempotencyKey(key))
					if errs[i] == nil {
						errs[i] = tx.Commit(ctx)
					} else {
						_ = tx.Rollback(ctx)
					}
					return
				}
				results[i], errs[i] = wf.Start(ctx, e, "t", key, durable.WithIdempotencyKey(key))
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for i := range engines {
			require.NoError(t, errs[i], "round %d, engine %d", round, i)
			require.Equal(t, results[0].RunID, results[i].RunID, "round %d: every trigger names the one run", round)
			if !results[i].Duplicate {
				created++
			}
		}
		require.Equal(t, 1, created, "round %d: exactly one trigger started the run: %+v", round, results)
		res := pgWait(t, worker, results[0].RunID, 30*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.Equal(t, 1, ran.get(key), "round %d: the step ran once", round)
		var n int
		require.NoError(t, env.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{env.schema, "runs"}.Sanitize()+" WHERE idem_key = $1", key).Scan(&n))
		require.Equal(t, 1, n)
	}
}

// TestPGIdempotencyKeyInOpenTransaction: a trigger racing a caller's
// transaction that holds the key waits for it; when it rolls back, the
// trigger starts the run; when it commits, the trigger is its duplicate.
// Neither aborts the other's transaction.
func TestPGIdempotencyKeyInOpenTransaction(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	wf := durable.NewWorkflow[string]("idem-tx")
	durable.Step(wf, "a", func(ctx durable.Context, in string) (string, error) { return in, nil })
	e := pgClient(t, env.store)
	ctx := pgCtx(t, 60*time.Second)

	for _, commit := range []bool{false, true} {
		key := uuid.NewString()
		tx, err := env.pool.Begin(ctx)
		require.NoError(t, err)
		first, err := wf.StartTx(ctx, e, tx, "t", "x", durable.WithIdempotencyKey(key))
		require.NoError(t, err)
		require.False(t, first.Duplicate)

		type result struct {
			st  durable.Started
			err error
		}
		done := make(chan result, 1)
		go func() {
			tx2, err := env.pool.Begin(ctx)
			if err != nil {
				done <- result{err: err}
				return
			}
			st, err := wf.StartTx(ctx, e, tx2, "t", "x", durable.WithIdempotencyKey(key))
			if err == nil {
				err = tx2.Commit(ctx) // the second transaction is not aborted
			}
			done <- result{st, err}
		}()
		// The second trigger waits on the key's index entry for the first
		// transaction to end.
		pgEventually(t, 10*time.Second, func() bool {
			var waiting bool
			_ = env.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND locktype = 'transactionid')`).Scan(&waiting)
			return waiting
		}, "the second trigger waits for the first transaction")
		if commit {
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
		}
		r := <-done
		require.NoError(t, r.err)
		if commit {
			require.Equal(t, durable.Started{RunID: first.RunID, Duplicate: true}, r.st)
		} else {
			require.False(t, r.st.Duplicate)
			require.NotEqual(t, first.RunID, r.st.RunID)
		}
		_, err = e.Get(ctx, r.st.RunID)
		require.NoError(t, err)
	}
}

// TestPGStepTimeoutHungWorker: on PostgreSQL, a step that ignores its
// context past its timeout is failed by the leader's timer and retried on
// time (not after the worker gives up), and its late result is refused.
func TestPGStepTimeoutHungWorker(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	release := make(chan struct{})
	var calls counter
	wf := durable.NewWorkflow[string]("hung")
	durable.Step(wf, "call", func(ctx durable.Context, in string) (string, error) {
		if calls.inc(in) == 1 {
			<-release // ignores ctx
			return "late", nil
		}
		return "retried", nil
	}, durable.WithTimeout(500*time.Millisecond), durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond}))
	// The worker stays alive: a DeadAfter far beyond the test keeps a
	// loaded machine's late heartbeat from turning the hung attempt into a
	// lost one (given back without spending a retry), which is not what
	// this test is about.
	e := pgStart(t, env.store, durable.Config{Concurrency: 4, DeadAfter: time.Minute}, wf)
	defer close(release)
	ctx := pgCtx(t, 60*time.Second)
	id, err := wf.RunNoWait(ctx, e, "t", "x")
	require.NoError(t, err)
	res := pgWait(t, e, id, 30*time.Second)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	step, _ := res.Step("call")
	require.Equal(t, `"retried"`, string(step.Output))
	require.Equal(t, 2, step.Attempts)
	evs, err := e.Events(ctx, id)
	require.NoError(t, err)
	var retrying []string
	for _, ev := range evs {
		if ev.Type == "RETRYING" {
			retrying = append(retrying, ev.Detail)
		}
	}
	require.Len(t, retrying, 1)
	require.Contains(t, retrying[0], "step timed out")
}

// TestPGPriorityOnEngines: with one slot, a tenant's urgent runs triggered
// behind its normal ones run first, on PostgreSQL through the engine.
func TestPGPriorityOnEngines(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	var mu sync.Mutex
	var order []string
	gate := make(chan struct{})
	wf := durable.NewWorkflow[string]("prio")
	durable.Step(wf, "a", func(ctx durable.Context, in string) (string, error) {
		if in == "gate" {
			<-gate
		}
		mu.Lock()
		order = append(order, in)
		mu.Unlock()
		return in, nil
	})
	e := pgStart(t, env.store, durable.Config{Concurrency: 1, ClaimBatch: 1, DeadAfter: time.Minute}, wf)
	ctx := pgCtx(t, 60*time.Second)
	gateID, err := wf.RunNoWait(ctx, e, "t", "gate")
	require.NoError(t, err)
	pgEventually(t, 10*time.Second, func() bool {
		r, err := e.Get(ctx, gateID)
		return err == nil && r.Steps[0].State == durabletype.TaskRunning
	}, "the gate step runs")
	var ids []uuid.UUID
	for _, in := range []string{"n1", "n2", "n3"} {
		id, err := wf.RunNoWait(ctx, e, "t", in)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, in := range []string{"u1", "u2"} {
		id, err := wf.RunNoWait(ctx, e, "t", in, durable.WithPriority(durable.PriorityUrgent))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	close(gate)
	for _, id := range ids {
		pgWait(t, e, id, 30*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "gate", order[0])
	require.ElementsMatch(t, []string{"u1", "u2"}, order[1:3], "urgent first: %v", order)
	require.ElementsMatch(t, []string{"n1", "n2", "n3"}, order[3:], "%v", order)
}

// TestPGKeyedRunsInTransaction: runs whose first steps have a concurrency
// key or a rate limit start inside a caller's transaction: their first
// steps wait as timers, which the leader admits once the caller commits,
// holding the cap; a rolled-back transaction leaves nothing.
func TestPGKeyedRunsInTransaction(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	var mu sync.Mutex
	running, most := 0, 0
	wf := durable.NewWorkflow[string]("keyed-tx")
	durable.Step(wf, "a", func(ctx durable.Context, in string) (string, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // work that overlaps if the cap fails
		mu.Lock()
		running--
		mu.Unlock()
		return in, nil
	}, durable.WithConcurrency(func(in string) string { return "one-key" }, 1),
		durable.WithRateLimit(func(in string) string { return "one-key" }, 100, time.Second))
	e := pgStart(t, env.store, durable.Config{Concurrency: 8}, wf)
	ctx := pgCtx(t, 60*time.Second)

	tx, err := env.pool.Begin(ctx)
	require.NoError(t, err)
	rolled, err := wf.RunNoWaitTx(ctx, e, tx, "t", "rolled")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))

	var ids []uuid.UUID
	tx, err = env.pool.Begin(ctx)
	require.NoError(t, err)
	for i := range 5 {
		id, err := wf.RunNoWaitTx(ctx, e, tx, "t", fmt.Sprint(i))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	require.NoError(t, tx.Commit(ctx))
	for _, id := range ids {
		res := pgWait(t, e, id, 30*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status)
	}
	_, err = e.Get(ctx, rolled)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, most, "the cap held")
}
