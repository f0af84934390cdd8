package durable_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Skip conditions, branches and durable sleeps. Each test runs on both
// stores (suite_test.go): sleeps last hours in virtual time in memory, where
// timings are asserted exactly, and a fraction of a second on PostgreSQL,
// where they are asserted through the event log.

type validation struct {
	Valid  bool   `json:"valid"`
	Reason string `json:"reason"`
}

func TestSingleSkip(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var tr counter
		wf := durable.NewWorkflow[int]("single-skip")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) {
			tr.inc("b")
			return 1, nil
		}, durable.After(a), durable.SkipIf(a, func(v int) bool { return v > 10 }))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(30 * time.Second)

		res, err := wf.Run(ctx, e, "t", 11)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "a skipped step does not fail the run")
		require.Equal(t, durabletype.TaskSkipped, states(res)["b"])
		_, err = b.Result(res)
		require.ErrorIs(t, err, durable.ErrNoOutput)
		require.Zero(t, tr.get("b"))

		res, err = wf.Run(ctx, e, "t", 3)
		require.NoError(t, err)
		require.Equal(t, durabletype.TaskCompleted, states(res)["b"])
		require.Equal(t, 1, tr.get("b"))
	})
}

func TestSkipCascadesThreeLevels(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var tr counter
		wf := durable.NewWorkflow[int]("cascade")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) { tr.inc("b"); return 0, nil },
			durable.After(a), durable.SkipIf(a, func(int) bool { return true }))
		c := durable.Step(wf, "c", func(ctx durable.Context, in int) (int, error) { tr.inc("c"); return 0, nil }, durable.After(b))
		d := durable.Step(wf, "d", func(ctx durable.Context, in int) (int, error) { tr.inc("d"); return 0, nil }, durable.After(c))
		durable.Step(wf, "e", func(ctx durable.Context, in int) (int, error) { tr.inc("e"); return 0, nil }, durable.After(d))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(30 * time.Second)
		res, err := wf.Run(ctx, e, "t", 1)
		require.NoError(t, err)
		require.Equal(t, map[string]durabletype.TaskState{
			"a": durabletype.TaskCompleted, "b": durabletype.TaskSkipped, "c": durabletype.TaskSkipped,
			"d": durabletype.TaskSkipped, "e": durabletype.TaskSkipped,
		}, states(res))
		for _, s := range []string{"b", "c", "d", "e"} {
			require.Zero(t, tr.get(s), s)
		}
		evs, err := e.Events(ctx, res.ID)
		require.NoError(t, err)
		reasons := map[string]string{}
		for _, ev := range evs {
			if ev.Type == durabletype.EventSkipped {
				reasons[ev.Step] = ev.Detail
			}
		}
		require.Equal(t, `skip condition on "a" fired`, reasons["b"])
		require.Equal(t, "all parents skipped", reasons["e"])
	})
}

// TestBranchComplementaryPredicatesAndMerge is the seeds' branch: validate
// -> charge -> ship | reject, then finalize after both. Complementary skip
// conditions pick the branch, the skip cascades down the other one, and the
// merge step runs after whichever ran, seeing only its output.
func TestBranchComplementaryPredicatesAndMerge(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var ran counter
		wf := durable.NewWorkflow[int]("branch")
		validate := durable.Step(wf, "validate", func(ctx durable.Context, amount int) (validation, error) {
			ran.inc("validate")
			if amount <= 0 {
				return validation{Valid: false, Reason: "non-positive amount"}, nil
			}
			return validation{Valid: true}, nil
		})
		charge := durable.Step(wf, "charge", func(ctx durable.Context, amount int) (string, error) {
			ran.inc("charge")
			return fmt.Sprintf("charged %d", amount), nil
		}, durable.After(validate), durable.SkipIf(validate, func(v validation) bool { return !v.Valid }))
		ship := durable.Step(wf, "ship", func(ctx durable.Context, amount int) (string, error) {
			ran.inc("ship")
			c, _ := charge.Output(ctx)
			return c + ", shipped", nil
		}, durable.After(charge))
		reject := durable.Step(wf, "reject", func(ctx durable.Context, amount int) (string, error) {
			ran.inc("reject")
			v, _ := validate.Output(ctx)
			return "rejected: " + v.Reason, nil
		}, durable.After(validate), durable.SkipIf(validate, func(v validation) bool { return v.Valid }))
		finalize := durable.Step(wf, "finalize", func(ctx durable.Context, amount int) (string, error) {
			ran.inc("finalize")
			shipped, okShip := ship.Output(ctx)
			rejected, okReject := reject.Output(ctx)
			if okShip == okReject {
				return "", fmt.Errorf("exactly one branch must have run (ship %v, reject %v)", okShip, okReject)
			}
			if okShip {
				return shipped, nil
			}
			return rejected, nil
		}, durable.After(ship, reject))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)

		res, err := wf.Run(ctx, e, "t", 30)
		require.NoError(t, err)
		require.Equal(t, map[string]durabletype.TaskState{
			"validate": durabletype.TaskCompleted, "charge": durabletype.TaskCompleted, "ship": durabletype.TaskCompleted,
			"reject": durabletype.TaskSkipped, "finalize": durabletype.TaskCompleted,
		}, states(res))
		out, err := finalize.Result(res)
		require.NoError(t, err)
		require.Equal(t, "charged 30, shipped", out)

		res, err = wf.Run(ctx, e, "t", -1)
		require.NoError(t, err)
		require.Equal(t, map[string]durabletype.TaskState{
			"validate": durabletype.TaskCompleted, "charge": durabletype.TaskSkipped, "ship": durabletype.TaskSkipped,
			"reject": durabletype.TaskCompleted, "finalize": durabletype.TaskCompleted,
		}, states(res), "the merge point runs after whichever branch ran")
		out, err = finalize.Result(res)
		require.NoError(t, err)
		require.Equal(t, "rejected: non-positive amount", out)
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "SKIPPED/1"}, stepEvents(t, e, res.ID, "charge"),
			"a skip condition runs on the worker")
		require.Equal(t, []string{"SKIPPED/0"}, stepEvents(t, e, res.ID, "ship"), "the cascade needs no worker")
		require.Equal(t, map[string]int{"validate": 2, "charge": 1, "ship": 1, "reject": 1, "finalize": 2}, ran.snapshot())
	})
}

func TestSkipConditionsAreOred(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[[2]int]("or")
		a := durable.Step(wf, "a", func(ctx durable.Context, in [2]int) (int, error) { return in[0], nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, in [2]int) (int, error) { return in[1], nil })
		durable.Step(wf, "c", noop[[2]int], durable.After(a, b),
			durable.SkipIf(a, func(v int) bool { return v == 1 }),
			durable.SkipIf(b, func(v int) bool { return v == 1 }))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		for in, want := range map[[2]int]durabletype.TaskState{
			{0, 0}: durabletype.TaskCompleted,
			{1, 0}: durabletype.TaskSkipped,
			{0, 1}: durabletype.TaskSkipped,
			{1, 1}: durabletype.TaskSkipped,
		} {
			res, err := wf.Run(ctx, e, "t", in)
			require.NoError(t, err)
			require.Equal(t, want, states(res)["c"], "input %v", in)
		}
	})
}

func TestPanickingSkipConditionFailsTheStep(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var ran atomic.Bool
		wf := durable.NewWorkflow[int]("bad-predicate")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (*int, error) { return nil, nil })
		durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) { ran.Store(true); return 0, nil },
			durable.After(a), durable.SkipIf(a, func(p *int) bool { return *p > 0 }),
			durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(30*time.Second), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.False(t, ran.Load())
		s, _ := res.Step("b")
		require.Equal(t, 1, s.Attempts, "a panicking condition is not retried")
		require.Contains(t, s.Error, `skip condition on "a"`)
	})
}

// requireSlept asserts, from the event log, that a run's sleep step slept
// for d: it was due d after it began, woke no earlier, and its child started
// after it woke.
func requireSlept(t *testing.T, e *durable.Engine, res *durable.RunResult, step, child string, d time.Duration) {
	t.Helper()
	require.Equal(t, []string{"SLEEPING/0", "WOKEN/0"}, stepEvents(t, e, res.ID, step))
	sleeping := eventOf(t, e, res.ID, step, durabletype.EventSleeping)
	woken := eventOf(t, e, res.ID, step, durabletype.EventWoken)
	started := eventOf(t, e, res.ID, child, durabletype.EventStarted)
	require.Equal(t, d, sleeping.DueAt.Sub(sleeping.At), "%s is due its duration after it began", step)
	require.False(t, woken.At.Before(sleeping.DueAt), "%s woke at %s, before due %s", step, woken.At, sleeping.DueAt)
	require.False(t, started.At.Before(woken.At), "%s started at %s, before %s woke at %s", child, started.At, step, woken.At)
	t.Logf("%s woke %s after due", step, woken.At.Sub(sleeping.DueAt))
}

// TestSleep: a sleep step sleeps durably (SLEEPING with its due time, no
// worker held) and its child runs once it has woken, with the sleep's
// output present. In virtual time, a 24-hour sleep wakes exactly when due.
func TestSleep(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		nap := h.duration(24*time.Hour, 300*time.Millisecond)
		var after atomic.Int64
		wf := durable.NewWorkflow[int]("sleepy")
		a := durable.Step(wf, "before", noop[int])
		s := durable.Sleep(wf, "nap", nap, durable.After(a))
		durable.Step(wf, "after", func(ctx durable.Context, in int) (int, error) {
			after.Store(time.Now().UnixNano())
			if _, ok := s.Output(ctx); !ok {
				return 0, fmt.Errorf("the sleep parent completed, its output must be present")
			}
			return in, nil
		}, durable.After(s))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(h.duration(48*time.Hour, 30*time.Second))
		start := time.Now()
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)

		if h.virtual {
			time.Sleep(time.Hour)
			res, err := e.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, durabletype.TaskSleeping, states(res)["nap"])
			s, _ := res.Step("nap")
			require.True(t, s.DueAt.Equal(start.Add(24*time.Hour)), "due %s", s.DueAt)
		}

		res, err := e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		requireSlept(t, e, res, "nap", "after", nap)
		if h.virtual {
			require.Equal(t, 24*time.Hour, time.Unix(0, after.Load()).Sub(start), "wakes exactly when due")
		}
	})
}

// TestSleepInABranch: the sleep on the branch not taken is skipped, not
// slept; on the branch taken, it is slept.
func TestSleepInABranch(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		nap := h.duration(24*time.Hour, 200*time.Millisecond)
		wf := durable.NewWorkflow[bool]("sleep-branch")
		v := durable.Step(wf, "validate", func(ctx durable.Context, ok bool) (bool, error) { return ok, nil })
		charge := durable.Step(wf, "charge", noop[bool], durable.After(v), durable.SkipIf(v, func(ok bool) bool { return !ok }))
		window := durable.Sleep(wf, "fraud-window", nap, durable.After(charge))
		ship := durable.Step(wf, "ship", noop[bool], durable.After(window))
		reject := durable.Step(wf, "reject", noop[bool], durable.After(v), durable.SkipIf(v, func(ok bool) bool { return ok }))
		durable.Step(wf, "finalize", noop[bool], durable.After(ship, reject))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(h.duration(48*time.Hour, 30*time.Second))

		start := time.Now()
		res, err := wf.Run(ctx, e, "t", false)
		require.NoError(t, err)
		if h.virtual {
			require.Zero(t, time.Since(start), "the inactive branch's sleep is skipped, not slept")
		}
		require.Equal(t, durabletype.TaskSkipped, states(res)["fraud-window"])
		require.Equal(t, []string{"SKIPPED/0"}, stepEvents(t, e, res.ID, "fraud-window"),
			"the inactive branch's sleep is skipped, not slept")

		start = time.Now()
		res, err = wf.Run(ctx, e, "t", true)
		require.NoError(t, err)
		if h.virtual {
			require.Equal(t, 24*time.Hour, time.Since(start))
		} else {
			require.GreaterOrEqual(t, time.Since(start), nap)
		}
		require.Equal(t, durabletype.TaskCompleted, states(res)["fraud-window"])
		require.Equal(t, durabletype.TaskSkipped, states(res)["reject"])
		require.Equal(t, durabletype.TaskCompleted, states(res)["finalize"])
		requireSlept(t, e, res, "fraud-window", "ship", nap)
	})
}

// TestParallelSleeps: two sleeps after one step sleep at the same time, each
// for its own duration, and the join after both waits for the longer one.
func TestParallelSleeps(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		one, two := h.duration(time.Hour, 200*time.Millisecond), h.duration(2*time.Hour, 400*time.Millisecond)
		var mu sync.Mutex
		woke := map[string]time.Duration{}
		wf := durable.NewWorkflow[int]("two-naps")
		start := time.Now()
		a := durable.Step(wf, "a", noop[int])
		s1 := durable.Sleep(wf, "one", one, durable.After(a))
		s2 := durable.Sleep(wf, "two", two, durable.After(a))
		mark := func(name string) func(durable.Context, int) (int, error) {
			return func(durable.Context, int) (int, error) {
				mu.Lock()
				woke[name] = time.Since(start)
				mu.Unlock()
				return 0, nil
			}
		}
		d1 := durable.Step(wf, "after-one", mark("after-one"), durable.After(s1))
		d2 := durable.Step(wf, "after-two", mark("after-two"), durable.After(s2))
		durable.Step(wf, "join", mark("join"), durable.After(d1, d2))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(h.duration(24*time.Hour, 30*time.Second)), e, "t", 1)
		require.NoError(t, err)
		requireSlept(t, e, res, "one", "after-one", one)
		requireSlept(t, e, res, "two", "after-two", two)
		mu.Lock()
		defer mu.Unlock()
		if h.virtual {
			require.Equal(t, map[string]time.Duration{"after-one": time.Hour, "after-two": 2 * time.Hour, "join": 2 * time.Hour}, woke)
			return
		}
		require.GreaterOrEqual(t, woke["after-one"], one)
		require.GreaterOrEqual(t, woke["after-two"], two)
		require.GreaterOrEqual(t, woke["join"], woke["after-two"])
		require.GreaterOrEqual(t, woke["join"], woke["after-one"])
	})
}

// TestSleepWakesOnTime: the leader sleeps until the next due timer; a
// sooner timer created meanwhile wakes it early (the store's timer
// notification: NOTIFY on PostgreSQL), so a short sleep (1s in memory,
// 0.5s on PostgreSQL) wakes on time although the leader was waiting on a
// 1-hour sleep: exactly when due in virtual time, and on PostgreSQL within
// a bound far below the leader's one-minute fallback.
func TestSleepWakesOnTime(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		long := durable.NewWorkflow[int]("long-nap")
		durable.Sleep(long, "nap", time.Hour)
		short := durable.NewWorkflow[int]("short-nap")
		first := durable.Step(short, "first", noop[int])
		durable.Sleep(short, "nap", h.duration(time.Second, 500*time.Millisecond), durable.After(first))
		leaders := newLeaderLog()
		e := h.start(durable.Config{WorkerID: "sleeper", Logger: leaders.logger()}, long, short)
		ctx := h.ctx(time.Minute)

		longID, err := long.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		h.eventually(10*time.Second, func() bool {
			return len(leaders.leaders()) == 1 && stepState(t, e, longID, "nap") == durabletype.TaskSleeping
		}, "the engine leads and the 1h sleep has begun")

		id, err := short.RunNoWait(ctx, e, "t", 2)
		require.NoError(t, err)
		res := h.wait(e, id, 20*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		sleeping := eventOf(t, e, id, "nap", durabletype.EventSleeping)
		woken := eventOf(t, e, id, "nap", durabletype.EventWoken)
		late := woken.At.Sub(sleeping.DueAt)
		t.Logf("short sleep woke %s after its due time (the leader was waiting on a 1h timer)", late)
		require.GreaterOrEqual(t, late, time.Duration(0), "woke before due")
		if h.virtual {
			require.Zero(t, late, "woke late: the leader was not woken by the new, sooner timer")
		}
		// Without the notification the leader would sleep on until it asks
		// the store again (maxTimerWait, a minute), and the wait above would
		// time out. The bound leaves room for a loaded machine (CI saw
		// 321ms with every package's tests running beside it) and is still
		// far below that minute.
		require.Less(t, late, 5*time.Second, "woke too late: the leader was not woken by the new, sooner timer")
		require.Equal(t, durabletype.TaskSleeping, stepState(t, e, longID, "nap"))
	})
}

// TestSleepSurvivesFullStop: every engine is stopped while a run sleeps;
// nothing happens while nobody runs, and a new engine (on a new store
// object, as a new process would have) started after the due time finishes
// the run at once.
func TestSleepSurvivesFullStop(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var after counter
		build := func() *durable.Workflow[int] {
			wf := durable.NewWorkflow[int]("restart")
			a := durable.Step(wf, "a", noop[int])
			// On PostgreSQL, long enough for both engines to stop before it
			// is due, on a loaded machine too.
			nap := durable.Sleep(wf, "nap", h.duration(time.Hour, 5*time.Second), durable.After(a))
			durable.Step(wf, "after", func(ctx durable.Context, in int) (int, error) {
				after.inc("after")
				return in, nil
			}, durable.After(nap))
			return wf
		}
		ctx := h.ctx(h.duration(24*time.Hour, time.Minute))
		wf := build()
		e1 := h.launchOn(h.store, durable.Config{}, wf)
		e2 := h.launchOn(h.another(), durable.Config{}, build())
		id, err := wf.RunNoWait(ctx, e1, "t", 1)
		require.NoError(t, err)
		h.eventually(10*time.Second, func() bool { return stepState(t, e1, id, "nap") == durabletype.TaskSleeping },
			"the run sleeps")
		require.NoError(t, e1.Stop(ctx))
		require.NoError(t, e2.Stop(ctx))
		due := eventOf(t, e1, id, "nap", durabletype.EventSleeping).DueAt

		// Let the due time pass with nobody running (waiting for time itself,
		// not standing in for synchronisation).
		time.Sleep(time.Until(due.Add(h.duration(2*time.Hour, 500*time.Millisecond))))
		client := h.client()
		res, err := client.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.TaskSleeping, states(res)["nap"], "no engine runs, so nothing fires the timer")
		require.Zero(t, after.get("after"))

		restarted := time.Now()
		e3 := h.startOn(h.another(), durable.Config{}, build())
		res = h.wait(e3, id, h.duration(time.Hour, 20*time.Second))
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.Equal(t, 1, after.get("after"))
		woken := eventOf(t, e3, id, "nap", durabletype.EventWoken)
		if h.virtual {
			require.True(t, woken.At.Equal(restarted), "woken the moment the new engine started (at %s, restarted at %s)", woken.At, restarted)
		} else {
			require.True(t, woken.At.After(restarted), "woken by the new engine (at %s, restarted at %s)", woken.At, restarted)
		}
		t.Logf("woke %s after the restart, %s after due", woken.At.Sub(restarted), woken.At.Sub(due))
	})
}
