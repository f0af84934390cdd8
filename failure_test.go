package durable_test

import (
	"context"
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
)

// TestFlakyStepBackoffSchedule: a step failing twice succeeds on attempt 3;
// the attempts happen exactly InitialDelay and InitialDelay·Factor apart, in
// virtual time, through durable backoff timers fired by the real leader.
func TestFlakyStepBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: 10 * time.Second, Factor: 3}))

		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		start := time.Now()
		res, err := wf.Run(context.Background(), e, "t", 1)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
		out, err := flaky.Result(res)
		require.NoError(t, err)
		require.Equal(t, "ok", out)

		require.Equal(t, []int{1, 2, 3}, seen)
		require.Equal(t, start, attempts[0])
		require.Equal(t, 10*time.Second, attempts[1].Sub(attempts[0]), "first retry after InitialDelay")
		require.Equal(t, 30*time.Second, attempts[2].Sub(attempts[1]), "second retry after InitialDelay·Factor")

		evs, err := e.Events(context.Background(), res.ID)
		require.NoError(t, err)
		var retrying []durable.Event
		for _, ev := range evs {
			if ev.Type == durable.EventRetrying {
				retrying = append(retrying, ev)
			}
		}
		require.Len(t, retrying, 2)
		require.Equal(t, "transient 1", retrying[0].Detail)
		require.Equal(t, 1, retrying[0].Attempt)
		require.True(t, retrying[0].DueAt.Equal(attempts[1]), "the RETRYING event says when the next attempt is due")
	})
}

func TestPermanentFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		var downstream atomic.Bool
		wf := durable.NewWorkflow[int]("permanent")
		bad := durable.Step(wf, "bad", func(ctx durable.Context, in int) (int, error) {
			calls.Add(1)
			return 0, errors.New("card declined")
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: time.Second}))
		durable.Step(wf, "after", func(ctx durable.Context, in int) (int, error) {
			downstream.Store(true)
			return 0, nil
		}, durable.After(bad))

		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		res, err := wf.Run(context.Background(), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		var runErr *durable.RunError
		require.ErrorAs(t, err, &runErr)
		require.Equal(t, "bad", runErr.Step)
		require.Equal(t, "card declined", runErr.Message)
		require.Equal(t, res.ID, runErr.RunID)
		require.Contains(t, err.Error(), "card declined")

		require.Equal(t, durable.RunFailed, res.Status)
		require.Equal(t, err, res.Err)
		require.EqualValues(t, 3, calls.Load(), "1 attempt + 2 retries")
		require.False(t, downstream.Load())
		s, _ := res.Step("bad")
		require.Equal(t, durable.StepFailed, s.State)
		require.Equal(t, 3, s.Attempts)
		require.Equal(t, "card declined", s.Error)
		s, _ = res.Step("after")
		require.Equal(t, durable.StepCancelled, s.State)
		_, err = bad.Result(res)
		require.ErrorIs(t, err, durable.ErrNoOutput)

		// Wait (unlike Run) reports a failed run through the result only.
		again, err := e.Wait(context.Background(), res.ID)
		require.NoError(t, err)
		require.ErrorIs(t, again.Err, durable.ErrRunFailed)
	})
}

func TestTerminalErrorSkipsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("terminal")
		durable.Step(wf, "validate", func(ctx durable.Context, in int) (int, error) {
			calls.Add(1)
			return 0, durable.Terminal(fmt.Errorf("order %d is malformed", in))
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 5}))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		start := time.Now()
		res, err := wf.Run(context.Background(), e, "t", 9)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.EqualValues(t, 1, calls.Load())
		require.Zero(t, time.Since(start), "no backoff was waited")
		require.Equal(t, "order 9 is malformed", res.Err.(*durable.RunError).Message)
		require.True(t, durable.IsTerminal(durable.Terminal(errors.New("x"))))
		require.False(t, durable.IsTerminal(errors.New("x")))
	})
}

func TestOnFailureRunsOnceWithTheError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type call struct {
			in      order
			failure durable.Failure
			attempt int
		}
		var mu sync.Mutex
		var calls []call
		wf := durable.NewWorkflow[order]("with-handler")
		charge := durable.Step(wf, "charge", func(ctx durable.Context, in order) (int, error) {
			return 0, errors.New("insufficient funds")
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Second}))
		durable.Step(wf, "ship", noop[order], durable.After(charge))
		wf.OnFailure(func(ctx durable.Context, in order, f durable.Failure) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, call{in, f, ctx.Attempt()})
			return nil
		})
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		in := order{ID: "o-9", Amount: 5}
		res, err := wf.Run(context.Background(), e, "t", in)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.True(t, res.Done(), "Run returns once the handler has run")
		require.Equal(t, []call{{in, durable.Failure{Step: "charge", Error: "insufficient funds"}, 1}}, calls)
		h, ok := res.Step(durable.OnFailureStep)
		require.True(t, ok)
		require.Equal(t, durable.StepCompleted, h.State)
		require.Equal(t, durable.OnFailureStep, res.Steps[len(res.Steps)-1].Name)

		// A completed run never calls it.
		ok2 := durable.NewWorkflow[int]("fine")
		durable.Step(ok2, "a", noop[int])
		ok2.OnFailure(func(durable.Context, int, durable.Failure) error {
			t.Error("on-failure called for a completed run")
			return nil
		})
		require.NoError(t, e.Register(ok2))
		res, err = ok2.Run(context.Background(), e, "t", 1)
		require.NoError(t, err)
		_, ok = res.Step(durable.OnFailureStep)
		require.False(t, ok)
	})
}

// TestFailureCancelsInFlightSibling: when one branch fails, a sibling still
// running is told through its context (at its next heartbeat), and the run
// settles once it returns.
func TestFailureCancelsInFlightSibling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		e := startEngine(t, memstore.New(), durable.Config{HeartbeatInterval: time.Second, DeadAfter: 10 * time.Second}, wf)
		start := time.Now()
		res, err := wf.Run(context.Background(), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.ErrorIs(t, <-cause, durable.ErrClaimLost)
		require.LessOrEqual(t, time.Since(start), time.Second, "cancelled at the next heartbeat")
		s, _ := res.Step("slow")
		require.Equal(t, durable.StepCancelled, s.State)
		s, _ = res.Step("bad")
		require.Equal(t, durable.StepFailed, s.State)
	})
}

func TestPanicIsAnErrorNotACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		wf := durable.NewWorkflow[int]("panics")
		durable.Step(wf, "boom", func(ctx durable.Context, in int) (int, error) {
			if calls.Add(1) == 1 {
				var m map[string]int
				m["x"] = 1 // nil map write
			}
			return 7, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Second}))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		res, err := wf.Run(context.Background(), e, "t", 1)
		require.NoError(t, err, "a panic is retried like an error")
		require.EqualValues(t, 2, calls.Load())
		evs, err := e.Events(context.Background(), res.ID)
		require.NoError(t, err)
		var detail string
		for _, ev := range evs {
			if ev.Type == durable.EventRetrying {
				detail = ev.Detail
			}
		}
		require.Contains(t, detail, "panic: assignment to entry in nil map")
	})
}
