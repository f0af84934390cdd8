package durable_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

type validation struct {
	Valid  bool   `json:"valid"`
	Reason string `json:"reason"`
}

func TestSingleSkip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr counter
		wf := durable.NewWorkflow[int]("single-skip")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) {
			tr.inc("b")
			return 1, nil
		}, durable.After(a), durable.SkipIf(a, func(v int) bool { return v > 10 }))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)

		res, err := wf.Run(context.Background(), e, "t", 11)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status, "a skipped step does not fail the run")
		require.Equal(t, durable.StepSkipped, states(res)["b"])
		_, err = b.Result(res)
		require.ErrorIs(t, err, durable.ErrNoOutput)
		require.Zero(t, tr.get("b"))

		res, err = wf.Run(context.Background(), e, "t", 3)
		require.NoError(t, err)
		require.Equal(t, durable.StepCompleted, states(res)["b"])
		require.Equal(t, 1, tr.get("b"))
	})
}

func TestSkipCascadesThreeLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr counter
		wf := durable.NewWorkflow[int]("cascade")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) { tr.inc("b"); return 0, nil },
			durable.After(a), durable.SkipIf(a, func(int) bool { return true }))
		c := durable.Step(wf, "c", func(ctx durable.Context, in int) (int, error) { tr.inc("c"); return 0, nil }, durable.After(b))
		d := durable.Step(wf, "d", func(ctx durable.Context, in int) (int, error) { tr.inc("d"); return 0, nil }, durable.After(c))
		durable.Step(wf, "e", func(ctx durable.Context, in int) (int, error) { tr.inc("e"); return 0, nil }, durable.After(d))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		res, err := wf.Run(context.Background(), e, "t", 1)
		require.NoError(t, err)
		require.Equal(t, map[string]durable.StepState{
			"a": durable.StepCompleted, "b": durable.StepSkipped, "c": durable.StepSkipped,
			"d": durable.StepSkipped, "e": durable.StepSkipped,
		}, states(res))
		for _, s := range []string{"b", "c", "d", "e"} {
			require.Zero(t, tr.get(s), s)
		}
		evs, err := e.Events(context.Background(), res.ID)
		require.NoError(t, err)
		reasons := map[string]string{}
		for _, ev := range evs {
			if ev.Type == durable.EventSkipped {
				reasons[ev.Step] = ev.Detail
			}
		}
		require.Equal(t, `skip condition on "a" fired`, reasons["b"])
		require.Equal(t, "all parents skipped", reasons["e"])
	})
}

func TestBranchComplementaryPredicatesAndMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { scenarioBranchMerge(context.Background(), t, memStarter(memstore.New())) })
}

func TestSkipConditionsAreOred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wf := durable.NewWorkflow[[2]int]("or")
		a := durable.Step(wf, "a", func(ctx durable.Context, in [2]int) (int, error) { return in[0], nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, in [2]int) (int, error) { return in[1], nil })
		durable.Step(wf, "c", noop[[2]int], durable.After(a, b),
			durable.SkipIf(a, func(v int) bool { return v == 1 }),
			durable.SkipIf(b, func(v int) bool { return v == 1 }))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		for in, want := range map[[2]int]durable.StepState{
			{0, 0}: durable.StepCompleted,
			{1, 0}: durable.StepSkipped,
			{0, 1}: durable.StepSkipped,
			{1, 1}: durable.StepSkipped,
		} {
			res, err := wf.Run(context.Background(), e, "t", in)
			require.NoError(t, err)
			require.Equal(t, want, states(res)["c"], "input %v", in)
		}
	})
}

func TestPanickingSkipConditionFailsTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Bool
		wf := durable.NewWorkflow[int]("bad-predicate")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (*int, error) { return nil, nil })
		durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) { ran.Store(true); return 0, nil },
			durable.After(a), durable.SkipIf(a, func(p *int) bool { return *p > 0 }),
			durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		res, err := wf.Run(context.Background(), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.False(t, ran.Load())
		s, _ := res.Step("b")
		require.Equal(t, 1, s.Attempts, "a panicking condition is not retried")
		require.Contains(t, s.Error, `skip condition on "a"`)
	})
}

func TestSleep24Hours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var after time.Time
		wf := durable.NewWorkflow[int]("sleepy")
		a := durable.Step(wf, "before", noop[int])
		nap := durable.Sleep(wf, "nap", 24*time.Hour, durable.After(a))
		durable.Step(wf, "after", func(ctx durable.Context, in int) (int, error) {
			after = time.Now()
			if _, ok := nap.Output(ctx); !ok {
				return 0, fmt.Errorf("the sleep parent completed, its output must be present")
			}
			return 0, nil
		}, durable.After(nap))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		ctx := context.Background()
		start := time.Now()
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)

		time.Sleep(time.Hour)
		res, err := e.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.StepSleeping, states(res)["nap"])
		s, _ := res.Step("nap")
		require.True(t, s.DueAt.Equal(start.Add(24*time.Hour)), "due %s", s.DueAt)

		res, err = e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
		require.Equal(t, 24*time.Hour, after.Sub(start), "wakes exactly when due")

		evs, err := e.Events(ctx, id)
		require.NoError(t, err)
		var napEvents []durable.EventType
		for _, ev := range evs {
			if ev.Step == "nap" {
				napEvents = append(napEvents, ev.Type)
			}
		}
		require.Equal(t, []durable.EventType{durable.EventSleeping, durable.EventWoken}, napEvents)
	})
}

func TestSleepInABranch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wf := durable.NewWorkflow[bool]("sleep-branch")
		v := durable.Step(wf, "validate", func(ctx durable.Context, ok bool) (bool, error) { return ok, nil })
		charge := durable.Step(wf, "charge", noop[bool], durable.After(v), durable.SkipIf(v, func(ok bool) bool { return !ok }))
		window := durable.Sleep(wf, "fraud-window", 24*time.Hour, durable.After(charge))
		ship := durable.Step(wf, "ship", noop[bool], durable.After(window))
		reject := durable.Step(wf, "reject", noop[bool], durable.After(v), durable.SkipIf(v, func(ok bool) bool { return ok }))
		durable.Step(wf, "finalize", noop[bool], durable.After(ship, reject))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)

		start := time.Now()
		res, err := wf.Run(context.Background(), e, "t", false)
		require.NoError(t, err)
		require.Zero(t, time.Since(start), "the inactive branch's sleep is skipped, not slept")
		require.Equal(t, durable.StepSkipped, states(res)["fraud-window"])

		start = time.Now()
		res, err = wf.Run(context.Background(), e, "t", true)
		require.NoError(t, err)
		require.Equal(t, 24*time.Hour, time.Since(start))
		require.Equal(t, durable.StepCompleted, states(res)["fraud-window"])
		require.Equal(t, durable.StepSkipped, states(res)["reject"])
		require.Equal(t, durable.StepCompleted, states(res)["finalize"])
	})
}

func TestParallelSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		woke := map[string]time.Duration{}
		wf := durable.NewWorkflow[int]("two-naps")
		start := time.Now()
		a := durable.Step(wf, "a", noop[int])
		s1 := durable.Sleep(wf, "one-hour", time.Hour, durable.After(a))
		s2 := durable.Sleep(wf, "two-hours", 2*time.Hour, durable.After(a))
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
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		_, err := wf.Run(context.Background(), e, "t", 1)
		require.NoError(t, err)
		require.Equal(t, map[string]time.Duration{"after-one": time.Hour, "after-two": 2 * time.Hour, "join": 2 * time.Hour}, woke)
	})
}

// TestSleepSurvivesEngineRestart: every engine is stopped while a run
// sleeps; an engine started after the due time picks the run up.
func TestSleepSurvivesEngineRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var afterRan atomic.Bool
		build := func() *durable.Workflow[int] {
			wf := durable.NewWorkflow[int]("restart")
			a := durable.Step(wf, "a", noop[int])
			nap := durable.Sleep(wf, "nap", time.Hour, durable.After(a))
			durable.Step(wf, "after", func(durable.Context, int) (int, error) { afterRan.Store(true); return 0, nil }, durable.After(nap))
			return wf
		}
		s := memstore.New()
		ctx := context.Background()
		wf := build()
		first := launch(t, s, durable.Config{}, wf)
		id, err := wf.RunNoWait(ctx, first, "t", 1)
		require.NoError(t, err)
		synctest.Wait()
		require.NoError(t, first.Stop(ctx))
		res, err := first.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.StepSleeping, states(res)["nap"])

		time.Sleep(3 * time.Hour) // nobody is running
		require.False(t, afterRan.Load())

		second := startEngine(t, s, durable.Config{}, build())
		res, err = second.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
		require.True(t, afterRan.Load())
	})
}
