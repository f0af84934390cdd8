package durable_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
)

// An idempotency key makes a retried trigger start nothing: it returns the
// run the first trigger started.
func ExampleWorkflow_Start() {
	wf := durable.NewWorkflow[string]("ship")
	durable.Step(wf, "label", func(ctx durable.Context, order string) (string, error) {
		return "label for " + order, nil
	})
	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	ctx := context.Background()

	first, _ := wf.Start(ctx, e, "tenant-1", "o-1", durable.WithIdempotencyKey("order-o-1"))
	again, _ := wf.Start(ctx, e, "tenant-1", "o-1", durable.WithIdempotencyKey("order-o-1"))
	fmt.Println(first.Duplicate, again.Duplicate, first.RunID == again.RunID)
	// Output:
	// false true true
}

// A step that ignores its context past its timeout: the attempt fails
// when the timeout passes, is retried, and its late result is not
// recorded.
func TestStepTimeoutIgnoredContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts atomic.Int32
		var causes []error
		release := make(chan struct{})
		wf := durable.NewWorkflow[string]("slow")
		durable.Step(wf, "call", func(ctx durable.Context, in string) (string, error) {
			n := attempts.Add(1)
			if n == 1 {
				<-release // hangs, ignoring ctx, until the test lets it go
				causes = append(causes, context.Cause(ctx))
				return "late", nil
			}
			return "on time", nil
		}, durable.WithTimeout(time.Minute), durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Second}))
		e, err := durable.New(memstore.New(), durable.Config{Concurrency: 2})
		require.NoError(t, err)
		require.NoError(t, e.Register(wf))
		ctx := context.Background()
		require.NoError(t, e.Start(ctx))
		res, err := wf.Run(ctx, e, "t", "x")
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		step, _ := res.Step("call")
		require.Equal(t, `"on time"`, string(step.Output))
		require.Equal(t, 2, step.Attempts)
		close(release)
		require.NoError(t, e.Stop(ctx))
		require.Len(t, causes, 1)
		require.True(t, errors.Is(causes[0], durable.ErrStepTimeout), "cause %v", causes[0])
		got, err := e.Get(ctx, res.ID)
		require.NoError(t, err)
		step, _ = got.Step("call")
		require.Equal(t, `"on time"`, string(step.Output), "the late result is not recorded")
	})
}

// A run past its deadline fails; its running step's context is cancelled.
func TestRunDeadlineCancelsSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failure, cause atomic.Value
		wf := durable.NewWorkflow[string]("report")
		durable.Step(wf, "crunch", func(ctx durable.Context, in string) (string, error) {
			<-ctx.Done()
			cause.Store(context.Cause(ctx))
			return "", context.Cause(ctx)
		})
		wf.OnFailure(func(ctx durable.Context, in string, f durable.Failure) error {
			failure.Store(f.Error)
			return nil
		})
		e, err := durable.New(memstore.New(), durable.Config{})
		require.NoError(t, err)
		require.NoError(t, e.Register(wf))
		ctx := context.Background()
		require.NoError(t, e.Start(ctx))
		defer e.Stop(ctx)
		start := time.Now()
		res, err := wf.Run(ctx, e, "t", "x", durable.WithRunTimeout(time.Hour))
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.Equal(t, durabletype.RunFailed, res.Status)
		require.ErrorContains(t, res.Err, "run deadline exceeded")
		// No step failed: the message names none.
		require.Equal(t, fmt.Sprintf("durable: run %s of %q failed: run deadline exceeded", res.ID, wf.Name()), res.Err.Error())
		require.Equal(t, "run deadline exceeded", failure.Load())
		require.GreaterOrEqual(t, time.Since(start), time.Hour)
		step, _ := res.Step("crunch")
		require.Equal(t, durabletype.TaskCancelled, step.State)
		// The run settled when its tasks did; the step's goroutine learns it
		// from the store's notification: wait until it has.
		synctest.Wait()
		got, _ := cause.Load().(error)
		require.ErrorIs(t, got, durable.ErrRunCancelled)
	})
}

// A run's deadline fires on time even when the leader is idle: creating
// the run tells the leader of the new timer, rather than leaving it to its
// next periodic look (a minute), which may come long after the deadline.
func TestRunDeadlineWakesIdleLeader(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[string]("approval")
		durable.WaitForEvent[int](wf, "approved", func(ctx durable.Context, key string) (string, error) { return key, nil })
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Hour)
		// The leader has looked for timers, found none, and waits.
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			ws, err := e.Workers(ctx)
			require.NoError(t, err)
			return len(ws) == 1 && ws[0].Leader
		}, "the engine leads")
		if h.virtual {
			synctest.Wait()
		}
		deadline := h.duration(5*time.Second, 300*time.Millisecond)
		id, err := wf.RunNoWait(ctx, e, "t", "never", durable.WithRunTimeout(deadline))
		require.NoError(t, err)
		// Well under the leader's periodic look at the timers (a minute).
		res := h.wait(e, id, h.duration(20*time.Second, 20*time.Second))
		require.Equal(t, durabletype.RunFailed, res.Status)
		require.ErrorContains(t, res.Err, "run deadline exceeded")
	})
}

// A delayed start holds the run's steps, durably, until its time.
func TestDelayedStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ranAt atomic.Value
		wf := durable.NewWorkflow[string]("later")
		durable.Step(wf, "go", func(ctx durable.Context, in string) (string, error) {
			ranAt.Store(time.Now())
			return in, nil
		})
		e, err := durable.New(memstore.New(), durable.Config{})
		require.NoError(t, err)
		require.NoError(t, e.Register(wf))
		ctx := context.Background()
		require.NoError(t, e.Start(ctx))
		defer e.Stop(ctx)
		start := time.Now()
		res, err := wf.Run(ctx, e, "t", "x", durable.WithStartAfter(3*time.Hour))
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.False(t, ranAt.Load().(time.Time).Before(start.Add(3*time.Hour)))

		_, err = wf.RunNoWait(ctx, e, "t", "x", durable.WithStartAfter(-time.Second))
		require.ErrorIs(t, err, durable.ErrInvalidTrigger)
		_, err = wf.RunNoWait(ctx, e, "t", "x", durable.WithIdempotencyKey(""))
		require.ErrorIs(t, err, durable.ErrInvalidTrigger)
		_, err = wf.RunNoWait(ctx, e, "t", "x", durable.WithPriority(9))
		require.ErrorIs(t, err, durable.ErrInvalidTrigger)
	})
}

// An attempt failed by its timeout is retried after a jittered backoff,
// as any failed attempt: the leader's timer gives the transition its
// random number.
func TestStepTimeoutRetryJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var attempts atomic.Int32
		wf := durable.NewWorkflow[string]("jittered")
		durable.Step(wf, "call", func(ctx durable.Context, in string) (string, error) {
			if attempts.Add(1) <= 2 {
				<-release // the first attempt of each run hangs past its timeout
			}
			return in, nil
		}, durable.WithTimeout(time.Minute), durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Hour, Jitter: 1}))
		e, err := durable.New(memstore.New(), durable.Config{Concurrency: 4})
		require.NoError(t, err)
		require.NoError(t, e.Register(wf))
		ctx := context.Background()
		require.NoError(t, e.Start(ctx))
		var ids []uuid.UUID
		for _, in := range []string{"a", "b"} {
			id, err := wf.RunNoWait(ctx, e, "t", in)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		for _, id := range ids {
			res, err := e.Wait(ctx, id)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			evs, err := e.Events(ctx, id)
			require.NoError(t, err)
			var delays []time.Duration
			for _, ev := range evs {
				if ev.Type == "RETRYING" {
					delays = append(delays, ev.DueAt.Sub(ev.At))
				}
			}
			require.Len(t, delays, 1)
			require.Less(t, delays[0], time.Hour, "jittered: a random part of the hour is taken off")
		}
		close(release)
		require.NoError(t, e.Stop(ctx))
	})
}
