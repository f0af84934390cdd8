package durable_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

// TestStressInMemory: 1,000 runs of a 10-step DAG (root, fan-out of 8,
// join) on four engines with four workers each, sharing one store. Every run
// completes, every step executes exactly once (no crash happens, so
// at-least-once is exactly once here), and each is recorded once.
func TestStressInMemory(t *testing.T) {
	const runs = 1000
	synctest.Test(t, func(t *testing.T) {
		type key struct {
			run  uuid.UUID
			step string
		}
		var mu sync.Mutex
		executed := map[key]int{}
		count := func(ctx durable.Context, in int) (int, error) {
			mu.Lock()
			executed[key{ctx.RunID(), ctx.StepName()}]++
			mu.Unlock()
			return in, nil
		}
		wf := durable.NewWorkflow[int]("stress")
		root := durable.Step(wf, "root", count)
		var mids []durable.Parent
		for i := range 8 {
			mids = append(mids, durable.Step(wf, fmt.Sprintf("fan-%d", i), count, durable.After(root)))
		}
		durable.Step(wf, "join", count, durable.After(mids...))

		s := memstore.New()
		var engines []*durable.Engine
		for range 4 {
			engines = append(engines, startEngine(t, s, durable.Config{Concurrency: 4}, wf))
		}
		ctx := context.Background()
		triggers := make([]durable.Trigger[int], runs)
		for i := range triggers {
			triggers[i] = durable.Trigger[int]{Tenant: fmt.Sprintf("tenant-%d", i%13), Input: i}
		}
		ids, err := wf.RunManyNoWait(ctx, engines[0], triggers)
		require.NoError(t, err)
		for i, id := range ids {
			res, err := engines[i%4].Wait(ctx, id)
			require.NoError(t, err)
			require.Equal(t, durable.RunCompleted, res.Status)
			evs, err := engines[0].Events(ctx, id)
			require.NoError(t, err)
			completed := map[string]int{}
			for _, ev := range evs {
				if ev.Type == durable.EventCompleted {
					completed[ev.Step]++
				}
			}
			require.Len(t, completed, 10)
			for step, n := range completed {
				require.Equal(t, 1, n, "run %s step %s recorded %d times", id, step, n)
			}
		}
		require.Len(t, executed, runs*10)
		for k, n := range executed {
			require.Equal(t, 1, n, "%v executed %d times", k, n)
		}
	})
}
