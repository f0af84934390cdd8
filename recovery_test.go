package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

func TestFairnessAcrossTenants(t *testing.T) {
	for _, backlog := range []int{5, 10_000} {
		t.Run(fmt.Sprint(backlog), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var order []string
				wf := durable.NewWorkflow[int]("fair")
				durable.Step(wf, "work", func(ctx durable.Context, in int) (int, error) {
					mu.Lock()
					order = append(order, ctx.TenantID())
					mu.Unlock()
					return 0, nil
				})
				s := memstore.New()
				// Trigger first, from a client engine, so that the backlog is
				// queued before any worker claims.
				client := newEngineOn(t, s)
				ctx := context.Background()
				triggers := make([]durable.Trigger[int], backlog)
				for i := range triggers {
					triggers[i] = durable.Trigger[int]{Tenant: "B", Input: i}
				}
				_, err := wf.RunManyNoWait(ctx, client, triggers)
				require.NoError(t, err)
				id, err := wf.RunNoWait(ctx, client, "A", 0)
				require.NoError(t, err)

				e := startEngine(t, s, durable.Config{Concurrency: 1}, wf)
				_, err = e.Wait(ctx, id)
				require.NoError(t, err)
				mu.Lock()
				defer mu.Unlock()
				require.Contains(t, order[:2], "A", "A runs within the first two executions (of %d)", len(order))
			})
		})
	}
}

func newEngineOn(t *testing.T, s *memstore.Store) *durable.Engine {
	t.Helper()
	e, err := durable.New(s, durable.Config{Logger: quiet})
	require.NoError(t, err)
	return e
}

// TestDeadExecutionRecovery: a worker claims a step and dies (it never
// heartbeats nor finishes). The leader of a live engine finds it after
// DeadAfter, the step runs again there, and the dead worker's late outcome
// is rejected without touching the recorded one.
func TestDeadExecutionRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts []int
		var mu sync.Mutex
		wf := durable.NewWorkflow[int]("rescue")
		step := durable.Step(wf, "work", func(ctx durable.Context, in int) (string, error) {
			mu.Lock()
			attempts = append(attempts, ctx.Attempt())
			mu.Unlock()
			return "done by the live worker", nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Second}))
		s := memstore.New()
		ctx := context.Background()
		client := newEngineOn(t, s)
		id, err := wf.RunNoWait(ctx, client, "t", 1)
		require.NoError(t, err)

		// The doomed worker claims the task, then "crashes".
		claimed, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: "doomed", Limit: 1, Workflows: []string{"rescue"}})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		crashedAt := time.Now()

		const deadAfter = 20 * time.Second
		e := startEngine(t, s, durable.Config{HeartbeatInterval: 5 * time.Second, DeadAfter: deadAfter}, wf)
		res, err := e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
		recovered := time.Since(crashedAt)
		require.GreaterOrEqual(t, recovered, deadAfter)
		require.LessOrEqual(t, recovered, deadAfter+deadAfter/4+time.Second, "rescued within 1.25×DeadAfter (+ the backoff)")
		require.Equal(t, []int{2}, attempts, "the dead worker's attempt counts")

		late, err := s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{{
			Task: claimed[0].Ref(), Kind: store.OutcomeComplete, Output: []byte(`"late"`),
		}}})
		require.NoError(t, err)
		require.Equal(t, store.FinishStale, late[0].Status)
		res, err = e.Get(ctx, id)
		require.NoError(t, err)
		out, err := step.Result(res)
		require.NoError(t, err)
		require.Equal(t, "done by the live worker", out)

		evs, err := e.Events(ctx, id)
		require.NoError(t, err)
		var retry durable.Event
		for _, ev := range evs {
			if ev.Type == durable.EventRetrying {
				retry = ev
			}
		}
		require.Contains(t, retry.Detail, "worker doomed lost")
	})
}

// TestClaimLostCancelsTheStep: when a step's claim is taken away (here the
// store rescues it as if its worker were dead), the engine running it
// cancels its context with ErrClaimLost at the next heartbeat, and the step
// runs again under the new claim.
func TestClaimLostCancelsTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 4)
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("lost")
		durable.Step(wf, "long", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) == 1 {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return 0, ctx.Err()
			}
			return 1, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Second}))
		s := memstore.New()
		e := startEngine(t, s, durable.Config{HeartbeatInterval: time.Second, DeadAfter: time.Hour}, wf)
		ctx := context.Background()
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		synctest.Wait()
		_, err = s.RescueTasks(ctx, &store.RescueTasksParams{Now: time.Now().Add(2 * time.Hour), DeadAfter: time.Hour, Limit: 10})
		require.NoError(t, err)
		require.ErrorIs(t, <-causes, durable.ErrClaimLost)
		res, err := e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
		require.EqualValues(t, 2, calls.Load())
	})
}

func TestHeartbeatFromTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan error, 2)
		proceed := make(chan struct{})
		wf := durable.NewWorkflow[int]("hb")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			got <- ctx.Heartbeat()
			<-proceed
			got <- ctx.Heartbeat()
			return 0, nil
		})
		s := memstore.New()
		e := startEngine(t, s, durable.Config{DeadAfter: time.Hour}, wf)
		ctx := context.Background()
		_, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		require.NoError(t, <-got)
		_, err = s.RescueTasks(ctx, &store.RescueTasksParams{Now: time.Now().Add(2 * time.Hour), DeadAfter: time.Hour, Limit: 10})
		require.NoError(t, err)
		close(proceed)
		require.ErrorIs(t, <-got, durable.ErrClaimLost)
	})
}

func TestGracefulStopDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		release := make(chan struct{})
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("drain")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) == 1 {
				close(started)
				<-release
			}
			return in, nil
		})
		s := memstore.New()
		e := launch(t, s, durable.Config{}, wf)
		ctx := context.Background()
		first, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		<-started

		stopped := make(chan error)
		go func() { stopped <- e.Stop(ctx) }()
		synctest.Wait()
		_, err = wf.RunNoWait(ctx, e, "t", 2)
		require.ErrorIs(t, err, durable.ErrEngineStopped, "a stopping engine starts no runs")
		client, err := durable.New(s, durable.Config{Logger: quiet})
		require.NoError(t, err)
		second, err := wf.RunNoWait(ctx, client, "t", 2)
		require.NoError(t, err)
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("Stop returned while a step was running")
		default:
		}
		close(release)
		require.NoError(t, <-stopped, "everything drained in time")

		res, err := e.Get(ctx, first)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status, "the in-flight step was recorded")
		res, err = e.Get(ctx, second)
		require.NoError(t, err)
		require.Equal(t, durable.StepQueued, states(res)["a"], "a stopping engine claims nothing new")
		require.EqualValues(t, 1, calls.Load())
	})
}

func TestHardStopReleasesTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 1)
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("hard")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) == 1 {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return 0, ctx.Err()
			}
			return ctx.Attempt(), nil
		})
		s := memstore.New()
		e := launch(t, s, durable.Config{}, wf)
		ctx := context.Background()
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		synctest.Wait()
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.ErrorIs(t, e.Stop(stopCtx), context.DeadlineExceeded)
		require.ErrorIs(t, <-causes, durable.ErrEngineStopped)
		res, err := e.Get(ctx, id)
		require.NoError(t, err)
		s0, _ := res.Step("a")
		require.Equal(t, durable.StepQueued, s0.State, "given back to the queue")
		require.Zero(t, s0.Attempts, "the interrupted attempt does not count")

		next := startEngine(t, s, durable.Config{}, wf)
		res, err = next.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
		s0, _ = res.Step("a")
		require.Equal(t, 1, s0.Attempts)
	})
}

// TestChangedDefinitionFailsClearly: a run started under one version of a
// workflow is executed by a process whose version lacks the step; the step
// fails with a clear error and the worker keeps serving other runs.
func TestChangedDefinitionFailsClearly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := durable.NewWorkflow[int]("evolving")
		durable.Step(v1, "old-step", noop[int])
		s := memstore.New()
		ctx := context.Background()
		client := newEngineOn(t, s)
		oldRun, err := v1.RunNoWait(ctx, client, "t", 1)
		require.NoError(t, err)

		v2 := durable.NewWorkflow[int]("evolving")
		durable.Step(v2, "new-step", noop[int])
		e := startEngine(t, s, durable.Config{}, v2)
		res, err := e.Wait(ctx, oldRun)
		require.NoError(t, err)
		require.Equal(t, durable.RunFailed, res.Status)
		require.ErrorIs(t, res.Err, durable.ErrRunFailed)
		require.Contains(t, res.Err.Error(), `step "old-step" of workflow "evolving" is not a step in this process's definition`)

		res, err = v2.Run(ctx, e, "t", 2)
		require.NoError(t, err, "the worker still serves current runs")
		require.Equal(t, durable.RunCompleted, res.Status)
	})
}

func TestUndecodableInputFailsTheStepNotTheWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := durable.NewWorkflow[string]("typed")
		durable.Step(v1, "a", noop[string])
		s := memstore.New()
		ctx := context.Background()
		bad, err := v1.RunNoWait(ctx, newEngineOn(t, s), "t", "not a number")
		require.NoError(t, err)

		v2 := durable.NewWorkflow[int]("typed")
		durable.Step(v2, "a", noop[int])
		e := startEngine(t, s, durable.Config{}, v2)
		res, err := e.Wait(ctx, bad)
		require.NoError(t, err)
		require.Equal(t, durable.RunFailed, res.Status)
		require.Contains(t, res.Err.Error(), "cannot decode value")
		s0, _ := res.Step("a")
		require.Equal(t, 1, s0.Attempts, "bad data is not retried")

		res, err = v2.Run(ctx, e, "t", 3)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
	})
}

// lopsided encodes fine but does not decode back: its output would corrupt
// every child, so the step producing it fails instead.
type lopsided struct{}

func (lopsided) MarshalJSON() ([]byte, error) { return []byte(`"text"`), nil }
func (*lopsided) UnmarshalJSON(b []byte) error {
	var n int
	return json.Unmarshal(b, &n)
}

func TestOutputThatDoesNotRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wf := durable.NewWorkflow[int]("roundtrip")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (lopsided, error) { return lopsided{}, nil },
			durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
		durable.Step(wf, "b", noop[int], durable.After(a))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		res, err := wf.Run(context.Background(), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		s, _ := res.Step("a")
		require.Equal(t, 1, s.Attempts)
		require.Contains(t, s.Error, "does not decode back into its type")
		require.Equal(t, durable.StepCancelled, states(res)["b"])
	})
}

func TestEventLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("events")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) == 1 {
				return 0, errors.New("once")
			}
			return 1, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Second}))
		skip := durable.Step(wf, "skipped", noop[int], durable.After(a), durable.SkipIf(a, func(int) bool { return true }))
		nap := durable.Sleep(wf, "nap", time.Minute, durable.After(a))
		durable.Step(wf, "end", noop[int], durable.After(skip, nap))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		res, err := wf.Run(context.Background(), e, "t", 1)
		require.NoError(t, err)
		evs, err := e.Events(context.Background(), res.ID)
		require.NoError(t, err)
		byStep := map[string][]string{}
		for i, ev := range evs {
			byStep[ev.Step] = append(byStep[ev.Step], fmt.Sprintf("%s/%d", ev.Type, ev.Attempt))
			require.Equal(t, res.ID, ev.RunID)
			if i > 0 {
				require.False(t, ev.At.Before(evs[i-1].At), "events are in time order")
			}
		}
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "RETRYING/1", "QUEUED/1", "STARTED/2", "COMPLETED/2"}, byStep["a"])
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "SKIPPED/1"}, byStep["skipped"])
		require.Equal(t, []string{"SLEEPING/0", "WOKEN/0"}, byStep["nap"])
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, byStep["end"])

		// A failed run logs FAILED, CANCELLED and the handler's own events.
		bad := durable.NewWorkflow[int]("events-fail")
		x := durable.Step(bad, "x", func(ctx durable.Context, in int) (int, error) { return 0, durable.Terminal(errors.New("no")) })
		durable.Step(bad, "y", noop[int], durable.After(x))
		bad.OnFailure(func(durable.Context, int, durable.Failure) error { return nil })
		require.NoError(t, e.Register(bad))
		res, _ = bad.Run(context.Background(), e, "t", 1)
		evs, err = e.Events(context.Background(), res.ID)
		require.NoError(t, err)
		var got []string
		for _, ev := range evs {
			got = append(got, fmt.Sprintf("%s:%s", ev.Step, ev.Type))
		}
		require.Equal(t, []string{
			"x:QUEUED", "x:STARTED", "x:FAILED", "y:CANCELLED",
			durable.OnFailureStep + ":QUEUED", durable.OnFailureStep + ":STARTED", durable.OnFailureStep + ":COMPLETED",
		}, got)
	})
}
