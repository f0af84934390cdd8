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
			res, err := set.Chaos.Run(ctx, e, "t", ChaosInput{N: n})
			require.NoError(t, err)
			require.Equal(t, durable.RunCompleted, res.Status)
			require.GreaterOrEqual(t, time.Since(start), time.Second, "the nap is slept")
			skipped := "odd"
			if n%2 == 1 {
				skipped = "even"
			}
			s, _ := res.Step(skipped)
			require.Equal(t, durable.StepSkipped, s.State)
			s, _ = res.Step("flaky")
			require.Equal(t, 2, s.Attempts)
		}
		require.Equal(t, 4, executions["flaky"], "two runs, two attempts each")
		require.Equal(t, 1, executions["even"])

		for _, wf := range []*durable.Workflow[int]{set.Noop, set.DAG, set.Chain} {
			res, err := wf.Run(ctx, e, "t", 0)
			require.NoError(t, err, wf.Name())
			require.Equal(t, durable.RunCompleted, res.Status)
		}
		res, err := set.DAG.Run(ctx, e, "t", 0)
		require.NoError(t, err)
		require.Len(t, res.Steps, 10)
	})
}
