package durabletest_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletest"
	"github.com/effectivelabs/durable/durabletype"
)

// Durable functions in the kit: the same helpers, in virtual time.

// trialInput is the input of the trial function.
type trialInput struct{ Account string }

// newTrial declares a function that charges a card through a provider
// that fails twice (retried after 1h, then 2h of backoff), sleeps 30 days,
// then waits up to a week for the signal "convert".
func newTrial(charges *atomic.Int32) *durable.Function[trialInput, string] {
	return durable.NewFunction("trial", func(ctx durable.FuncContext, in trialInput) (string, error) {
		card, err := durable.Do(ctx, "verify-card", func(ctx durable.Context) (string, error) {
			if charges.Add(1) < 3 {
				return "", errors.New("provider unavailable")
			}
			return "card-ok-" + in.Account, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 4, InitialDelay: time.Hour, MaxDelay: 24 * time.Hour}))
		if err != nil {
			return "", err
		}
		durable.SleepFor(ctx, "trial-period", 30*24*time.Hour)
		plan, err := durable.AwaitSignal[string](ctx, "convert", "convert", durable.WithWaitTimeout(7*24*time.Hour))
		if errors.Is(err, durable.ErrWaitTimeout) {
			return card + ", trial ended", nil
		}
		if err != nil {
			return "", err
		}
		return card + ", converted to " + plan, nil
	})
}

// TestFunctionVirtualTime: a function's retry backoffs, its 30-day sleep
// and its wait pass in virtual time, to the nanosecond; Start, WaitStep,
// Signal, Settle and the assertions serve a function as they serve a
// workflow (its body is the step durable.FuncBody, its calls are named
// "name#seq").
func TestFunctionVirtualTime(t *testing.T) {
	opts := durabletest.Options{Timeout: 60 * 24 * time.Hour}
	durabletest.RunOptions(t, opts, func(t *testing.T, k *durabletest.Kit) {
		var charges atomic.Int32
		trial := newTrial(&charges)
		start := time.Now()
		id := durabletest.Start(k, trial, trialInput{Account: "a-1"})

		// The body waits for its signal once the backoffs (1h, 2h) and
		// the 30 days have passed.
		body := durabletest.StepName(durable.FuncBody)
		k.WaitStep(id, body, durabletype.TaskWaiting)
		if got, want := time.Since(start), 3*time.Hour+30*24*time.Hour; got != want {
			t.Fatalf("the function waits for its signal after %s of virtual time, want %s", got, want)
		}
		k.WaitStep(id, durabletest.StepName("convert#2"), durabletype.TaskWaiting)
		k.Advance(24 * time.Hour)
		k.Signal(id, "convert", "pro")
		res := k.Settle(id)
		durabletest.RequireCompleted(t, res)
		durabletest.RequireFuncOutput(t, res, trial, "card-ok-a-1, converted to pro")
		durabletest.RequireAttempts(t, res, durabletest.StepName("verify-card#0"), 3)
		durabletest.RequireState(t, res, durabletest.StepName("trial-period#1"), durabletype.TaskCompleted)
		if got, want := res.FinishedAt.Sub(res.CreatedAt), 3*time.Hour+31*24*time.Hour; got != want {
			t.Fatalf("the run took %s of virtual time, want %s", got, want)
		}
		if n := charges.Load(); n != 3 {
			t.Fatalf("the card step ran %d times, want 3 (each attempt once, whatever the body's executions)", n)
		}
	})
}

// TestFunctionWaitTimesOut: with no signal, the wait times out after its
// week and the function goes on; Execute settles it in virtual time.
func TestFunctionWaitTimesOut(t *testing.T) {
	opts := durabletest.Options{Timeout: 60 * 24 * time.Hour}
	durabletest.RunOptions(t, opts, func(t *testing.T, k *durabletest.Kit) {
		var charges atomic.Int32
		trial := newTrial(&charges)
		res := durabletest.Execute(k, trial, trialInput{Account: "a-2"})
		durabletest.RequireCompleted(t, res)
		if got := durabletest.FuncOutput(t, res, trial); got != "card-ok-a-2, trial ended" {
			t.Fatalf("output %q", got)
		}
		durabletest.RequireState(t, res, durabletest.StepName("convert#2"), durabletype.TaskFailed)
		if got, want := res.FinishedAt.Sub(res.CreatedAt), 3*time.Hour+37*24*time.Hour; got != want {
			t.Fatalf("the run took %s of virtual time, want %s", got, want)
		}
	})
}

// TestFunctionCannotSettle: a function that waits for input the test has
// not sent fails Settle at once, and the failure says what it waits for:
// the body's signal, or its child run and what the child waits for (not
// the calls' own records, which wait for nothing by themselves).
func TestFunctionCannotSettle(t *testing.T) {
	kits(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		approval := durable.NewFunction("approval", func(ctx durable.FuncContext, doc string) (string, error) {
			return durable.AwaitSignal[string](ctx, "approve", "approve")
		})
		id := durabletest.Start(k, approval, "d-1")
		start := time.Now()
		msg := fails(t, "Settle of a function waiting for a signal", func(tb testing.TB) { durabletest.WithTB(k, tb).Settle(id) },
			"cannot settle without input from outside the engine",
			`step "main" WAITING for the signal "approve" to its run (send it with Kit.Signal)`)
		if virtual(k) && time.Since(start) != 0 {
			t.Errorf("Settle let %s pass before it failed", time.Since(start))
		}
		notWant(t, msg, `"approve#0"`)

		kid := durable.NewFunction("kid", func(ctx durable.FuncContext, in string) (string, error) {
			return durable.AwaitEvent[string](ctx, "paid", "paid:"+in)
		})
		parent := durable.NewFunction("parent", func(ctx durable.FuncContext, in string) (string, error) {
			return durable.StartChild(ctx, "pay", kid, in).Get(ctx)
		})
		k.Register(parent, kid)
		id = durabletest.Start(k, parent, "o-1")
		msg = fails(t, "Settle of a function waiting for its child", func(tb testing.TB) { durabletest.WithTB(k, tb).Settle(id) },
			`step "main" (a function) WAITING for 1 of its child runs`,
			`call "pay#0" WAITING for its child run`,
			`step "main" WAITING for the event "paid:o-1" of tenant "tenant"`)
		notWant(t, msg, `"paid#0"`, `event ""`)

		// Sent, the event ends the child's wait, and the parent's.
		if n := k.SendEvent("paid:o-1", "card"); n != 1 {
			t.Fatalf("the event reached %d waits, want 1", n)
		}
		durabletest.RequireFuncOutput(t, k.Settle(id), parent, "card")
	})
}

// TestRequireFuncOutput: the function's output assertions pass on what it
// returned, and fail saying what the run holds otherwise.
func TestRequireFuncOutput(t *testing.T) {
	kits(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		double := durable.NewFunction("double", func(ctx durable.FuncContext, n int) (int, error) {
			if n < 0 {
				return 0, fmt.Errorf("negative input %d", n)
			}
			return durable.Do(ctx, "mul", func(ctx durable.Context) (int, error) { return 2 * n, nil })
		})
		res := durabletest.Execute(k, double, 21)
		passes(t, "RequireFuncOutput", func(tb testing.TB) { durabletest.RequireFuncOutput(tb, res, double, 42) })
		fails(t, "RequireFuncOutput, another value", func(tb testing.TB) { durabletest.RequireFuncOutput(tb, res, double, 43) },
			`function "double"`, "got:  42", "want: 43")
		failed := durabletest.Execute(k, double, -1)
		fails(t, "FuncOutput of a failed run", func(tb testing.TB) { durabletest.FuncOutput(tb, failed, double) },
			"is FAILED", "negative input -1")
		if msg := durabletest.RequireFailed(t, failed, durabletest.StepName(durable.FuncBody)); msg != "negative input -1" {
			t.Errorf("RequireFailed: %q", msg)
		}
	})
}

// notWant fails t if msg holds any of bad.
func notWant(t *testing.T, msg string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(msg, b) {
			t.Errorf("the failure says %q, which it should not:\n%s", b, msg)
		}
	}
}
