package durable_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Retries, failures and the on-failure handler. Each test runs on both
// stores (suite_test.go); backoffs last seconds of virtual time in memory,
// where the schedule is asserted exactly, and a fraction of a second on
// PostgreSQL, where it is asserted through the event log.

// TestFlakyStepBackoffSchedule: a step failing twice succeeds on attempt 3.
// Each retry is due exactly its backoff (InitialDelay, then
// InitialDelay·Factor) after the failure was recorded, through a durable
// timer fired by the real leader, and starts no earlier: in virtual time,
// exactly when due.
func TestFlakyStepBackoffSchedule(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		initial := h.duration(10*time.Second, 100*time.Millisecond)
		const factor = 3
		var mu sync.Mutex
		var attempts []time.Time
		var seen []int
		wf := durable.NewWorkflow[int]("flaky")
		flaky := durable.Step(wf, "flaky", func(ctx durable.Context, in int) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, time.Now())
			seen = append(seen, ctx.Attempt())
			if len(attempts) < 3 {
				return "", fmt.Errorf("transient %d", len(attempts))
			}
			return "ok", nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: initial, Factor: factor}))

		e := h.start(durable.Config{}, wf)
		start := time.Now()
		res, err := wf.Run(h.ctx(h.duration(time.Hour, 30*time.Second)), e, "t", 1)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		out, err := flaky.Result(res)
		require.NoError(t, err)
		require.Equal(t, "ok", out)
		s, _ := res.Step("flaky")
		require.Equal(t, 3, s.Attempts)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []int{1, 2, 3}, seen)

		evs, err := e.Events(context.Background(), res.ID)
		require.NoError(t, err)
		var retrying, started []durabletype.Event
		for _, ev := range evs {
			switch ev.Type {
			case durabletype.EventRetrying:
				retrying = append(retrying, ev)
			case durabletype.EventStarted:
				started = append(started, ev)
			}
		}
		require.Len(t, retrying, 2)
		require.Len(t, started, 3)
		for k, delay := range []time.Duration{initial, factor * initial} {
			r := retrying[k]
			require.Equal(t, fmt.Sprintf("transient %d", k+1), r.Detail)
			require.Equal(t, k+1, r.Attempt)
			require.Equal(t, delay, r.DueAt.Sub(r.At), "retry %d is due its backoff after the failure", k+1)
			next := started[k+1]
			require.False(t, next.At.Before(r.DueAt), "attempt %d started at %s, before its due time %s", k+2, next.At, r.DueAt)
			late := next.At.Sub(r.DueAt)
			if h.virtual {
				require.Zero(t, late, "attempt %d starts exactly when due", k+2)
				require.True(t, r.DueAt.Equal(attempts[k+1]), "the RETRYING event says when the next attempt is due")
			}
			// On PostgreSQL, room for the leader's start and a loaded
			// machine: the first retry is due right after the engine starts.
			require.Less(t, late, 5*time.Second, "attempt %d started %s after its due time", k+2, late)
			t.Logf("retry %d: due %s after the failure, started %s after due", k+1, delay, late)
		}
		if h.virtual {
			require.Equal(t, start, attempts[0])
			require.Equal(t, 10*time.Second, attempts[1].Sub(attempts[0]), "first retry after InitialDelay")
			require.Equal(t, 30*time.Second, attempts[2].Sub(attempts[1]), "second retry after InitialDelay·Factor")
		}
	})
}

// failureCall is one call of an on-failure handler.
type failureCall struct {
	in      order
	failure durable.Failure
	attempt int
}

// failureLog records the calls of an on-failure handler.
type failureLog struct {
	mu    sync.Mutex
	calls []failureCall
}

func (l *failureLog) handle(ctx durable.Context, in order, f durable.Failure) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, failureCall{in, f, ctx.Attempt()})
	return nil
}

func (l *failureLog) get() []failureCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]failureCall(nil), l.calls...)
}

// TestPermanentFailure: a step failing every attempt fails the run once its
// retries are used up, with an error naming the step and the message; its
// child is cancelled and never runs; the on-failure handler runs once, with
// the input and the failure, although two engines serve the store, and
// Run returns after it; a run that completes never calls it.
func TestPermanentFailure(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var calls atomic.Int32
		var downstream atomic.Bool
		var handled failureLog
		build := func() (*durable.Workflow[order], *durable.StepRef[int]) {
			wf := durable.NewWorkflow[order]("permanent")
			charge := durable.Step(wf, "charge", func(ctx durable.Context, in order) (int, error) {
				calls.Add(1)
				return 0, errors.New("card declined")
			}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: h.duration(time.Second, 50*time.Millisecond)}))
			durable.Step(wf, "ship", func(ctx durable.Context, in order) (int, error) {
				downstream.Store(true)
				return 0, nil
			}, durable.After(charge))
			wf.OnFailure(handled.handle)
			return wf, charge
		}
		wf, charge := build()
		e := h.start(durable.Config{}, wf)
		other, _ := build()
		h.startOn(h.another(), durable.Config{}, other)
		ctx := h.ctx(h.duration(time.Hour, 30*time.Second))

		in := order{ID: "o-9", Amount: 5}
		res, err := wf.Run(ctx, e, "t", in)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		var runErr *durable.RunError
		require.ErrorAs(t, err, &runErr)
		require.Equal(t, "charge", runErr.Step)
		require.Equal(t, "card declined", runErr.Message)
		require.Equal(t, res.ID, runErr.RunID)
		require.Contains(t, err.Error(), "card declined")

		require.Equal(t, durabletype.RunFailed, res.Status)
		require.Equal(t, err, res.Err)
		require.True(t, res.Done(), "Run returns once the handler has run")
		require.EqualValues(t, 3, calls.Load(), "1 attempt + 2 retries")
		require.False(t, downstream.Load())
		s, _ := res.Step("charge")
		require.Equal(t, durabletype.TaskFailed, s.State)
		require.Equal(t, 3, s.Attempts)
		require.Equal(t, "card declined", s.Error)
		s, _ = res.Step("ship")
		require.Equal(t, durabletype.TaskCancelled, s.State)
		_, err = charge.Result(res)
		require.ErrorIs(t, err, durable.ErrNoOutput)

		require.Equal(t, []failureCall{{in, durable.Failure{Step: "charge", Error: "card declined"}, 1}}, handled.get(),
			"the handler runs once, with the input and the failure")
		hs, ok := res.Step(durabletype.OnFailureTask)
		require.True(t, ok)
		require.Equal(t, durabletype.TaskCompleted, hs.State)
		require.Equal(t, durabletype.OnFailureTask, res.Steps[len(res.Steps)-1].Name)
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, durabletype.OnFailureTask))

		// Wait (unlike Run) reports a failed run through the result only.
		again, err := e.Wait(ctx, res.ID)
		require.NoError(t, err)
		require.ErrorIs(t, again.Err, durable.ErrRunFailed)

		// A completed run never calls it.
		fine := durable.NewWorkflow[int]("fine")
		durable.Step(fine, "a", noop[int])
		fine.OnFailure(func(durable.Context, int, durable.Failure) error {
			t.Error("on-failure called for a completed run")
			return nil
		})
		require.NoError(t, e.Register(fine))
		res, err = fine.Run(ctx, e, "t", 1)
		require.NoError(t, err)
		_, ok = res.Step(durabletype.OnFailureTask)
		require.False(t, ok)
	})
}

// TestTerminalErrorSkipsRetries: a terminal error fails the run at once,
// without retries (and without waiting for a backoff), although the step
// has retries left; the rest is cancelled, and the on-failure handler runs
// exactly once although two engines serve the store.
func TestTerminalErrorSkipsRetries(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var charges atomic.Int32
		var handled failureLog
		build := func() *durable.Workflow[order] {
			wf := durable.NewWorkflow[order]("with-handler")
			charge := durable.Step(wf, "charge", func(ctx durable.Context, in order) (int, error) {
				charges.Add(1)
				return 0, durable.Terminal(fmt.Errorf("card of order %s declined", in.ID))
			}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 5, InitialDelay: h.duration(time.Second, 50*time.Millisecond)}))
			durable.Step(wf, "ship", noop[order], durable.After(charge))
			wf.OnFailure(handled.handle)
			return wf
		}
		wf := build()
		e := h.start(durable.Config{}, wf)
		h.startOn(h.another(), durable.Config{}, build())

		in := order{ID: "o-9", Amount: 5}
		start := time.Now()
		res, err := wf.Run(h.ctx(30*time.Second), e, "t", in)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		if h.virtual {
			require.Zero(t, time.Since(start), "no backoff was waited")
		}
		var runErr *durable.RunError
		require.ErrorAs(t, err, &runErr)
		require.Equal(t, "charge", runErr.Step)
		require.Equal(t, "card of order o-9 declined", runErr.Message)
		require.Equal(t, "card of order o-9 declined", res.Err.(*durable.RunError).Message)
		require.True(t, res.Done(), "Run returns once the handler has run")
		require.Equal(t, durabletype.RunFailed, res.Status)
		require.EqualValues(t, 1, charges.Load(), "a terminal error is not retried")
		require.Equal(t, []failureCall{{in, durable.Failure{Step: "charge", Error: "card of order o-9 declined"}, 1}}, handled.get(),
			"the handler runs once, with the input and the failure")
		require.Equal(t, map[string]durabletype.TaskState{
			"charge": durabletype.TaskFailed, "ship": durabletype.TaskCancelled, durabletype.OnFailureTask: durabletype.TaskCompleted,
		}, states(res))
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "FAILED/1"}, stepEvents(t, e, res.ID, "charge"))
		require.Equal(t, []string{"CANCELLED/0"}, stepEvents(t, e, res.ID, "ship"))
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, durabletype.OnFailureTask))
		require.True(t, durable.IsTerminal(durable.Terminal(errors.New("x"))))
		require.False(t, durable.IsTerminal(errors.New("x")))
	})
}

// TestFailureCancelsInFlightSibling: when one branch fails, a sibling still
// running is told through its context (at its next heartbeat), and the run
// settles once it returns.
func TestFailureCancelsInFlightSibling(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		heartbeat := h.duration(time.Second, 200*time.Millisecond)
		cause := make(chan error, 1)
		wf := durable.NewWorkflow[int]("siblings")
		durable.Step(wf, "slow", func(ctx durable.Context, in int) (int, error) {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return 0, ctx.Err()
		})
		durable.Step(wf, "bad", func(ctx durable.Context, in int) (int, error) {
			return 0, durable.Terminal(errors.New("no"))
		})
		e := h.start(durable.Config{HeartbeatInterval: heartbeat, DeadAfter: h.duration(10*time.Second, 5*time.Second)}, wf)
		start := time.Now()
		res, err := wf.Run(h.ctx(30*time.Second), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.ErrorIs(t, <-cause, durable.ErrClaimLost)
		// In virtual time, within one heartbeat interval; on PostgreSQL, with
		// slack for the round trips on a loaded machine (and before
		// DeadAfter, which a rescue would wait for).
		require.LessOrEqual(t, time.Since(start), heartbeat+h.duration(0, 4*time.Second), "cancelled at the next heartbeat")
		s, _ := res.Step("slow")
		require.Equal(t, durabletype.TaskCancelled, s.State)
		s, _ = res.Step("bad")
		require.Equal(t, durabletype.TaskFailed, s.State)
	})
}

// TestPanicIsAnErrorNotACrash: a panicking step is retried like an error;
// one that always panics fails its run with the panic; the engine keeps
// serving.
func TestPanicIsAnErrorNotACrash(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var calls atomic.Int32
		flaky := durable.NewWorkflow[int]("panics-once")
		durable.Step(flaky, "boom", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) == 1 {
				var m map[string]int
				m["x"] = 1 // nil map write
			}
			return 7, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: h.duration(time.Second, 50*time.Millisecond)}))
		always := durable.NewWorkflow[int]("panics-always")
		durable.Step(always, "boom", func(ctx durable.Context, in int) (int, error) { panic("kaboom") })
		healthy := durable.NewWorkflow[int]("healthy")
		durable.Step(healthy, "a", noop[int])
		e := h.start(durable.Config{}, flaky, always, healthy)
		ctx := h.ctx(time.Minute)

		res, err := flaky.Run(ctx, e, "t", 1)
		require.NoError(t, err, "a panic is retried like an error")
		require.EqualValues(t, 2, calls.Load())
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "RETRYING/1", "QUEUED/1", "STARTED/2", "COMPLETED/2"},
			stepEvents(t, e, res.ID, "boom"))
		require.Contains(t, eventOf(t, e, res.ID, "boom", durabletype.EventRetrying).Detail, "panic: assignment to entry in nil map")

		res, err = always.Run(ctx, e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.Contains(t, res.Err.Error(), "panic: kaboom")

		res, err = healthy.Run(ctx, e, "t", 1)
		require.NoError(t, err, "the engine keeps serving")
		require.Equal(t, durabletype.RunCompleted, res.Status)
	})
}
