package durabletest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletest"
	"github.com/effectivelabs/durable/durabletype"
)

// The whole-file example's test, run.
func TestExampleSignup(t *testing.T) { testSignup(t) }

// virtual reports whether k runs in virtual time (in memory), not on
// PostgreSQL.
func virtual(k *durabletest.Kit) bool {
	_, pg := k.Store().(interface{ Schema() string })
	return !pg
}

// passes fails t if fn reported a failure to its testing.TB.
func passes(t *testing.T, what string, fn func(tb testing.TB)) {
	t.Helper()
	if f := durabletest.Capture(fn); f.Failed() {
		t.Errorf("%s: failed, want it to pass:\n%s", what, f.Messages())
	}
}

// fails fails t unless fn reported a failure to its testing.TB, saying
// each of wants, and stopped there.
func fails(t *testing.T, what string, fn func(tb testing.TB), wants ...string) string {
	t.Helper()
	stopped := true
	f := durabletest.Capture(func(tb testing.TB) {
		fn(tb)
		stopped = false
	})
	if !f.Failed() {
		t.Errorf("%s: passed, want a failure", what)
		return ""
	}
	if !stopped {
		t.Errorf("%s: failed but went on, want it to stop the test (Fatalf)", what)
	}
	for _, w := range wants {
		if !strings.Contains(f.Messages(), w) {
			t.Errorf("%s: the failure does not say %q:\n%s", what, w, f.Messages())
		}
	}
	return f.Messages()
}

// TestAssertions: each assertion passes on what the run holds, and fails
// (stopping the test) with a message that says what it holds otherwise.
func TestAssertions(t *testing.T) {
	kits(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[int]("asserted")
		double := durable.Step(wf, "double", func(ctx durable.Context, n int) (int, error) { return 2 * n, nil })
		skipped := durable.Step(wf, "skipped", func(ctx durable.Context, n int) (string, error) { return "ran", nil },
			durable.After(double), durable.SkipIf(double, func(v int) bool { return v > 0 }))
		broken := durable.Step(wf, "broken", func(ctx durable.Context, n int) (string, error) {
			return "", durable.Terminal(errors.New("the disk is full"))
		}, durable.After(double, skipped)) // after skipped: it is SKIPPED, not cancelled by the failure
		res := durabletest.Execute(k, wf, 21)

		passes(t, "RequireOutput", func(tb testing.TB) { durabletest.RequireOutput(tb, res, double, 42) })
		fails(t, "RequireOutput, another value", func(tb testing.TB) { durabletest.RequireOutput(tb, res, double, 43) },
			`step "double"`, "got:  42", "want: 43")
		fails(t, "RequireOutput of a skipped step", func(tb testing.TB) { durabletest.RequireOutput(tb, res, skipped, "ran") },
			`step "skipped" is SKIPPED`)
		passes(t, "Output", func(tb testing.TB) {
			if got := durabletest.Output(tb, res, double); got != 42 {
				tb.Fatalf("Output = %d", got)
			}
		})

		passes(t, "RequireState", func(tb testing.TB) { durabletest.RequireState(tb, res, skipped, durabletype.TaskSkipped) })
		fails(t, "RequireState, another state", func(tb testing.TB) { durabletest.RequireState(tb, res, skipped, durabletype.TaskCompleted) },
			`want step "skipped" COMPLETED`, `step "skipped" SKIPPED`)
		fails(t, "RequireState of an unknown step", func(tb testing.TB) {
			durabletest.RequireState(tb, res, durabletest.StepName("nope"), durabletype.TaskCompleted)
		}, `has no step "nope"`, "double, skipped, broken")

		passes(t, "RequireStatus", func(tb testing.TB) { durabletest.RequireStatus(tb, res, durabletype.RunFailed) })
		fails(t, "RequireCompleted of a failed run", func(tb testing.TB) { durabletest.RequireCompleted(tb, res) },
			"want a COMPLETED run", "is FAILED", `step "broken" FAILED: the disk is full`)
		fails(t, "RequireCompleted of nothing", func(tb testing.TB) { durabletest.RequireCompleted(tb, nil) }, "no run result")

		passes(t, "RequireFailed", func(tb testing.TB) {
			if msg := durabletest.RequireFailed(tb, res, broken); msg != "the disk is full" {
				tb.Fatalf("RequireFailed = %q", msg)
			}
		})
		fails(t, "RequireFailed by another step", func(tb testing.TB) { durabletest.RequireFailed(tb, res, double) },
			`want run `+res.ID.String()+` failed by step "double"`)

		passes(t, "RequireAttempts", func(tb testing.TB) { durabletest.RequireAttempts(tb, res, double, 1) })
		fails(t, "RequireAttempts, another count", func(tb testing.TB) { durabletest.RequireAttempts(tb, res, double, 2) },
			`want step "double" attempted 2 times, not 1`)
	})
}

// TestSettleNeedsAnEvent: a run that waits for an event the test has not
// sent cannot settle: Settle says so at once (no virtual time passes),
// naming the event and how to send it; once sent, the run settles.
func TestSettleNeedsAnEvent(t *testing.T) {
	kits(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[string]("needs-event")
		paid := durable.WaitForEvent[int](wf, "paid", func(ctx durable.Context, order string) (string, error) {
			return "paid:" + order, nil
		})
		id := durabletest.Start(k, wf, "o-1")
		before := time.Now()
		fails(t, "Settle", func(tb testing.TB) { durabletest.WithTB(k, tb).Settle(id) },
			"cannot settle without input from outside the engine",
			`step "paid" WAITING for the event "paid:o-1" of tenant "tenant" (send it with Kit.SendEvent)`)
		if virtual(k) && !time.Now().Equal(before) {
			t.Fatalf("Settle let %s pass before it gave up", time.Since(before))
		}
		if n := k.SendEvent("paid:o-1", 99); n != 1 {
			t.Fatalf("delivered to %d", n)
		}
		res := k.Settle(id)
		durabletest.RequireOutput(t, res, paid, 99)
		if virtual(k) && !time.Now().Equal(before) {
			t.Fatalf("the run settled %s later", time.Since(before))
		}
	})
}

// TestSettleNeedsASignalInAChild: a run whose child run waits for a signal
// cannot settle; Settle describes the child's wait under the parent's.
func TestSettleNeedsASignalInAChild(t *testing.T) {
	kits(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		approval := durable.NewWorkflow[int]("approval")
		approved := durable.WaitForSignal[bool](approval, "approved", "approve")
		wf := durable.NewWorkflow[int]("expense")
		ok := durable.Child(wf, "approve", approval, approved, func(ctx durable.Context, n int) (int, error) { return n, nil })
		id := durabletest.Start(k, wf, 7)
		fails(t, "Settle", func(tb testing.TB) { durabletest.WithTB(k, tb).Settle(id) },
			`step "approve" WAITING for its child run`,
			`step "approved" WAITING for the signal "approve" to its run (send it with Kit.Signal)`)
		child := k.Child(k.Get(id), ok)
		k.Signal(child.ID, "approve", true)
		durabletest.RequireOutput(t, k.Settle(id), ok, true)
	})
}

// TestSettleUnservedWorkflow: a run of a workflow no worker serves waits
// forever; Settle says which workflow to register.
func TestSettleUnservedWorkflow(t *testing.T) {
	kits(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[int]("unregistered")
		durable.Step(wf, "a", func(ctx durable.Context, n int) (int, error) { return n, nil })
		id, err := wf.RunNoWait(k.Context(), k.Engine(), k.Tenant(), 1) // not registered
		if err != nil {
			t.Fatal(err)
		}
		fails(t, "Settle", func(tb testing.TB) { durabletest.WithTB(k, tb).Settle(id) },
			`step "a" QUEUED: no live worker serves workflow "unregistered" (register it with Kit.Register)`)
		k.Register(wf)
		durabletest.RequireCompleted(t, k.Settle(id))
	})
}

// TestSettleTimeout: a run whose step blocks in its own code can go on
// (the engine cannot tell), so Settle waits Options.Timeout of virtual
// time, then fails, describing the step.
func TestSettleTimeout(t *testing.T) {
	durabletest.RunOptions(t, durabletest.Options{Timeout: time.Hour}, func(t *testing.T, k *durabletest.Kit) {
		release := make(chan struct{})
		wf := durable.NewWorkflow[int]("blocked")
		durable.Step(wf, "a", func(ctx durable.Context, n int) (int, error) {
			select {
			case <-release:
				return n, nil
			case <-ctx.Done():
				return 0, context.Cause(ctx)
			}
		})
		id := durabletest.Start(k, wf, 1)
		before := time.Now()
		fails(t, "Settle", func(tb testing.TB) { durabletest.WithTB(k, tb).Settle(id) },
			"did not settle within 1h0m0s of virtual time (Options.Timeout)", `step "a" RUNNING: attempt 1`)
		if waited := time.Since(before); waited != time.Hour {
			t.Fatalf("Settle waited %s", waited)
		}
		close(release)
		durabletest.RequireCompleted(t, k.Settle(id))
	})
}

// TestWaitStep: WaitStep returns when the step reaches the state, at that
// instant, and fails if the run settles first.
func TestWaitStep(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[int]("nap")
		nap := durable.Sleep(wf, "nap", 3*time.Hour)
		after := durable.Step(wf, "after", func(ctx durable.Context, n int) (int, error) { return n + 1, nil }, durable.After(nap))
		start := time.Now()
		id := durabletest.Start(k, wf, 1)
		if s := k.WaitStep(id, nap, durabletype.TaskSleeping); !s.DueAt.Equal(start.Add(3 * time.Hour)) {
			t.Fatalf("sleeps until %s", s.DueAt)
		}
		k.WaitStep(id, nap, durabletype.TaskCompleted)
		if !time.Now().Equal(start.Add(3 * time.Hour)) {
			t.Fatalf("WaitStep returned at %s, %s after the start", time.Now(), time.Since(start))
		}
		res := k.Settle(id)
		durabletest.RequireOutput(t, res, after, 2)
		fails(t, "WaitStep after the run settled", func(tb testing.TB) {
			durabletest.WithTB(k, tb).WaitStep(id, after, durabletype.TaskRunning)
		}, "settled COMPLETED before it could have step \"after\" RUNNING")
	})
}

// TestAdvance: Advance lets time pass as production would: a sleep ends at
// its time, not a nanosecond sooner, and retry backoffs elapse exactly.
func TestAdvance(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		failures := 2
		wf := durable.NewWorkflow[int]("advance")
		nap := durable.Sleep(wf, "nap", 24*time.Hour)
		flaky := durable.Step(wf, "flaky", func(ctx durable.Context, n int) (int, error) {
			if failures > 0 {
				failures--
				return 0, errors.New("try again")
			}
			return n, nil
		}, durable.After(nap), durable.WithRetry(durable.RetryPolicy{MaxRetries: 5, InitialDelay: 10 * time.Second}))
		id := durabletest.Start(k, wf, 5)
		k.Advance(24*time.Hour - time.Nanosecond)
		durabletest.RequireState(t, k.Get(id), nap, durabletype.TaskSleeping)
		k.Advance(time.Nanosecond)
		durabletest.RequireState(t, k.Get(id), nap, durabletype.TaskCompleted)
		retry := durabletest.RequireState(t, k.Get(id), flaky, durabletype.TaskQueued)
		if want := time.Now().Add(10 * time.Second); !retry.DueAt.Equal(want) {
			t.Fatalf("first retry at %s, want %s", retry.DueAt, want)
		}
		k.Advance(10 * time.Second)
		retry = durabletest.RequireState(t, k.Get(id), flaky, durabletype.TaskQueued)
		if want := time.Now().Add(20 * time.Second); !retry.DueAt.Equal(want) {
			t.Fatalf("second retry at %s, want %s", retry.DueAt, want)
		}
		res := k.Settle(id)
		durabletest.RequireAttempts(t, res, flaky, 3)
		if !time.Now().Equal(res.FinishedAt) {
			t.Fatalf("Settle returned at %s, the run settled at %s", time.Now(), res.FinishedAt)
		}
		var retrying int
		for _, ev := range k.Events(id) {
			if ev.Step == "flaky" && ev.Type == durabletype.EventRetrying {
				retrying++
			}
		}
		if retrying != 2 {
			t.Fatalf("%d RETRYING events", retrying)
		}
		fails(t, "Advance backwards", func(tb testing.TB) { durabletest.WithTB(k, tb).Advance(-time.Second) },
			"time does not go back")
	})
}

// TestWaitTimeoutPasses: an event wait with a timeout can settle without
// the event: Settle lets the timeout pass.
func TestWaitTimeoutPasses(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[int]("reminder")
		answer := durable.WaitForEvent[string](wf, "answer", func(ctx durable.Context, n int) (string, error) {
			return "answer", nil
		}, durable.WithWaitTimeout(72*time.Hour), durable.SkipOnTimeout())
		start := time.Now()
		res := durabletest.Execute(k, wf, 1)
		durabletest.RequireState(t, res, answer, durabletype.TaskSkipped)
		if took := time.Since(start); took != 72*time.Hour {
			t.Fatalf("took %s", took)
		}
	})
}

// TestKitOptions: the tenant and the engine's configuration come from
// Options; a registration that fails fails the test, naming the mistake.
func TestKitOptions(t *testing.T) {
	kits(t, durabletest.Options{Tenant: "acme", Config: durable.Config{WorkerID: "kit-worker"}},
		func(t *testing.T, k *durabletest.Kit) {
			if k.Engine().WorkerID() != "kit-worker" {
				t.Fatalf("worker %s", k.Engine().WorkerID())
			}
			wf := durable.NewWorkflow[int]("tenanted")
			durable.Step(wf, "a", func(ctx durable.Context, n int) (string, error) { return ctx.TenantID(), nil })
			res := durabletest.Execute(k, wf, 1)
			if res.Tenant != "acme" || k.Tenant() != "acme" {
				t.Fatalf("tenant %q", res.Tenant)
			}
			bad := durable.NewWorkflow[int]("bad")
			durable.Step(bad, "a", func(ctx durable.Context, n int) (int, error) { return n, nil })
			durable.Step(bad, "a", func(ctx durable.Context, n int) (int, error) { return n, nil })
			fails(t, "Register", func(tb testing.TB) { durabletest.WithTB(k, tb).Register(bad) }, "durabletest: registering", `"a"`)
		})
}

// TestEndsWithAStepRunning: a test may end while a step runs: the kit
// cancels it when it stops the engine (after a virtual minute), and the
// test passes.
func TestEndsWithAStepRunning(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[int]("endless")
		loop := durable.Step(wf, "loop", func(ctx durable.Context, n int) (int, error) {
			<-ctx.Done()
			return 0, context.Cause(ctx)
		})
		id := durabletest.Start(k, wf, 1)
		k.WaitStep(id, loop, durabletype.TaskRunning)
	})
}

// TestLongSleep: a two weeks' sleep passes in virtual time (in about a
// real second, spent in the engine's periodic work: BenchmarkVirtualSleep).
func TestLongSleep(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[int]("fortnightly")
		durable.Sleep(wf, "fortnight", 14*24*time.Hour)
		start := time.Now()
		durabletest.RequireCompleted(t, durabletest.Execute(k, wf, 1))
		if took := time.Since(start); took != 14*24*time.Hour {
			t.Fatalf("took %s", took)
		}
	})
}
