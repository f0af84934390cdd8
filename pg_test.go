package durable_test

// Engine tests against PostgreSQL: the real engine, a real database and real
// time. Each test works in its own freshly migrated schema, with its own
// pool, and stops its engines before the schema is dropped. Intervals are
// short (see pgFast) so that the tests are quick; bounds on timing are
// generous, since the tests share a small machine.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// ---- 1. the main paths ---------------------------------------------------------

func TestPGLinearOutputsFlow(t *testing.T) {
	t.Parallel()
	scenarioLinear(pgCtx(t, 30*time.Second), t, pgStarter(pgSetup(t)))
}

func TestPGDiamond(t *testing.T) {
	t.Parallel()
	scenarioDiamond(pgCtx(t, 30*time.Second), t, pgStarter(pgSetup(t)))
}

// TestPGFanOutFanIn: see scenarioFanOutFanIn.
func TestPGFanOutFanIn(t *testing.T) {
	t.Parallel()
	scenarioFanOutFanIn(pgCtx(t, 60*time.Second), t, pgStarter(pgSetup(t)))
}

func TestPGBranchMerge(t *testing.T) {
	t.Parallel()
	scenarioBranchMerge(pgCtx(t, 60*time.Second), t, pgStarter(pgSetup(t)))
}

// TestPGRetryBackoffThenSuccess: a step failing twice succeeds on its third
// attempt; each retry is due exactly its backoff after the failure was
// recorded, and starts no earlier.
func TestPGRetryBackoffThenSuccess(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	const initial = 200 * time.Millisecond
	var seen []int
	var mu sync.Mutex
	wf := durable.NewWorkflow[int]("flaky")
	flaky := durable.Step(wf, "flaky", func(ctx durable.Context, in int) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ctx.Attempt())
		if len(seen) < 3 {
			return "", fmt.Errorf("transient %d", len(seen))
		}
		return "ok", nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: initial, Factor: 2}))
	e := pgStart(t, env.store, durable.Config{}, wf)
	res, err := wf.Run(pgCtx(t, 30*time.Second), e, "t", 1)
	require.NoError(t, err)
	out, err := flaky.Result(res)
	require.NoError(t, err)
	require.Equal(t, "ok", out)
	require.Equal(t, []int{1, 2, 3}, seen)
	s, _ := res.Step("flaky")
	require.Equal(t, 3, s.Attempts)

	evs, err := e.Events(context.Background(), res.ID)
	require.NoError(t, err)
	var retrying, started []durable.Event
	for _, ev := range evs {
		switch ev.Type {
		case durable.EventRetrying:
			retrying = append(retrying, ev)
		case durable.EventStarted:
			started = append(started, ev)
		}
	}
	require.Len(t, retrying, 2)
	require.Len(t, started, 3)
	require.Equal(t, "transient 1", retrying[0].Detail)
	for k, delay := range []time.Duration{initial, 2 * initial} {
		r := retrying[k]
		require.Equal(t, delay, r.DueAt.Sub(r.At), "retry %d is due its backoff after the failure", k+1)
		next := started[k+1]
		require.False(t, next.At.Before(r.DueAt), "attempt %d started at %s, before its due time %s", k+2, next.At, r.DueAt)
		late := next.At.Sub(r.DueAt)
		require.Less(t, late, 2*time.Second, "attempt %d started %s after its due time", k+2, late)
		t.Logf("retry %d: due %s after the failure, started %s after due", k+1, delay, late)
	}
}

// TestPGTerminalFailureOnFailureOnce: a terminal error fails the run at once
// (no retries), cancels the rest, and the on-failure handler runs exactly
// once although two engines serve the schema.
func TestPGTerminalFailureOnFailureOnce(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	var charges, handled atomic.Int32
	var got durable.Failure
	var gotIn order
	var mu sync.Mutex
	build := func() *durable.Workflow[order] {
		wf := durable.NewWorkflow[order]("with-handler")
		charge := durable.Step(wf, "charge", func(ctx durable.Context, in order) (int, error) {
			charges.Add(1)
			return 0, durable.Terminal(fmt.Errorf("card of order %s declined", in.ID))
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 50 * time.Millisecond}))
		durable.Step(wf, "ship", noop[order], durable.After(charge))
		wf.OnFailure(func(ctx durable.Context, in order, f durable.Failure) error {
			handled.Add(1)
			mu.Lock()
			got, gotIn = f, in
			mu.Unlock()
			return nil
		})
		return wf
	}
	wf := build()
	e := pgStart(t, env.store, durable.Config{}, wf)
	pgStart(t, env.newStore(t), durable.Config{}, build())

	in := order{ID: "o-9", Amount: 5}
	res, err := wf.Run(pgCtx(t, 30*time.Second), e, "t", in)
	require.ErrorIs(t, err, durable.ErrRunFailed)
	var runErr *durable.RunError
	require.ErrorAs(t, err, &runErr)
	require.Equal(t, "charge", runErr.Step)
	require.Equal(t, "card of order o-9 declined", runErr.Message)
	require.True(t, res.Done(), "Run returns once the handler has run")
	require.Equal(t, durable.RunFailed, res.Status)
	require.EqualValues(t, 1, charges.Load(), "a terminal error is not retried")
	require.EqualValues(t, 1, handled.Load(), "the handler runs once")
	mu.Lock()
	require.Equal(t, durable.Failure{Step: "charge", Error: "card of order o-9 declined"}, got)
	require.Equal(t, in, gotIn)
	mu.Unlock()
	require.Equal(t, map[string]durable.StepState{
		"charge": durable.StepFailed, "ship": durable.StepCancelled, durable.OnFailureStep: durable.StepCompleted,
	}, states(res))
	require.Equal(t, []string{"QUEUED/0", "STARTED/1", "FAILED/1"}, stepEvents(t, e, res.ID, "charge"))
	require.Equal(t, []string{"CANCELLED/0"}, stepEvents(t, e, res.ID, "ship"))
	require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, durable.OnFailureStep))
}

// TestPGSleep: a sleep step sleeps durably (SLEEPING with its due time, no
// worker held) and its child runs once it has woken.
func TestPGSleep(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	const nap = 300 * time.Millisecond
	wf := durable.NewWorkflow[int]("sleepy")
	a := durable.Step(wf, "before", noop[int])
	s := durable.Sleep(wf, "nap", nap, durable.After(a))
	durable.Step(wf, "after", func(ctx durable.Context, in int) (int, error) {
		if _, ok := s.Output(ctx); !ok {
			return 0, errors.New("the sleep parent completed, its output must be present")
		}
		return in, nil
	}, durable.After(s))
	e := pgStart(t, env.store, durable.Config{}, wf)
	res, err := wf.Run(pgCtx(t, 30*time.Second), e, "t", 1)
	require.NoError(t, err)
	require.Equal(t, durable.RunCompleted, res.Status)
	require.Equal(t, []string{"SLEEPING/0", "WOKEN/0"}, stepEvents(t, e, res.ID, "nap"))
	sleeping := pgEvent(t, e, res.ID, "nap", durable.EventSleeping)
	woken := pgEvent(t, e, res.ID, "nap", durable.EventWoken)
	afterStarted := pgEvent(t, e, res.ID, "after", durable.EventStarted)
	require.Equal(t, nap, sleeping.DueAt.Sub(sleeping.At))
	require.False(t, woken.At.Before(sleeping.DueAt), "woke at %s, before due %s", woken.At, sleeping.DueAt)
	require.False(t, afterStarted.At.Before(woken.At))
	t.Logf("woke %s after due", woken.At.Sub(sleeping.DueAt))
}

// ---- 2. durable sleep: on time -------------------------------------------------

// TestPGSleepWakesOnTime: the leader sleeps until the next due timer; a
// sooner timer created meanwhile wakes it early (NOTIFY), so a 1s sleep
// wakes within a small bound of its due time although the leader was
// waiting on a 1h sleep.
func TestPGSleepWakesOnTime(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	long := durable.NewWorkflow[int]("long-nap")
	durable.Sleep(long, "nap", time.Hour)
	short := durable.NewWorkflow[int]("short-nap")
	first := durable.Step(short, "first", noop[int])
	durable.Sleep(short, "nap", time.Second, durable.After(first))
	leaders := newLeaderLog()
	e := pgStart(t, env.store, durable.Config{WorkerID: "pg-sleeper", Logger: leaders.logger()}, long, short)
	ctx := pgCtx(t, 60*time.Second)

	longID, err := long.RunNoWait(ctx, e, "t", 1)
	require.NoError(t, err)
	pgEventually(t, 10*time.Second, func() bool {
		return len(leaders.leaders()) == 1 && pgStepState(t, e, longID, "nap") == durable.StepSleeping
	}, "the engine leads and the 1h sleep has begun")

	id, err := short.RunNoWait(ctx, e, "t", 2)
	require.NoError(t, err)
	res := pgWait(t, e, id, 20*time.Second)
	require.Equal(t, durable.RunCompleted, res.Status)
	sleeping := pgEvent(t, e, id, "nap", durable.EventSleeping)
	woken := pgEvent(t, e, id, "nap", durable.EventWoken)
	late := woken.At.Sub(sleeping.DueAt)
	t.Logf("1s sleep woke %s after its due time (the leader was waiting on a 1h timer)", late)
	require.GreaterOrEqual(t, late, time.Duration(0), "woke before due")
	require.LessOrEqual(t, late, 300*time.Millisecond, "woke too late: the leader was not woken by the new, sooner timer")
	require.Equal(t, durable.StepSleeping, pgStepState(t, e, longID, "nap"))
}

// ---- 3. durable sleep: every engine stopped ----------------------------------

// TestPGSleepSurvivesFullStop: every engine is stopped while a run sleeps;
// nothing happens while nobody runs, and new engines (new objects, same
// schema) started after the due time finish the run.
func TestPGSleepSurvivesFullStop(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	var after counter
	build := func() *durable.Workflow[int] {
		wf := durable.NewWorkflow[int]("restart")
		a := durable.Step(wf, "a", noop[int])
		nap := durable.Sleep(wf, "nap", time.Second, durable.After(a))
		durable.Step(wf, "after", func(ctx durable.Context, in int) (int, error) {
			after.inc("after")
			return in, nil
		}, durable.After(nap))
		return wf
	}
	ctx := pgCtx(t, 60*time.Second)
	wf := build()
	e1 := pgLaunch(t, env.store, durable.Config{}, wf)
	e2 := pgLaunch(t, env.newStore(t), durable.Config{}, build())
	id, err := wf.RunNoWait(ctx, e1, "t", 1)
	require.NoError(t, err)
	pgEventually(t, 10*time.Second, func() bool { return pgStepState(t, e1, id, "nap") == durable.StepSleeping },
		"the run sleeps")
	require.NoError(t, e1.Stop(ctx))
	require.NoError(t, e2.Stop(ctx))
	due := pgEvent(t, e1, id, "nap", durable.EventSleeping).DueAt

	// Let the due time pass with nobody running (waiting for time itself,
	// not standing in for synchronisation).
	<-time.After(time.Until(due.Add(500 * time.Millisecond)))
	client := pgClient(t, env.newStore(t))
	res, err := client.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, durable.StepSleeping, states(res)["nap"], "no engine runs, so nothing fires the timer")
	require.Zero(t, after.get("after"))

	restarted := time.Now()
	e3 := pgStart(t, env.newStore(t), durable.Config{}, build())
	res = pgWait(t, e3, id, 20*time.Second)
	require.Equal(t, durable.RunCompleted, res.Status)
	require.Equal(t, 1, after.get("after"))
	woken := pgEvent(t, e3, id, "nap", durable.EventWoken)
	require.True(t, woken.At.After(restarted), "woken by the new engine (at %s, restarted at %s)", woken.At, restarted)
	t.Logf("woke %s after the restart, %s after due", woken.At.Sub(restarted), woken.At.Sub(due))
}

// ---- 4. many engines, one database --------------------------------------------

// TestPGManyEnginesOneDatabase: three engines share one schema. Exactly one
// leads at a time (pg_locks shows one holder of the leader lock and two
// waiters; the logs never show two leaders at once); when the leader stops,
// another takes over. 200 runs of a fan-out DAG complete, every step
// executed and recorded exactly once.
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
		engines[w] = pgStart(t, env.newStore(t), durable.Config{
			WorkerID: w, Logger: leaders.logger(), Concurrency: 8,
			HeartbeatInterval: time.Second, DeadAfter: 10 * time.Second,
		}, build())
	}
	var leader string
	pgEventually(t, 15*time.Second, func() bool {
		holding, waiting := electorLocks(t, env, workers)
		if len(holding) != 1 || len(waiting) != 2 {
			return false
		}
		leader = holding[0]
		return slices.Equal(leaders.leaders(), holding)
	}, "one engine holds the leader lock and two wait for it")
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
		holding, _ := electorLocks(t, env, workers)
		require.Len(t, holding, 1, "exactly one leader")
	}
	// The leader stops mid-way; another takes over.
	require.NoError(t, engines[leader].Stop(ctx))
	var next string
	pgEventually(t, 15*time.Second, func() bool {
		holding, waiting := electorLocks(t, env, workers)
		if len(holding) != 1 || len(waiting) != 1 || holding[0] == leader {
			return false
		}
		next = holding[0]
		return slices.Equal(leaders.leaders(), holding)
	}, "another engine takes the lead")
	t.Logf("after %s stopped, %s leads", leader, next)

	for i, id := range ids {
		res := pgWait(t, client, id, time.Minute)
		require.Equal(t, durable.RunCompleted, res.Status, "run %d", i)
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
		perStep := map[string][]durable.EventType{}
		for _, ev := range evs {
			perStep[ev.Step] = append(perStep[ev.Step], ev.Type)
		}
		require.Len(t, perStep, width+2)
		for step, types := range perStep {
			require.Equal(t, []durable.EventType{durable.EventQueued, durable.EventStarted, durable.EventCompleted}, types,
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

// ---- 5. triggering inside the caller's transaction ----------------------------

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
	require.ErrorIs(t, err, durable.ErrRunNotFound, "invisible before commit")
	require.NoError(t, tx.Rollback(ctx))
	_, err = e.Get(ctx, rolledBack)
	require.ErrorIs(t, err, durable.ErrRunNotFound)

	// Committed: it runs.
	tx, err = env.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO "+orders+" VALUES ('committed')")
	require.NoError(t, err)
	committed, err := wf.RunNoWaitTx(ctx, e, tx, "t", "committed")
	require.NoError(t, err)
	_, err = e.Get(ctx, committed)
	require.ErrorIs(t, err, durable.ErrRunNotFound, "invisible before commit")
	require.NoError(t, tx.Commit(ctx))
	res := pgWait(t, e, committed, 20*time.Second)
	require.Equal(t, durable.RunCompleted, res.Status)
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
	require.ErrorIs(t, err, durable.ErrRunNotFound)

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

// ---- 6. bad data never wedges a worker ----------------------------------------

// TestPGUndecodableInput: a run whose input no longer decodes into the
// registered workflow's input type fails its step with ErrDecode, without
// retries, while other runs keep completing.
func TestPGUndecodableInput(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 60*time.Second)
	v1 := durable.NewWorkflow[string]("typed")
	durable.Step(v1, "a", noop[string])
	client := pgClient(t, env.store)
	bad, err := v1.RunNoWait(ctx, client, "t", "not a number")
	require.NoError(t, err)

	var calls atomic.Int32
	v2 := durable.NewWorkflow[int]("typed")
	durable.Step(v2, "a", func(ctx durable.Context, in int) (int, error) { calls.Add(1); return in, nil },
		durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 50 * time.Millisecond}))
	e := pgStart(t, env.newStore(t), durable.Config{}, v2)
	var good []uuid.UUID
	for i := range 5 {
		id, err := v2.RunNoWait(ctx, e, "t", i)
		require.NoError(t, err)
		good = append(good, id)
	}
	res := pgWait(t, e, bad, 20*time.Second)
	require.Equal(t, durable.RunFailed, res.Status)
	require.ErrorIs(t, res.Err, durable.ErrRunFailed)
	require.Contains(t, res.Err.Error(), durable.ErrDecode.Error())
	require.Contains(t, res.Err.Error(), `input of workflow "typed"`)
	s, _ := res.Step("a")
	require.Equal(t, 1, s.Attempts, "bad data is not retried")
	require.Equal(t, []string{"QUEUED/0", "STARTED/1", "FAILED/1"}, stepEvents(t, e, bad, "a"))
	for _, id := range good {
		require.Equal(t, durable.RunCompleted, pgWait(t, e, id, 20*time.Second).Status)
	}
	res, err = v2.Run(ctx, e, "t", 9)
	require.NoError(t, err, "the worker keeps serving")
	require.Equal(t, durable.RunCompleted, res.Status)
	require.EqualValues(t, 6, calls.Load(), "only the good runs reached the step")
}

// TestPGUnknownWorkflowWaits: a run of a workflow this engine did not
// register stays QUEUED, untouched, while the engine serves other work; an
// engine that registers it runs it.
func TestPGUnknownWorkflowWaits(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 60*time.Second)
	orphan := durable.NewWorkflow[int]("orphan")
	durable.Step(orphan, "a", func(ctx durable.Context, in int) (string, error) { return "adopted by " + ctx.WorkerID(), nil })
	known := durable.NewWorkflow[int]("known")
	durable.Step(known, "a", noop[int])

	client := pgClient(t, env.store)
	orphanID, err := orphan.RunNoWait(ctx, client, "t", 1)
	require.NoError(t, err)
	e1 := pgStart(t, env.newStore(t), durable.Config{WorkerID: "pg-knows-one"}, known)
	for i := range 3 {
		res, err := known.Run(ctx, e1, "t", i)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
	}
	res, err := client.Get(ctx, orphanID)
	require.NoError(t, err)
	require.Equal(t, durable.RunRunning, res.Status)
	require.Equal(t, durable.StepQueued, states(res)["a"], "left for a process that knows the workflow")
	require.Equal(t, []string{"QUEUED/0"}, stepEvents(t, client, orphanID, "a"), "never claimed")

	e2 := pgStart(t, env.newStore(t), durable.Config{WorkerID: "pg-knows-both"}, known, orphan)
	res = pgWait(t, e2, orphanID, 20*time.Second)
	require.Equal(t, durable.RunCompleted, res.Status)
	s, _ := res.Step("a")
	require.JSONEq(t, `"adopted by pg-knows-both"`, string(s.Output))
	require.Equal(t, 1, s.Attempts)
}

// TestPGChangedDefinition: a run whose recorded step no longer exists in the
// deployed definition fails that step with ErrUnknownStep, naming it, and
// the worker keeps serving.
func TestPGChangedDefinition(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 60*time.Second)
	v1 := durable.NewWorkflow[int]("evolving")
	durable.Step(v1, "old-step", noop[int])
	oldRun, err := v1.RunNoWait(ctx, pgClient(t, env.store), "t", 1)
	require.NoError(t, err)

	v2 := durable.NewWorkflow[int]("evolving")
	durable.Step(v2, "new-step", noop[int], durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
	e := pgStart(t, env.newStore(t), durable.Config{}, v2)
	res := pgWait(t, e, oldRun, 20*time.Second)
	require.Equal(t, durable.RunFailed, res.Status)
	require.Contains(t, res.Err.Error(), durable.ErrUnknownStep.Error())
	require.Contains(t, res.Err.Error(), `step "old-step" of workflow "evolving" is not a step in this process's definition`)
	s, _ := res.Step("old-step")
	require.Equal(t, durable.StepFailed, s.State)
	require.Equal(t, 1, s.Attempts)

	res, err = v2.Run(ctx, e, "t", 2)
	require.NoError(t, err, "the worker still serves current runs")
	require.Equal(t, durable.RunCompleted, res.Status)
}

// TestPGPanicIsRetried: a panicking step is retried like an error; one that
// always panics fails its run with the panic; the engine keeps serving.
func TestPGPanicIsRetried(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 60*time.Second)
	var calls atomic.Int32
	flaky := durable.NewWorkflow[int]("panics-once")
	durable.Step(flaky, "boom", func(ctx durable.Context, in int) (int, error) {
		if calls.Add(1) == 1 {
			var m map[string]int
			m["x"] = 1 // nil map write
		}
		return 7, nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: 50 * time.Millisecond}))
	always := durable.NewWorkflow[int]("panics-always")
	durable.Step(always, "boom", func(ctx durable.Context, in int) (int, error) { panic("kaboom") })
	healthy := durable.NewWorkflow[int]("healthy")
	durable.Step(healthy, "a", noop[int])
	e := pgStart(t, env.store, durable.Config{}, flaky, always, healthy)

	res, err := flaky.Run(ctx, e, "t", 1)
	require.NoError(t, err, "a panic is retried like an error")
	require.EqualValues(t, 2, calls.Load())
	require.Equal(t, []string{"QUEUED/0", "STARTED/1", "RETRYING/1", "QUEUED/1", "STARTED/2", "COMPLETED/2"},
		stepEvents(t, e, res.ID, "boom"))
	require.Contains(t, pgEvent(t, e, res.ID, "boom", durable.EventRetrying).Detail, "panic: assignment to entry in nil map")

	res, err = always.Run(ctx, e, "t", 1)
	require.ErrorIs(t, err, durable.ErrRunFailed)
	require.Contains(t, res.Err.Error(), "panic: kaboom")

	res, err = healthy.Run(ctx, e, "t", 1)
	require.NoError(t, err, "the engine keeps serving")
	require.Equal(t, durable.RunCompleted, res.Status)
}

// ---- 7. dead execution --------------------------------------------------------

// TestPGDeadExecutionRescued: a worker claims a step through the store and
// dies (never heartbeats, never finishes). A live engine's leader rescues it
// after DeadAfter, the step runs there, and the dead claim's late outcome is
// rejected without changing the recorded output.
func TestPGDeadExecutionRescued(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 60*time.Second)
	const deadAfter, backoff = time.Second, 100 * time.Millisecond
	var mu sync.Mutex
	var attempts []int
	wf := durable.NewWorkflow[int]("rescue")
	step := durable.Step(wf, "work", func(ctx durable.Context, in int) (string, error) {
		mu.Lock()
		attempts = append(attempts, ctx.Attempt())
		mu.Unlock()
		return "done by " + ctx.WorkerID(), nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: backoff}))
	id, err := wf.RunNoWait(ctx, pgClient(t, env.store), "t", 1)
	require.NoError(t, err)

	ghost := "pg-ghost-" + uuid.NewString()[:8]
	claimed, err := env.store.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: ghost, Limit: 1, Workflows: []string{"rescue"}})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	e := pgStart(t, env.newStore(t), durable.Config{WorkerID: "pg-rescuer", HeartbeatInterval: 200 * time.Millisecond, DeadAfter: deadAfter}, wf)
	res := pgWait(t, e, id, 20*time.Second)
	require.Equal(t, durable.RunCompleted, res.Status)
	mu.Lock()
	require.Equal(t, []int{2}, attempts, "the dead worker's attempt counts; the step ran once here")
	mu.Unlock()

	evs, err := e.Events(ctx, id)
	require.NoError(t, err)
	var claimedAt, rescuedAt time.Time
	var detail string
	for _, ev := range evs {
		switch {
		case ev.Type == durable.EventStarted && ev.Attempt == 1:
			claimedAt = ev.At
		case ev.Type == durable.EventRetrying:
			rescuedAt, detail = ev.At, ev.Detail
		}
	}
	require.Contains(t, detail, "worker "+ghost+" lost")
	rescue := rescuedAt.Sub(claimedAt)
	done := res.FinishedAt.Sub(claimedAt)
	t.Logf("dead claim rescued %s after it was taken (DeadAfter %s); run completed %s after", rescue, deadAfter, done)
	require.GreaterOrEqual(t, rescue, deadAfter, "rescued before the worker was dead")
	require.LessOrEqual(t, rescue, deadAfter+deadAfter/4+500*time.Millisecond, "rescued within 1.25×DeadAfter (+ slack)")
	require.LessOrEqual(t, done, deadAfter+deadAfter/4+backoff+time.Second, "completed within 1.25×DeadAfter + backoff (+ slack)")

	late, err := env.store.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{{
		Task: claimed[0].Ref(), Kind: store.OutcomeComplete, Output: []byte(`"late"`),
	}}})
	require.NoError(t, err)
	require.Equal(t, store.FinishStale, late[0].Status)
	res, err = e.Get(ctx, id)
	require.NoError(t, err)
	out, err := step.Result(res)
	require.NoError(t, err)
	require.Equal(t, "done by pg-rescuer", out)
	require.Equal(t, []string{"QUEUED/0", "STARTED/1", "RETRYING/1", "QUEUED/1", "STARTED/2", "COMPLETED/2"},
		stepEvents(t, e, id, "work"), "the late outcome changed nothing")
}

// ---- 8. graceful stop ----------------------------------------------------------

// TestPGGracefulStopDrains: Stop stops claiming and leading at once, lets
// the running step finish and records it.
func TestPGGracefulStopDrains(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 60*time.Second)
	started := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	wf := durable.NewWorkflow[int]("drain")
	durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
		if calls.Add(1) == 1 {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return 0, context.Cause(ctx)
			}
		}
		return in, nil
	})
	leaders := newLeaderLog()
	e := pgLaunch(t, env.store, durable.Config{WorkerID: "pg-drainer", Logger: leaders.logger()}, wf)
	first, err := wf.RunNoWait(ctx, e, "t", 1)
	require.NoError(t, err)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the step never started")
	}

	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(ctx) }()
	pgEventually(t, 10*time.Second, func() bool { return leaders.said("pg-drainer", "durable: no longer leading") },
		"the stopping engine resigns at once")
	second, err := wf.RunNoWait(ctx, pgClient(t, env.newStore(t)), "t", 2)
	require.NoError(t, err)
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a step was running", err)
	default:
	}
	require.Equal(t, durable.StepRunning, pgStepState(t, e, first, "a"))
	close(release)
	require.NoError(t, <-stopped, "everything drained in time")

	res, err := e.Get(ctx, first)
	require.NoError(t, err)
	require.Equal(t, durable.RunCompleted, res.Status, "the in-flight step was recorded")
	res, err = e.Get(ctx, second)
	require.NoError(t, err)
	s, _ := res.Step("a")
	require.Equal(t, durable.StepQueued, s.State, "a stopping engine claims nothing new")
	require.Zero(t, s.Attempts)
	require.EqualValues(t, 1, calls.Load())
}

// TestPGHardStopReleasesTheStep: when the drain deadline passes, the step's
// context is cancelled (ErrEngineStopped) and its task is given back without
// counting the attempt; another engine completes it.
func TestPGHardStopReleasesTheStep(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 60*time.Second)
	causes := make(chan error, 1)
	started := make(chan struct{}, 1)
	var calls atomic.Int32
	build := func() *durable.Workflow[int] {
		wf := durable.NewWorkflow[int]("hard")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (string, error) {
			if calls.Add(1) == 1 {
				started <- struct{}{}
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return "", ctx.Err()
			}
			return fmt.Sprintf("attempt %d on %s", ctx.Attempt(), ctx.WorkerID()), nil
		})
		return wf
	}
	wf := build()
	e := pgLaunch(t, env.store, durable.Config{WorkerID: "pg-hard"}, wf)
	id, err := wf.RunNoWait(ctx, e, "t", 1)
	require.NoError(t, err)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the step never started")
	}
	stopCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, e.Stop(stopCtx), context.DeadlineExceeded)
	require.ErrorIs(t, <-causes, durable.ErrEngineStopped)

	res, err := e.Get(ctx, id)
	require.NoError(t, err)
	s, _ := res.Step("a")
	require.Equal(t, durable.StepQueued, s.State, "given back to the queue")
	require.Zero(t, s.Attempts, "the interrupted attempt does not count")
	require.Equal(t, "released by its worker", pgLastQueuedDetail(t, e, id, "a"))

	next := pgStart(t, env.newStore(t), durable.Config{WorkerID: "pg-next"}, build())
	res = pgWait(t, next, id, 20*time.Second)
	require.Equal(t, durable.RunCompleted, res.Status)
	s, _ = res.Step("a")
	require.Equal(t, 1, s.Attempts)
	require.JSONEq(t, `"attempt 1 on pg-next"`, string(s.Output))
	require.EqualValues(t, 2, calls.Load())
}

// ---- 9. Wait wakes on NOTIFY ---------------------------------------------------

// TestPGWaitWakesOnNotify: Run returns promptly after its run settles. A
// one-step run returns within a generous bound of its trigger; and a run
// whose step takes 3s returns right after the step, well before Wait's
// polling would have noticed (its delay doubles from 10ms while the engine
// receives notifications: checks at about 2.55s and 5.11s).
func TestPGWaitWakesOnNotify(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 60*time.Second)
	quick := durable.NewWorkflow[int]("quick")
	durable.Step(quick, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
	var ended atomic.Int64
	slow := durable.NewWorkflow[int]("slow")
	durable.Step(slow, "a", func(ctx durable.Context, in int) (int, error) {
		select {
		case <-time.After(3 * time.Second): // the step's own work
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		ended.Store(time.Now().UnixNano())
		return in, nil
	})
	e := pgStart(t, env.store, durable.Config{}, quick, slow)
	_, err := quick.Run(ctx, e, "t", 0) // warm up: listener connected, statements prepared
	require.NoError(t, err)

	var lat []time.Duration
	for i := range 5 {
		start := time.Now()
		res, err := quick.Run(ctx, e, "t", i)
		d := time.Since(start)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
		lat = append(lat, d)
	}
	slices.Sort(lat)
	t.Logf("one-step Run, trigger to return: %v (median %s)", lat, lat[len(lat)/2])
	require.Less(t, lat[len(lat)/2], 500*time.Millisecond, "median trigger→return latency")

	start := time.Now()
	res, err := slow.Run(ctx, e, "t", 1)
	require.NoError(t, err)
	returned := time.Now()
	require.Equal(t, durable.RunCompleted, res.Status)
	afterStep := returned.Sub(time.Unix(0, ended.Load()))
	t.Logf("3s step: Run returned %s after the step ended (%s after the trigger)", afterStep, returned.Sub(start))
	require.Less(t, afterStep, time.Second, "Wait was not woken by the run's notification")
}

// ---- bugs found --------------------------------------------------------------

// TestPGStopLeavesNoClaimBehind: an engine stopped gracefully while it works
// through a backlog must leave no task RUNNING behind: every task it claimed
// is either recorded or released by the time Stop returns. Otherwise the
// task waits DeadAfter for a rescue that counts as a failed attempt, and a
// step without retries fails its run because of a deploy.
//
// It fails today: Stop cancels rt.claimCtx while ClaimTasks may be in
// flight (engine.go:415); the claim statement commits in PostgreSQL anyway,
// pgstore returns "pgstore: claim: context canceled", and the claim loop
// drops the claimed tasks (engine.go:420).
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
		"nobody to run them. Stop cancels the context of an in-flight ClaimTasks (engine.go:415); the claim commits "+
		"in PostgreSQL anyway and the claim loop drops it (engine.go:420).", rounds, orphans, stopped)

	// What becomes of them: a live engine rescues them after DeadAfter, as
	// failed attempts; with no retries, their runs fail.
	e := pgStart(t, env.newStore(t), durable.Config{WorkerID: "pg-after-deploy"}, wf)
	failed := 0
	example := ""
	for _, id := range ids {
		res := pgWait(t, e, id, time.Minute)
		if res.Status == durable.RunFailed {
			failed++
			example = res.Err.Error()
		}
	}
	assert.Zero(t, failed, "BUG: %d of %d runs failed only because an engine was stopped gracefully; e.g. %s",
		failed, len(ids), example)
}

// TestPGRunNoWaitTxDoesNotStallOtherTenants: a caller's transaction that
// started a run with RunNoWaitTx and is still open must not stop the engine
// from recording the outcomes of other runs, least of all other tenants'.
//
// It fails today: CreateRunsTx locks the tenant's row FOR UPDATE
// (pgstore/create.go:185, queueTenantLock) inside the caller's transaction,
// so the lock is held until the caller commits. When a step of another run
// of that tenant finishes and enqueues a child, FinishTasks waits for the
// same lock (pgstore/transition.go:183), and since the engine records
// outcomes in a single goroutine (engine.go:484 completeLoop), every outcome
// of every tenant queues behind it. The leader's FireTimers and RescueTasks
// take the same lock when they enqueue, so timers can stall the same way.
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
	pgEventually(t, 10*time.Second, func() bool { return pgStepState(t, e, inFlight, "a") == durable.StepRunning },
		"tenant T's first step runs")

	tx, err := env.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	_, err = wf.RunNoWaitTx(ctx, e, tx, "tenant-T", "in the caller's transaction")
	require.NoError(t, err)
	close(release) // tenant T's step finishes while the caller's transaction is open

	other, err := wf.RunNoWait(ctx, e, "tenant-U", "unrelated")
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	_, waitErr := e.Wait(wctx, other)
	stalled := time.Since(start)
	state := pgStepState(t, e, other, "a")
	require.NoError(t, tx.Commit(ctx))
	res := pgWait(t, e, other, 20*time.Second)
	require.Equal(t, durable.RunCompleted, res.Status)
	t.Logf("tenant U's run: %v after %s with the transaction open (its first step %s); completed after commit", waitErr, stalled, state)
	assert.NoError(t, waitErr, "BUG: tenant U's 2-step run did not complete within 3s while a caller's transaction that "+
		"called RunNoWaitTx for tenant T was open (its first step was %s: ran, outcome not recorded). CreateRunsTx holds "+
		"tenant T's row lock until the caller commits (pgstore/create.go:185); FinishTasks for tenant T's in-flight run "+
		"waits on it (pgstore/transition.go:183) and the engine's single completer (engine.go:484) stalls behind it.", state)
}
