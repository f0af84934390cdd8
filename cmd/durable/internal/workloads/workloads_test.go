package workloads

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
)

func TestBuiltinsComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		executions := map[string]int{}
		set := New(Options{Record: func(ctx durable.Context) error {
			mu.Lock()
			executions[ctx.StepName()]++
			mu.Unlock()
			return nil
		}})
		e, err := durable.New(memstore.New(), durable.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		require.NoError(t, e.Register(set.All()...))
		ctx := context.Background()
		require.NoError(t, e.Start(ctx))
		defer e.Stop(ctx)

		for _, n := range []int{1, 2} {
			start := time.Now()
			// Sent before the run waits: the wait looks back for it.
			_, err := e.SendEvent(ctx, "t", ChaosKey(n), "ok")
			require.NoError(t, err)
			res, err := set.Chaos.Run(ctx, e, "t", ChaosInput{N: n})
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			require.GreaterOrEqual(t, time.Since(start), time.Second, "the nap is slept")
			skipped := "odd"
			if n%2 == 1 {
				skipped = "even"
			}
			s, _ := res.Step(skipped)
			require.Equal(t, durabletype.TaskSkipped, s.State)
			s, _ = res.Step("flaky")
			require.Equal(t, 2, s.Attempts)
		}
		require.Equal(t, 4, executions["flaky"], "two runs, two attempts each")
		require.Equal(t, 1, executions["even"])

		for _, wf := range []*durable.Workflow[int]{set.Noop, set.DAG, set.Chain} {
			res, err := wf.Run(ctx, e, "t", 0)
			require.NoError(t, err, wf.Name())
			require.Equal(t, durabletype.RunCompleted, res.Status)
		}
		res, err := set.DAG.Run(ctx, e, "t", 0)
		require.NoError(t, err)
		require.Len(t, res.Steps, 10)
		require.Equal(t, 2*ChaosItems, executions["fan[1]"]+executions["fan[2]"]+executions["fan[5]"]+executions["fan[6]"]+
			executions["fan[0]"]+executions["fan[3]"]+executions["fan[4]"]+executions["fan[7]"], "%v", executions)

		res, err = set.BenchFunc.Run(ctx, e, "t", 0)
		require.NoError(t, err)
		steps, err := set.BenchFunc.Output(res)
		require.NoError(t, err)
		require.Equal(t, FuncSteps, steps)

		res, err = set.Map.Run(ctx, e, "t", 100)
		require.NoError(t, err)
		s, _ := res.Step("items")
		require.Len(t, s.Items, 100)

		id, err := set.Wait.RunNoWait(ctx, e, "t", 7)
		require.NoError(t, err)
		synctest.Wait()
		n, err := e.SendEvent(ctx, "t", WaitKey(7), 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		res, err = e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)

		res, err = set.Parent.Run(ctx, e, "t", 3)
		require.NoError(t, err)
		kids, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Parent: res.ID}})
		require.NoError(t, err)
		require.Len(t, kids.Runs, ParentChildren)
	})
}

// TestFunctionsComplete: a crash-fn run completes once its event and its
// signal are sent, each step executed once (flaky twice), its output
// holding what each call returned.
func TestFunctionsComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		executions := map[string]int{}
		set := New(Options{FuncRecord: func(ctx durable.Context, nonce string) error {
			mu.Lock()
			executions[ctx.StepName()]++
			mu.Unlock()
			return nil
		}})
		e, err := durable.New(memstore.New(), durable.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		require.NoError(t, e.Register(set.All()...))
		ctx := context.Background()
		require.NoError(t, e.Start(ctx))
		defer e.Stop(ctx)

		_, err = e.SendEvent(ctx, "t", FuncKey(5), "paid")
		require.NoError(t, err)
		id, err := set.Func.RunNoWait(ctx, e, "t", FuncInput{N: 5})
		require.NoError(t, err)
		require.NoError(t, e.Signal(ctx, id, FuncSignal, "yes"))
		res, err := e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "%v", res.Err)
		out, err := set.Func.Output(res)
		require.NoError(t, err)
		require.Equal(t, "paid", out.Paid)
		require.Equal(t, "yes", out.Approved)
		require.Len(t, out.Parts, FuncParts)
		for _, v := range append([]string{out.Prepare, out.Flaky, out.Ledger, out.Finish}, out.Parts...) {
			_, n, nonce, ok := ParseFuncStepResult(v)
			require.True(t, ok && n == 5 && nonce != "", v)
		}
		require.Contains(t, out.Child, "a/5/")
		var calls []string
		for _, s := range res.Steps[1:] {
			calls = append(calls, s.Name)
		}
		require.Equal(t, FuncCalls, calls)
		require.Equal(t, map[string]int{"prepare": 1, "flaky": 2, "ledger": 1, "part-0": 1, "part-1": 1, "part-2": 1,
			"part-3": 1, "a": 1, "b": 1, "finish": 1}, executions)
	})
}
