package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Fairness, dead workers, lost claims, stopping, changed definitions and
// bad data. Each test runs on both stores (suite_test.go).

func TestFairnessAcrossTenants(t *testing.T) {
	t.Parallel()
	for _, backlog := range []int{5, 10_000} {
		t.Run(fmt.Sprint(backlog), func(t *testing.T) {
			both(t, func(t *testing.T, h *harness) {
				var mu sync.Mutex
				var order []string
				wf := durable.NewWorkflow[int]("fair")
				durable.Step(wf, "work", func(ctx durable.Context, in int) (int, error) {
					mu.Lock()
					order = append(order, ctx.TenantID())
					mu.Unlock()
					return 0, nil
				})
				// Trigger first, from a client engine, so that the backlog is
				// queued before any worker claims.
				client := h.client()
				ctx := h.ctx(time.Minute)
				triggers := make([]durable.Trigger[int], backlog)
				for i := range triggers {
					triggers[i] = durable.Trigger[int]{Tenant: "B", Input: i}
				}
				_, err := wf.RunManyNoWait(ctx, client, triggers)
				require.NoError(t, err)
				id, err := wf.RunNoWait(ctx, client, "A", 0)
				require.NoError(t, err)

				e := h.start(durable.Config{Concurrency: 1}, wf)
				_, err = e.Wait(ctx, id)
				require.NoError(t, err)
				mu.Lock()
				defer mu.Unlock()
				require.Contains(t, order[:2], "A", "A runs within the first two executions (of %d)", len(order))
			})
		})
	}
}

// TestDeadExecutionRecovery: a worker claims a step through the store and
// dies (it never heartbeats nor finishes). A live engine's leader rescues it
// after DeadAfter, within 1.25×DeadAfter, the step runs again there, at once
// and as attempt 1 although it has no retries (a lost attempt spends none),
// and the dead claim's late outcome is rejected without touching the
// recorded one.
func TestDeadExecutionRecovery(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		deadAfter := h.duration(20*time.Second, time.Second)
		// The bound itself is proven in virtual time, to the instant. On a
		// real server the slack takes round trips, the rescuer's start-up
		// and a loaded machine's scheduling (CI saw 1.79 s with DeadAfter
		// 1 s, passes every 250 ms); there it only catches a rescue that is
		// late by whole seconds.
		slack := h.duration(0, time.Second)
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		var mu sync.Mutex
		var attempts []int
		wf := durable.NewWorkflow[int]("rescue")
		step := durable.Step(wf, "work", func(ctx durable.Context, in int) (string, error) {
			mu.Lock()
			attempts = append(attempts, ctx.Attempt())
			mu.Unlock()
			return "done by " + ctx.WorkerID(), nil
		}) // the default policy: no retries
		id, err := wf.RunNoWait(ctx, h.client(), "t", 1)
		require.NoError(t, err)

		// The doomed worker claims the task, then "crashes".
		ghost := "ghost-" + uuid.NewString()[:8]
		claimed, err := h.store.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: ghost, Limit: 1, Workflows: []string{"rescue"}})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		crashedAt := time.Now()

		e := h.startOn(h.another(), durable.Config{
			WorkerID: "rescuer", HeartbeatInterval: h.duration(5*time.Second, 200*time.Millisecond), DeadAfter: deadAfter,
		}, wf)
		res := h.wait(e, id, h.duration(time.Hour, 20*time.Second))
		require.Equal(t, durabletype.RunCompleted, res.Status)
		if h.virtual {
			recovered := time.Since(crashedAt)
			require.GreaterOrEqual(t, recovered, deadAfter)
			require.LessOrEqual(t, recovered, deadAfter+deadAfter/4, "rescued and run again within 1.25×DeadAfter")
		}
		mu.Lock()
		require.Equal(t, []int{1}, attempts, "the dead worker's attempt is not counted; the step ran once here")
		mu.Unlock()

		evs, err := e.Events(ctx, id)
		require.NoError(t, err)
		var claimedAt, rescuedAt time.Time
		var detail string
		for _, ev := range evs {
			switch {
			case ev.Type == durabletype.EventStarted && claimedAt.IsZero(): // the dead claim
				claimedAt = ev.At
			case ev.Type == durabletype.EventLost:
				rescuedAt, detail = ev.At, ev.Detail
			}
		}
		require.Contains(t, detail, "worker "+ghost+" lost")
		rescue := rescuedAt.Sub(claimedAt)
		done := res.FinishedAt.Sub(claimedAt)
		t.Logf("dead claim rescued %s after it was taken (DeadAfter %s); run completed %s after", rescue, deadAfter, done)
		require.GreaterOrEqual(t, rescue, deadAfter, "rescued before the worker was dead")
		require.LessOrEqual(t, rescue, deadAfter+deadAfter/4+slack, "rescued within 1.25×DeadAfter (+ slack)")
		require.LessOrEqual(t, done, deadAfter+deadAfter/4+2*slack, "completed within 1.25×DeadAfter (+ slack): a lost attempt has no backoff")

		late, err := h.store.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{{
			Task: claimed[0].Ref(), Kind: store.OutcomeComplete, Output: []byte(`"late"`),
		}}})
		require.NoError(t, err)
		require.Equal(t, store.FinishStale, late[0].Status)
		res, err = e.Get(ctx, id)
		require.NoError(t, err)
		out, err := step.Result(res)
		require.NoError(t, err)
		require.Equal(t, "done by rescuer", out)
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "LOST/1", "QUEUED/0", "STARTED/1", "COMPLETED/1"},
			stepEvents(t, e, id, "work"), "the late outcome changed nothing")
	})
}

// rescueAll makes the store rescue every running task, as if its worker
// were dead, and returns how many it rescued. The DeadAfter is negative:
// with zero, a heartbeat of the engine's that began after the rescue's
// statement (its now()) but committed before its snapshot is younger than
// that now, so the task is rightly not dead, and the rescue found nothing
// (TestClaimLostCancelsTheStep and TestHeartbeatFromTheStep, once each in CI
// under load).
func rescueAll(t *testing.T, h *harness) int {
	t.Helper()
	res, err := h.store.RescueTasks(context.Background(), &store.RescueTasksParams{DeadAfter: -time.Minute, Limit: 10})
	require.NoError(t, err)
	return len(res.Rescued)
}

// TestClaimLostCancelsTheStep: when a step's claim is taken away (here the
// store rescues it as if its worker were dead), the engine running it
// cancels its context with ErrClaimLost at the next heartbeat, and the step
// runs again under the new claim.
func TestClaimLostCancelsTheStep(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		started := make(chan struct{})
		causes := make(chan error, 4)
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("lost")
		durable.Step(wf, "long", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) == 1 {
				close(started)
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return 0, ctx.Err()
			}
			return 1, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: h.duration(time.Second, 50*time.Millisecond)}))
		e := h.start(durable.Config{HeartbeatInterval: h.duration(time.Second, 200*time.Millisecond), DeadAfter: time.Hour}, wf)
		ctx := h.ctx(30 * time.Second)
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the step never started")
		}
		require.Equal(t, 1, rescueAll(t, h))
		require.ErrorIs(t, <-causes, durable.ErrClaimLost)
		res, err := e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.EqualValues(t, 2, calls.Load())
	})
}

// TestHeartbeatFromTheStep: a step may heartbeat itself; once its claim is
// lost, the heartbeat says so.
func TestHeartbeatFromTheStep(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		got := make(chan error, 2)
		proceed := make(chan struct{})
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("hb")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) > 1 {
				// The rescued step queued again (at once when its spread
				// says so) and claimed anew: only the first attempt
				// reports, so that its lost claim is what the test reads.
				return 0, nil
			}
			got <- ctx.Heartbeat()
			select {
			case <-proceed:
			case <-ctx.Done():
			}
			got <- ctx.Heartbeat()
			return 0, nil
		})
		e := h.start(durable.Config{DeadAfter: time.Hour}, wf)
		_, err := wf.RunNoWait(h.ctx(30*time.Second), e, "t", 1)
		require.NoError(t, err)
		require.NoError(t, <-got)
		require.Equal(t, 1, rescueAll(t, h))
		close(proceed)
		require.ErrorIs(t, <-got, durable.ErrClaimLost)
	})
}

// TestGracefulStopDrains: Stop stops claiming and leading at once (and
// triggering: a stopping engine starts no runs), lets the running step
// finish and records it; a run triggered meanwhile is left queued. (The
// engine resigns the leadership after its last claim, so that the
// resignation tells the test that claiming is over: CI under -race once
// saw a claim in flight at the resignation take the second run.)
func TestGracefulStopDrains(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		ctx := h.ctx(time.Minute)
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
		e := h.launchOn(h.store, durable.Config{WorkerID: "drainer", Logger: leaders.logger()}, wf)
		first, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the step never started")
		}
		h.eventually(10*time.Second, func() bool { return slices.Equal(leaders.leaders(), []string{"drainer"}) },
			"the engine leads")

		// Counted: a lease lost and taken again before (a loaded machine)
		// said it too.
		resigned := leaders.count("drainer", "durable: no longer leading")
		stopped := make(chan error, 1)
		go func() { stopped <- e.Stop(ctx) }()
		h.eventually(10*time.Second, func() bool { return leaders.count("drainer", "durable: no longer leading") > resigned },
			"the stopping engine resigns at once")
		_, err = wf.RunNoWait(ctx, e, "t", 2)
		require.ErrorIs(t, err, durable.ErrEngineStopped, "a stopping engine starts no runs")
		second, err := wf.RunNoWait(ctx, h.client(), "t", 2)
		require.NoError(t, err)
		if h.virtual {
			synctest.Wait() // the stopping engine had every chance to claim it
		}
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) while a step was running", err)
		default:
		}
		require.Equal(t, durabletype.TaskRunning, stepState(t, e, first, "a"))
		close(release)
		require.NoError(t, <-stopped, "everything drained in time")

		res, err := e.Get(ctx, first)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "the in-flight step was recorded")
		res, err = e.Get(ctx, second)
		require.NoError(t, err)
		s, _ := res.Step("a")
		require.Equal(t, durabletype.TaskQueued, s.State, "a stopping engine claims nothing new")
		require.Zero(t, s.Attempts)
		require.EqualValues(t, 1, calls.Load())
	})
}

// TestHardStopReleasesTheStep: when the drain deadline passes, the step's
// context is cancelled (ErrEngineStopped) and its task is given back without
// counting the attempt; another engine completes it.
func TestHardStopReleasesTheStep(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		ctx := h.ctx(time.Minute)
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
		e := h.launchOn(h.store, durable.Config{WorkerID: "hard"}, wf)
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the step never started")
		}
		stopCtx, cancel := context.WithTimeout(ctx, h.duration(10*time.Second, 300*time.Millisecond))
		defer cancel()
		require.ErrorIs(t, e.Stop(stopCtx), context.DeadlineExceeded)
		require.ErrorIs(t, <-causes, durable.ErrEngineStopped)

		res, err := e.Get(ctx, id)
		require.NoError(t, err)
		s, _ := res.Step("a")
		require.Equal(t, durabletype.TaskQueued, s.State, "given back to the queue")
		require.Zero(t, s.Attempts, "the interrupted attempt does not count")
		require.Equal(t, "released by its worker", lastQueuedDetail(t, e, id, "a"))

		next := h.startOn(h.another(), durable.Config{WorkerID: "next"}, build())
		res = h.wait(next, id, 20*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		s, _ = res.Step("a")
		require.Equal(t, 1, s.Attempts)
		require.JSONEq(t, `"attempt 1 on next"`, string(s.Output))
		require.EqualValues(t, 2, calls.Load())
	})
}

// TestUnknownWorkflowWaits: a run of a workflow this engine did not
// register stays QUEUED, untouched, while the engine serves other work; an
// engine that registers it runs it.
func TestUnknownWorkflowWaits(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		ctx := h.ctx(time.Minute)
		orphan := durable.NewWorkflow[int]("orphan")
		durable.Step(orphan, "a", func(ctx durable.Context, in int) (string, error) { return "adopted by " + ctx.WorkerID(), nil })
		known := durable.NewWorkflow[int]("known")
		durable.Step(known, "a", noop[int])

		client := h.client()
		orphanID, err := orphan.RunNoWait(ctx, client, "t", 1)
		require.NoError(t, err)
		e1 := h.startOn(h.another(), durable.Config{WorkerID: "knows-one"}, known)
		for i := range 3 {
			res, err := known.Run(ctx, e1, "t", i)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCompleted, res.Status)
		}
		res, err := client.Get(ctx, orphanID)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunRunning, res.Status)
		require.Equal(t, durabletype.TaskQueued, states(res)["a"], "left for a process that knows the workflow")
		require.Equal(t, []string{"QUEUED/0"}, stepEvents(t, client, orphanID, "a"), "never claimed")

		e2 := h.startOn(h.another(), durable.Config{WorkerID: "knows-both"}, known, orphan)
		res = h.wait(e2, orphanID, 20*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		s, _ := res.Step("a")
		require.JSONEq(t, `"adopted by knows-both"`, string(s.Output))
		require.Equal(t, 1, s.Attempts)
	})
}

// TestChangedDefinitionFailsClearly: a run started under one definition of
// a workflow versioned by hand is executed by a process whose definition,
// under the same version, lacks the step (the version was not changed with
// the steps: runs are pinned to versions, and a fingerprint would have
// changed); the step fails at once (although the new definition retries
// its steps) with ErrUnknownStep and a message naming it, and the worker
// keeps serving other runs.
func TestChangedDefinitionFailsClearly(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		ctx := h.ctx(time.Minute)
		// Versioned by hand, and the version not changed with the steps:
		// the runs of "1" reach a definition without their step.
		v1 := durable.NewWorkflow[int]("evolving").WithVersion("1")
		durable.Step(v1, "old-step", noop[int])
		oldRun, err := v1.RunNoWait(ctx, h.client(), "t", 1)
		require.NoError(t, err)

		v2 := durable.NewWorkflow[int]("evolving").WithVersion("1")
		durable.Step(v2, "new-step", noop[int], durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
		e := h.startOn(h.another(), durable.Config{}, v2)
		res := h.wait(e, oldRun, 20*time.Second)
		require.Equal(t, durabletype.RunFailed, res.Status)
		require.ErrorIs(t, res.Err, durable.ErrRunFailed)
		require.Contains(t, res.Err.Error(), durable.ErrUnknownStep.Error())
		require.Contains(t, res.Err.Error(), `step "old-step" of workflow "evolving" is not a step in this process's definition`)
		s, _ := res.Step("old-step")
		require.Equal(t, durabletype.TaskFailed, s.State)
		require.Equal(t, 1, s.Attempts)

		res, err = v2.Run(ctx, e, "t", 2)
		require.NoError(t, err, "the worker still serves current runs")
		require.Equal(t, durabletype.RunCompleted, res.Status)
	})
}

// TestUndecodableInputFailsTheStepNotTheWorker: a run whose input no longer
// decodes into the registered workflow's input type fails its step with
// ErrDecode, without retries, while other runs keep completing.
func TestUndecodableInputFailsTheStepNotTheWorker(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		ctx := h.ctx(time.Minute)
		// The version not changed with the input type (see
		// TestChangedDefinitionFailsClearly).
		v1 := durable.NewWorkflow[string]("typed").WithVersion("1")
		durable.Step(v1, "a", noop[string])
		bad, err := v1.RunNoWait(ctx, h.client(), "t", "not a number")
		require.NoError(t, err)

		var calls atomic.Int32
		v2 := durable.NewWorkflow[int]("typed").WithVersion("1")
		durable.Step(v2, "a", func(ctx durable.Context, in int) (int, error) { calls.Add(1); return in, nil },
			durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: h.duration(time.Second, 50*time.Millisecond)}))
		e := h.startOn(h.another(), durable.Config{}, v2)
		var good []uuid.UUID
		for i := range 5 {
			id, err := v2.RunNoWait(ctx, e, "t", i)
			require.NoError(t, err)
			good = append(good, id)
		}
		res := h.wait(e, bad, 20*time.Second)
		require.Equal(t, durabletype.RunFailed, res.Status)
		require.ErrorIs(t, res.Err, durable.ErrRunFailed)
		require.Contains(t, res.Err.Error(), durable.ErrDecode.Error())
		require.Contains(t, res.Err.Error(), "cannot decode value")
		require.Contains(t, res.Err.Error(), `input of workflow "typed"`)
		s, _ := res.Step("a")
		require.Equal(t, 1, s.Attempts, "bad data is not retried")
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "FAILED/1"}, stepEvents(t, e, bad, "a"))
		for _, id := range good {
			require.Equal(t, durabletype.RunCompleted, h.wait(e, id, 20*time.Second).Status)
		}
		res, err = v2.Run(ctx, e, "t", 9)
		require.NoError(t, err, "the worker keeps serving")
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.EqualValues(t, 6, calls.Load(), "only the good runs reached the step")
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
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("roundtrip")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (lopsided, error) { return lopsided{}, nil },
			durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
		durable.Step(wf, "b", noop[int], durable.After(a))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(30*time.Second), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		s, _ := res.Step("a")
		require.Equal(t, 1, s.Attempts)
		require.Contains(t, s.Error, "does not decode back into its type")
		require.Equal(t, durabletype.TaskCancelled, states(res)["b"])
	})
}

// TestEventLog: the events of a run with a retry, a skip, a sleep, and of a
// failed run with an on-failure handler, in order.
func TestEventLog(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("events")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) == 1 {
				return 0, errors.New("once")
			}
			return 1, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: h.duration(time.Second, 50*time.Millisecond)}))
		skip := durable.Step(wf, "skipped", noop[int], durable.After(a), durable.SkipIf(a, func(int) bool { return true }))
		nap := durable.Sleep(wf, "nap", h.duration(time.Minute, 200*time.Millisecond), durable.After(a))
		durable.Step(wf, "end", noop[int], durable.After(skip, nap))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(h.duration(time.Hour, 30*time.Second))
		res, err := wf.Run(ctx, e, "t", 1)
		require.NoError(t, err)
		evs, err := e.Events(ctx, res.ID)
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
		res, _ = bad.Run(ctx, e, "t", 1)
		evs, err = e.Events(ctx, res.ID)
		require.NoError(t, err)
		var got []string
		for _, ev := range evs {
			got = append(got, fmt.Sprintf("%s:%s", ev.Step, ev.Type))
		}
		require.Equal(t, []string{
			"x:QUEUED", "x:STARTED", "x:FAILED", "y:CANCELLED",
			durabletype.OnFailureTask + ":QUEUED", durabletype.OnFailureTask + ":STARTED", durabletype.OnFailureTask + ":COMPLETED",
		}, got)
	})
}

// TestPoisonStepFailsAfterItsLostLimit: a step whose attempts keep losing
// their worker (each claim here is a worker that dies at once) runs again
// without spending a retry until its lost limit, then fails its run with an
// error matching ErrPoisonStep, its on-failure handler running as for any
// failure. WithLostLimit sets the limit; it must be at least 1.
func TestPoisonStepFailsAfterItsLostLimit(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		for _, limit := range []int{0, 1} { // 0: the default
			name := fmt.Sprintf("poison-%d", limit)
			wf := durable.NewWorkflow[int](name)
			var opts []durable.StepOption
			want := durable.DefaultLostLimit
			if limit > 0 {
				opts, want = append(opts, durable.WithLostLimit(limit)), limit
			}
			durable.Step(wf, "boom", func(durable.Context, int) (int, error) { return 0, nil }, opts...)
			handled := make(chan durable.Failure, 1)
			wf.OnFailure(func(_ durable.Context, _ int, f durable.Failure) error { handled <- f; return nil })
			id, err := wf.RunNoWait(ctx, h.client(), "t", 1)
			require.NoError(t, err)
			for k := 1; k <= want; k++ {
				claimed, err := h.store.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: fmt.Sprintf("dies-%d", k), Limit: 1, Workflows: []string{name}})
				require.NoError(t, err)
				require.Len(t, claimed, 1, "attempt %d", k)
				require.Equal(t, 1, claimed[0].Attempt, "a lost attempt is not counted")
				require.Equal(t, 1, rescueAll(t, h))
			}
			res, err := h.client().Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunFailed, res.Status, "limit %d", want)
			require.ErrorIs(t, res.Err, durable.ErrPoisonStep)
			require.ErrorIs(t, res.Err, durable.ErrRunFailed)
			require.Contains(t, res.Err.Error(), fmt.Sprintf("worker dies-%d lost", want))
			require.Equal(t, slices.Repeat([]string{"QUEUED/0", "STARTED/1", "LOST/1"}, want)[:3*want],
				stepEvents(t, h.client(), id, "boom")[:3*want])

			// The handler runs, on a live engine, with the poison error.
			e := h.start(durable.Config{}, wf)
			select {
			case f := <-handled:
				require.Equal(t, "boom", f.Step)
				require.Contains(t, f.Error, "lost its worker too many times in a row")
			case <-ctx.Done():
				t.Fatal("the on-failure handler did not run")
			}
			h.wait(e, id, h.duration(time.Hour, 20*time.Second))
		}

		bad := durable.NewWorkflow[int]("poison-bad")
		durable.Step(bad, "s", func(durable.Context, int) (int, error) { return 0, nil }, durable.WithLostLimit(0))
		_, err := bad.RunNoWait(ctx, h.client(), "t", 1)
		require.ErrorIs(t, err, durable.ErrInvalidOption)
	})
}
