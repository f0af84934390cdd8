package durable_test

// Engine tests that only make sense on PostgreSQL: the real engine, a real
// database and real time. Every engine test that holds for both stores is
// written once against the harness (suite_test.go) and runs on both; the
// tests here are about what only PostgreSQL has: several processes
// (engines with their own connections) electing a leader through an
// advisory lock, runs started in the caller's transaction, and claims
// committed by the database while the engine gives up on them. Each test
// works in its own freshly migrated schema, with its own pool, and stops
// its engines before the schema is dropped. Intervals are short (see
// pgFast) so that the tests are quick; bounds on timing are generous, since
// the tests share a small machine.

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/pgstore"
)

// ---- many engines, one database ------------------------------------------------

// TestPGManyEnginesOneDatabase: three engines share one schema. Exactly one
// leads at a time (the leader's lease names it; the logs never show two
// leaders at once); when the leader stops, another takes over. 200 runs of
// a fan-out DAG complete, every step executed and recorded exactly once.
//
// PostgreSQL only: leadership here is a lease in the database, handed over
// between engines with separate store objects, as separate processes
// would have. (In
// memory, leadership is a token in one process; work shared by several
// engines is covered on both stores by TestStress.)
func TestPGManyEnginesOneDatabase(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	const runs, width = 200, 4
	var execs counter
	var byWorker counter
	build := func() *durable.Workflow[int] {
		wf := durable.NewWorkflow[int]("fan")
		mark := func(ctx durable.Context) {
			execs.inc(ctx.RunID().String() + "/" + ctx.StepName())
			byWorker.inc(ctx.WorkerID())
		}
		root := durable.Step(wf, "root", func(ctx durable.Context, in int) (int, error) { mark(ctx); return in, nil })
		var mids []durable.Parent
		var refs []*durable.StepRef[int]
		for i := range width {
			r := durable.Step(wf, fmt.Sprintf("m%d", i), func(ctx durable.Context, in int) (int, error) {
				mark(ctx)
				v, _ := root.Output(ctx)
				return v*10 + i, nil
			}, durable.After(root))
			mids = append(mids, r)
			refs = append(refs, r)
		}
		durable.Step(wf, "join", func(ctx durable.Context, in int) (int, error) {
			mark(ctx)
			return sumOutputs(ctx, refs)
		}, durable.After(mids...))
		return wf
	}
	leaders := newLeaderLog()
	workers := []string{"pg-e0", "pg-e1", "pg-e2"}
	engines := map[string]*durable.Engine{}
	for _, w := range workers {
		// The default lease: the turns are asserted, and the test's short
		// one could lapse on a loaded machine; a stop hands over at once.
		s, err := pgstore.New(env.pool, &pgstore.Config{Schema: env.schema})
		require.NoError(t, err)
		engines[w] = pgStart(t, s, durable.Config{
			WorkerID: w, Logger: leaders.logger(), Concurrency: 8,
			HeartbeatInterval: time.Second, DeadAfter: 10 * time.Second,
		}, build())
	}
	var leader string
	pgEventually(t, 15*time.Second, func() bool {
		leader = leaseHolder(t, env)
		return slices.Contains(workers, leader) && slices.Equal(leaders.leaders(), []string{leader})
	}, "one engine holds the leader's lease and leads")
	t.Logf("leader: %s", leader)

	wf := build()
	ctx := pgCtx(t, 2*time.Minute)
	triggers := make([]durable.Trigger[int], runs)
	for i := range triggers {
		triggers[i] = durable.Trigger[int]{Tenant: fmt.Sprintf("tenant-%d", i%5), Input: i}
	}
	client := pgClient(t, env.newStore(t))
	ids, err := wf.RunManyNoWait(ctx, client, triggers)
	require.NoError(t, err)

	for _, id := range ids[:runs/2] {
		pgWait(t, client, id, time.Minute)
		require.LessOrEqual(t, len(leaders.leaders()), 1, "at most one leader")
	}
	// The leader stops mid-way; another takes over.
	require.NoError(t, engines[leader].Stop(ctx))
	var next string
	pgEventually(t, 15*time.Second, func() bool {
		next = leaseHolder(t, env)
		return next != "" && next != leader && slices.Equal(leaders.leaders(), []string{next})
	}, "another engine takes the lead")
	t.Logf("after %s stopped, %s leads", leader, next)

	for i, id := range ids {
		res := pgWait(t, client, id, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status, "run %d", i)
		var sum int
		for k := range width {
			sum += i*10 + k
		}
		join, ok := res.Step("join")
		require.True(t, ok)
		require.JSONEq(t, fmt.Sprint(sum), string(join.Output), "run %d", i)
		for _, s := range res.Steps {
			require.Equal(t, 1, s.Attempts, "run %d step %s", i, s.Name)
			require.Equal(t, 1, execs.get(id.String()+"/"+s.Name), "run %d step %s executed once", i, s.Name)
		}
		evs, err := client.Events(ctx, id)
		require.NoError(t, err)
		perStep := map[string][]durabletype.EventType{}
		for _, ev := range evs {
			perStep[ev.Step] = append(perStep[ev.Step], ev.Type)
		}
		require.Len(t, perStep, width+2)
		for step, types := range perStep {
			require.Equal(t, []durabletype.EventType{durabletype.EventQueued, durabletype.EventStarted, durabletype.EventCompleted}, types,
				"run %d step %s is recorded once", i, step)
		}
	}
	require.Len(t, execs.snapshot(), runs*(width+2))
	most, turns := leaders.stats()
	require.Equal(t, 1, most, "never two leaders at once")
	require.Equal(t, []string{leader, next}, turns)
	dist := byWorker.snapshot()
	t.Logf("steps executed by worker: %v", dist)
	require.GreaterOrEqual(t, len(dist), 2, "the engines share the work")
}

// ---- triggering inside the caller's transaction -------------------------------

// TestPGRunNoWaitTx: a run started in the caller's transaction exists if
// and only if the transaction commits: invisible before, gone after a
// rollback (nothing left behind, never run), run after a commit. A tx of
// the wrong type is a clear error.
//
// PostgreSQL only: the in-memory store has no transactions (RunNoWaitTx
// accepts nil there, see TestTriggerValidation).
func TestPGRunNoWaitTx(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	var ran counter
	wf := durable.NewWorkflow[string]("tx-order")
	durable.Step(wf, "handle", func(ctx durable.Context, in string) (string, error) {
		ran.inc(in)
		return "handled " + in, nil
	})
	e := pgStart(t, env.store, durable.Config{}, wf)
	ctx := pgCtx(t, 60*time.Second)
	orders := pgx.Identifier{env.schema, "orders"}.Sanitize()
	_, err := env.pool.Exec(ctx, "CREATE TABLE "+orders+" (id text PRIMARY KEY)")
	require.NoError(t, err)

	// Rolled back: the run never existed.
	tx, err := env.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO "+orders+" VALUES ('rolled-back')")
	require.NoError(t, err)
	rolledBack, err := wf.RunNoWaitTx(ctx, e, tx, "t", "rolled-back")
	require.NoError(t, err)
	_, err = e.Get(ctx, rolledBack)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound, "invisible before commit")
	require.NoError(t, tx.Rollback(ctx))
	_, err = e.Get(ctx, rolledBack)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)

	// Committed: it runs.
	tx, err = env.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO "+orders+" VALUES ('committed')")
	require.NoError(t, err)
	committed, err := wf.RunNoWaitTx(ctx, e, tx, "t", "committed")
	require.NoError(t, err)
	_, err = e.Get(ctx, committed)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound, "invisible before commit")
	require.NoError(t, tx.Commit(ctx))
	res := pgWait(t, e, committed, 20*time.Second)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	require.Equal(t, 1, ran.get("committed"))

	// The rolled-back run left nothing behind, and no worker ran it.
	require.Zero(t, ran.get("rolled-back"))
	var n int
	require.NoError(t, env.pool.QueryRow(ctx, fmt.Sprintf(
		"SELECT (SELECT count(*) FROM %[1]s.runs WHERE id = $1) + (SELECT count(*) FROM %[1]s.tasks WHERE run_id = $1) + (SELECT count(*) FROM %[1]s.ready WHERE run_id = $1)",
		pgx.Identifier{env.schema}.Sanitize()), rolledBack).Scan(&n))
	require.Zero(t, n)
	rows, err := env.pool.Query(ctx, "SELECT id FROM "+orders+" ORDER BY id")
	require.NoError(t, err)
	saved, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"committed"}, saved)
	_, err = e.Wait(ctx, rolledBack)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)

	// A tx of the wrong type: a clear error, wrapped.
	for _, bad := range []any{env.pool, nil, "tx"} {
		_, err := wf.RunNoWaitTx(ctx, e, bad, "t", "bad")
		require.Error(t, err)
		var tte *pgstore.TxTypeError
		require.ErrorAs(t, err, &tte, "%T", bad)
		require.Contains(t, err.Error(), "durable: starting run")
		require.Contains(t, err.Error(), fmt.Sprintf("needs a pgx.Tx, got %T", bad))
	}
	require.Zero(t, ran.get("bad"))
}

// TestPGRunNoWaitTxDoesNotStallOtherTenants: a caller's transaction that
// started a run with RunNoWaitTx and is still open must not stop the engine
// from recording the outcomes of other runs, least of all other tenants'.
//
// PostgreSQL only: the lock in question is taken inside the caller's
// transaction, which the in-memory store has no notion of.
//
// It failed once: CreateRunsTx locked the tenant's row FOR UPDATE
// (pgstore/create.go:185, queueTenantLock) inside the caller's transaction,
// so the lock was held until the caller committed. When a step of another
// run of that tenant finished and enqueued a child, FinishTasks waited for
// the same lock (pgstore/transition.go:183), and since the engine records
// outcomes in a single goroutine (internal/service/completer), every outcome
// of every tenant queued behind it. The leader's FireTimers and RescueTasks
// took the same lock when they enqueued, so timers could stall the same way.
func TestPGRunNoWaitTxDoesNotStallOtherTenants(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, time.Minute)
	release := make(chan struct{})
	wf := durable.NewWorkflow[string]("two-steps")
	a := durable.Step(wf, "a", func(ctx durable.Context, in string) (int, error) {
		if in == "hold" {
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return 1, nil
	})
	durable.Step(wf, "b", noop[string], durable.After(a))
	e := pgStart(t, env.store, durable.Config{}, wf)

	inFlight, err := wf.RunNoWait(ctx, e, "tenant-T", "hold")
	require.NoError(t, err)
	pgEventually(t, 10*time.Second, func() bool { return stepState(t, e, inFlight, "a") == durabletype.TaskRunning },
		"tenant T's first step runs")

	tx, err := env.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	_, err = wf.RunNoWaitTx(ctx, e, tx, "tenant-T", "in the caller's transaction")
	require.NoError(t, err)
	close(release) // tenant T's step finishes while the caller's transaction is open

	other, err := wf.RunNoWait(ctx, e, "tenant-U", "unrelated")
	require.NoError(t, err)
	// The bug stalls the run until the commit, not slows it: the bound
	// leaves a loaded machine room.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, waitErr := e.Wait(wctx, other)
	stalled := time.Since(start)
	state := stepState(t, e, other, "a")
	require.NoError(t, tx.Commit(ctx))
	res := pgWait(t, e, other, 20*time.Second)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	t.Logf("tenant U's run: %v after %s with the transaction open (its first step %s); completed after commit", waitErr, stalled, state)
	assert.NoError(t, waitErr, "BUG: tenant U's 2-step run did not complete within 10s while a caller's transaction that "+
		"called RunNoWaitTx for tenant T was open (its first step was %s: ran, outcome not recorded). CreateRunsTx holds "+
		"tenant T's row lock until the caller commits (pgstore/create.go:185); FinishTasks for tenant T's in-flight run "+
		"waits on it (pgstore/transition.go:183) and the engine's single completer (internal/service/completer) stalls behind it.", state)
}

// ---- stopping while claims are in flight ---------------------------------------

// TestPGStopLeavesNoClaimBehind: an engine stopped gracefully while it works
// through a backlog must leave no task RUNNING behind: every task it claimed
// is either recorded or released by the time Stop returns. Otherwise the
// task waits DeadAfter for a rescue that counts as a failed attempt, and a
// step without retries fails its run because of a deploy.
//
// PostgreSQL only: the race is a claim statement that commits in the
// database although the engine has given up on it; the in-memory store
// claims synchronously under its lock and always returns what it claimed.
//
// It failed once: Stop cancelled rt.claimCtx while ClaimTasks could be in
// flight (internal/service/claimer); the claim statement committed in PostgreSQL
// anyway, pgstore returned "pgstore: claim: context canceled", and the
// claim loop dropped the claimed tasks (internal/service/claimer).
func TestPGStopLeavesNoClaimBehind(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 2*time.Minute)
	var done atomic.Int32
	wf := durable.NewWorkflow[int]("deploy")
	// No retries: one lost attempt fails the run.
	durable.Step(wf, "work", func(ctx durable.Context, in int) (int, error) { done.Add(1); return in, nil })
	client := pgClient(t, env.store)
	var ids []uuid.UUID
	orphans, rounds := 0, 0
	var stopped string
	for ; rounds < 12 && orphans == 0; rounds++ {
		triggers := make([]durable.Trigger[int], 200)
		for i := range triggers {
			triggers[i] = durable.Trigger[int]{Tenant: fmt.Sprintf("t%d", i%3), Input: i}
		}
		batch, err := wf.RunManyNoWait(ctx, client, triggers)
		require.NoError(t, err)
		ids = append(ids, batch...)
		before := done.Load()
		stopped = fmt.Sprintf("pg-deploy-%d", rounds)
		e := pgStart(t, env.newStore(t), durable.Config{WorkerID: stopped, Concurrency: 20}, wf)
		pgEventually(t, 30*time.Second, func() bool { return done.Load() >= before+int32(10+15*rounds) },
			"the engine works through the backlog")
		require.NoError(t, e.Stop(ctx), "a graceful stop with nothing slow to drain")
		require.NoError(t, env.pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.tasks WHERE state = 'RUNNING'",
			pgx.Identifier{env.schema}.Sanitize())).Scan(&orphans))
	}
	assert.Zero(t, orphans, "BUG: after %d graceful stop(s), Stop left %d claimed tasks RUNNING under worker %s with "+
		"nobody to run them. Stop cancels the context of an in-flight ClaimTasks (internal/service/claimer); the claim commits "+
		"in PostgreSQL anyway and the claim loop drops it (internal/service/claimer).", rounds, orphans, stopped)

	// What becomes of them: a live engine rescues them after DeadAfter, as
	// failed attempts; with no retries, their runs fail.
	e := pgStart(t, env.newStore(t), durable.Config{WorkerID: "pg-after-deploy"}, wf)
	failed := 0
	example := ""
	for _, id := range ids {
		res := pgWait(t, e, id, time.Minute)
		if res.Status == durabletype.RunFailed {
			failed++
			example = res.Err.Error()
		}
	}
	assert.Zero(t, failed, "BUG: %d of %d runs failed only because an engine was stopped gracefully; e.g. %s",
		failed, len(ids), example)
}
