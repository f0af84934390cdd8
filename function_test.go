package durable_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Engine tests of durable functions (function.go), on both stores.

type basketOrder struct {
	ID    string
	Lines []int
}

type receipt struct {
	Total   int
	Charged string
	Paid    string
}

// TestFunctionSteps: a function's steps run once each and are recorded in
// basketOrder; a loop and a branch on a step's output are plain Go; the output
// is the function's return value.
func TestFunctionSteps(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		var calls atomic.Int32
		fn := durable.NewFunction("checkout", func(ctx durable.FuncContext, o basketOrder) (receipt, error) {
			total := 0
			for k, line := range o.Lines { // a loop over the input: no filler step
				v, err := durable.Do(ctx, "price", func(ctx durable.Context) (int, error) {
					calls.Add(1)
					return line * (k + 1), nil
				})
				if err != nil {
					return receipt{}, err
				}
				total += v
			}
			charge := "small"
			if total > 10 { // a branch on a step's output
				c, err := durable.Do(ctx, "charge", func(ctx durable.Context) (string, error) {
					calls.Add(1)
					return fmt.Sprintf("charged %d", total), nil
				})
				if err != nil {
					return receipt{}, err
				}
				charge = c
			}
			return receipt{Total: total, Charged: charge}, nil
		})
		e := h.start(durable.Config{}, fn)
		ctx := h.ctx(time.Minute)
		res, err := fn.Run(ctx, e, "acme", basketOrder{ID: "o1", Lines: []int{3, 4}})
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
		out, err := fn.Output(res)
		require.NoError(t, err)
		require.Equal(t, receipt{Total: 11, Charged: "charged 11"}, out)
		require.EqualValues(t, 3, calls.Load())

		tasks, err := h.store.ListTasks(ctx, res.ID)
		require.NoError(t, err)
		var names []string
		for _, tk := range tasks {
			names = append(names, tk.Name)
		}
		require.Equal(t, []string{"main", "~main[0:price]", "~main[1:price]", "~main[2:charge]"}, names)
	})
}

// TestFunctionSleepEventSignal: a function that sleeps and waits holds
// nothing meanwhile and runs again from the start, the steps it ran
// already answering from their records.
func TestFunctionSleepEventSignal(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		var charged atomic.Int32
		nap := h.duration(time.Minute, 300*time.Millisecond)
		fn := durable.NewFunction("pay", func(ctx durable.FuncContext, o basketOrder) (receipt, error) {
			c, err := durable.Do(ctx, "charge", func(ctx durable.Context) (string, error) {
				charged.Add(1)
				return "ch-" + o.ID, nil
			})
			if err != nil {
				return receipt{}, err
			}
			durable.SleepFor(ctx, "cool-off", nap)
			paid, err := durable.AwaitEvent[string](ctx, "paid", "paid:"+o.ID)
			if err != nil {
				return receipt{}, err
			}
			ok, err := durable.AwaitSignal[bool](ctx, "approve", "approve")
			if err != nil {
				return receipt{}, err
			}
			if !ok {
				return receipt{}, errors.New("refused")
			}
			return receipt{Charged: c, Paid: paid}, nil
		})
		e := h.start(durable.Config{}, fn)
		ctx := h.ctx(time.Minute)
		id, err := fn.RunNoWait(ctx, e, "acme", basketOrder{ID: "o7"})
		require.NoError(t, err)
		h.eventually(h.duration(2*time.Minute, 20*time.Second), func() bool {
			return stepState(t, e, id, "main") == durabletype.TaskWaiting
		}, "the function waits for its event")
		ctx = h.ctx(time.Minute)
		n, err := e.SendEvent(ctx, "acme", "paid:o7", "bank")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		h.eventually(h.duration(time.Hour, 20*time.Second), func() bool {
			tasks, err := h.store.ListTasks(ctx, id)
			require.NoError(t, err)
			return len(tasks) == 5 && tasks[0].State == durabletype.TaskWaiting
		}, "the function waits for its signal")
		require.NoError(t, e.Signal(ctx, id, "approve", true))
		res := h.wait(e, id, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
		out, err := fn.Output(res)
		require.NoError(t, err)
		require.Equal(t, receipt{Charged: "ch-o7", Paid: "bank"}, out)
		require.EqualValues(t, 1, charged.Load(), "the step ran once, whatever the function's executions")
	})
}

// TestFunctionChildrenAndParallel: child runs and steps in parallel,
// awaited all or first.
func TestFunctionChildrenAndParallel(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		child := durable.NewFunction("double", func(ctx durable.FuncContext, n int) (int, error) {
			return durable.Do(ctx, "mul", func(ctx durable.Context) (int, error) { return 2 * n, nil })
		})
		parent := durable.NewFunction("fan", func(ctx durable.FuncContext, n int) (string, error) {
			var kids []*durable.Future[int]
			var all []durable.Awaitable
			for k := range n {
				f := durable.StartChild(ctx, "child", child, k)
				kids = append(kids, f)
				all = append(all, f)
			}
			if err := durable.AwaitAll(ctx, all...); err != nil {
				return "", err
			}
			sum := 0
			for _, f := range kids {
				v, err := f.Get(ctx)
				if err != nil {
					return "", err
				}
				sum += v
			}
			a := durable.Go(ctx, "a", func(ctx durable.Context) (string, error) { return "A", nil })
			b := durable.Go(ctx, "b", func(ctx durable.Context) (string, error) { return "B", nil })
			first := durable.AwaitFirst(ctx, a, b)
			va, err := a.Get(ctx)
			if err != nil {
				return "", err
			}
			vb, err := b.Get(ctx)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%d %s%s %v", sum, va, vb, first >= 0), nil
		})
		e := h.start(durable.Config{}, parent, child)
		ctx := h.ctx(time.Minute)
		res, err := parent.Run(ctx, e, "acme", 4)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
		out, err := parent.Output(res)
		require.NoError(t, err)
		require.Equal(t, "12 AB true", out)
	})
}

// TestFunctionRetry: a step's failed attempts are retried after a durable
// backoff; a step that fails for good returns a *StepError the function
// handles like any error.
func TestFunctionRetry(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		var attempts atomic.Int32
		fn := durable.NewFunction("flaky", func(ctx durable.FuncContext, _ string) (string, error) {
			v, err := durable.Do(ctx, "flaky", func(ctx durable.Context) (string, error) {
				if attempts.Add(1) < 3 {
					return "", errors.New("not yet")
				}
				return fmt.Sprintf("ok on attempt %d", ctx.Attempt()), nil
			}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 5, InitialDelay: h.duration(10*time.Second, 50*time.Millisecond)}))
			if err != nil {
				return "", err
			}
			_, err = durable.Do(ctx, "doomed", func(ctx durable.Context) (string, error) {
				return "", durable.Terminal(errors.New("card declined"))
			})
			var se *durable.StepError
			if !errors.As(err, &se) || !strings.Contains(se.Err, "card declined") {
				return "", fmt.Errorf("want a StepError, got %v", err)
			}
			return v + "; compensated " + se.Call, nil
		})
		e := h.start(durable.Config{}, fn)
		ctx := h.ctx(time.Minute)
		res, err := fn.Run(ctx, e, "acme", "x")
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
		out, err := fn.Output(res)
		require.NoError(t, err)
		require.Equal(t, "ok on attempt 3; compensated doomed", out)
		require.EqualValues(t, 3, attempts.Load())
	})
}

// TestFunctionDoTx: a DoTx's writes commit with its record, exactly once:
// a function that runs again (after a wait) does not run it again, and an
// attempt that fails rolls its writes back.
func TestFunctionDoTx(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		l := newLedger(h)
		var tries atomic.Int32
		fn := durable.NewFunction("pay-tx", func(ctx durable.FuncContext, id string) (string, error) {
			v, err := durable.DoTx(ctx, "pay", func(ctx durable.Context, tx any) (string, error) {
				if err := l.write(ctx, tx, id); err != nil {
					return "", err
				}
				if tries.Add(1) == 1 {
					return "", errors.New("the first attempt fails after its write")
				}
				return "paid " + id, nil
			}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: h.duration(time.Second, 20*time.Millisecond)}))
			if err != nil {
				return "", err
			}
			durable.SleepFor(ctx, "settle", h.duration(20*time.Second, 50*time.Millisecond))
			return v, nil
		})
		e := h.start(durable.Config{}, fn)
		ctx := h.ctx(time.Minute)
		res, err := fn.Run(ctx, e, "acme", "o-9")
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
		out, err := fn.Output(res)
		require.NoError(t, err)
		require.Equal(t, "paid o-9", out)
		require.EqualValues(t, 2, tries.Load(), "one failed attempt, one that committed; none after the sleep")
		require.Equal(t, 1, l.count("o-9"), "the failed attempt's write rolled back")
	})
}

// TestFunctionNondeterminism: code that, run again, calls another step
// than its history recorded fails the run with both names; a change made
// behind Patched keeps old runs on their path.
func TestFunctionNondeterminism(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		nap := h.duration(20*time.Second, 2*time.Second)
		v1 := func() *durable.Function[string, string] {
			return durable.NewFunction("ship", func(ctx durable.FuncContext, in string) (string, error) {
				a, _ := durable.Do(ctx, "pack", func(ctx durable.Context) (string, error) { return "packed", nil })
				durable.SleepFor(ctx, "wait", nap)
				return a, nil
			}, durable.FuncVersion("1"))
		}
		changed := durable.NewFunction("ship", func(ctx durable.FuncContext, in string) (string, error) {
			a, _ := durable.Do(ctx, "wrap", func(ctx durable.Context) (string, error) { return "wrapped", nil })
			durable.SleepFor(ctx, "wait", nap)
			return a, nil
		}, durable.FuncVersion("1"))
		patched := durable.NewFunction("ship", func(ctx durable.FuncContext, in string) (string, error) {
			a, _ := durable.Do(ctx, "pack", func(ctx durable.Context) (string, error) { return "packed", nil })
			if durable.Patched(ctx, "insure") {
				b, _ := durable.Do(ctx, "insure", func(ctx durable.Context) (string, error) { return "+insured", nil })
				a += b
			}
			durable.SleepFor(ctx, "wait", nap)
			return a, nil
		}, durable.FuncVersion("1"))

		ctx := h.ctx(5 * time.Minute)
		// asleep starts a run on the old code and stops that engine once
		// the run sleeps after its first call. Each run is started just
		// before the deploy that resumes it: a run asleep while the bad
		// deploy is up could wake there and fail too.
		asleep := func() uuid.UUID {
			old := h.start(durable.Config{}, v1())
			id, err := v1().RunNoWait(ctx, old, "acme", "x")
			require.NoError(t, err)
			h.eventually(h.duration(time.Minute, 10*time.Second), func() bool { return stepState(t, old, id, "main") == durabletype.TaskSleeping }, "asleep")
			require.NoError(t, old.Stop(ctx))
			return id
		}

		// A deploy that changed the code under the run: it resumes on it
		// and fails, naming both calls.
		first := asleep()
		bad := h.start(durable.Config{}, changed)
		res := h.wait(bad, first, time.Minute)
		require.Equal(t, durabletype.RunFailed, res.Status)
		require.ErrorContains(t, res.Err, `call 0 is step "pack" in the run's history, but the code now calls step "wrap"`)
		require.NoError(t, bad.Stop(ctx))

		// The same change behind Patched: the old run keeps its path, a
		// new run takes the new one.
		second := asleep()
		good := h.start(durable.Config{}, patched)
		res = h.wait(good, second, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
		out, err := patched.Output(res)
		require.NoError(t, err)
		require.Equal(t, "packed", out)
		res, err = patched.Run(ctx, good, "acme", "y")
		require.NoError(t, err)
		out, err = patched.Output(res)
		require.NoError(t, err)
		require.Equal(t, "packed+insured", out)
	})
}

// TestFunctionCancel: cancelling a function that waits for child runs
// cancels them.
func TestFunctionCancel(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		child := durable.NewFunction("forever", func(ctx durable.FuncContext, _ int) (int, error) {
			_, err := durable.AwaitSignal[int](ctx, "never", "never")
			return 0, err
		})
		parent := durable.NewFunction("parent", func(ctx durable.FuncContext, _ int) (int, error) {
			return durable.StartChild(ctx, "kid", child, 1).Get(ctx)
		})
		e := h.start(durable.Config{}, parent, child)
		ctx := h.ctx(time.Minute)
		id, err := parent.RunNoWait(ctx, e, "acme", 0)
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool { return stepState(t, e, id, "main") == durabletype.TaskWaiting }, "the parent waits")
		page, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Parent: id}})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1)
		kid := page.Runs[0].ID
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool { return stepState(t, e, kid, "main") == durabletype.TaskWaiting }, "the child waits")
		require.NoError(t, e.Cancel(ctx, id, "stop"))
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			r, err := e.Get(ctx, kid)
			require.NoError(t, err)
			return r.Status == durabletype.RunCancelled
		}, "the child run is cancelled with its parent")
	})
}

func uuidOf(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}

// TestFunctionPatchedOldWorker: during a rolling deploy, an old worker that
// resumes a run newer code patched gives it back for later instead of
// failing it; a new worker then finishes it on the new path.
func TestFunctionPatchedOldWorker(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		nap := h.duration(20*time.Second, time.Second)
		build := func(patch bool) *durable.Function[string, string] {
			return durable.NewFunction("ship2", func(ctx durable.FuncContext, in string) (string, error) {
				a, _ := durable.Do(ctx, "pack", func(ctx durable.Context) (string, error) { return "packed", nil })
				if patch && durable.Patched(ctx, "insure") {
					b, _ := durable.Do(ctx, "insure", func(ctx durable.Context) (string, error) { return "+insured", nil })
					a += b
				}
				durable.SleepFor(ctx, "wait", nap)
				return a, nil
			}, durable.FuncVersion("1"))
		}
		ctx := h.ctx(time.Minute)
		newer := build(true)
		e := h.start(durable.Config{}, newer)
		id, err := newer.RunNoWait(ctx, e, "acme", "x")
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool { return stepState(t, e, id, "main") == durabletype.TaskSleeping }, "asleep")
		require.NoError(t, e.Stop(ctx))

		old := h.start(durable.Config{}, build(false))
		h.eventually(h.duration(time.Minute, 20*time.Second), func() bool {
			evs, err := old.Events(ctx, id)
			require.NoError(t, err)
			for _, ev := range evs {
				if ev.Detail == "released by its worker for later" {
					return true
				}
			}
			return false
		}, "the old worker gives the run back")
		require.NoError(t, old.Stop(ctx))
		r, err := e.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunRunning, r.Status, "not failed: %v", r.Err)

		e2 := h.start(durable.Config{}, build(true))
		res := h.wait(e2, id, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
		out, err := newer.Output(res)
		require.NoError(t, err)
		require.Equal(t, "packed+insured", out)
	})
}
