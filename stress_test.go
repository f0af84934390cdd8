package durable_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// TestStress: runs of a 10-step DAG (root, fan-out of 8, join) on four
// engines with four workers each, sharing one store: 1,000 runs in memory,
// 50 on PostgreSQL, where they take real time (TestPGManyEnginesOneDatabase
// runs 200 there, on three engines). Every run completes, every step
// executes exactly once (no crash happens, so at-least-once is exactly once
// here), and each is recorded once.
func TestStress(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		runs := 1000
		if !h.virtual {
			runs = 50
		}
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
		build := func() []durable.Definition {
			wf := durable.NewWorkflow[int]("stress")
			root := durable.Step(wf, "root", count)
			var mids []durable.Parent
			for i := range 8 {
				mids = append(mids, durable.Step(wf, fmt.Sprintf("fan-%d", i), count, durable.After(root)))
			}
			durable.Step(wf, "join", count, durable.After(mids...))
			return []durable.Definition{wf}
		}
		engines := h.startMany(4, durable.Config{Concurrency: 4, HeartbeatInterval: h.duration(5*time.Second, time.Second), DeadAfter: h.duration(30*time.Second, 10*time.Second)}, build)
		wf := build()[0].(*durable.Workflow[int])
		ctx := h.ctx(2 * time.Minute)
		triggers := make([]durable.Trigger[int], runs)
		for i := range triggers {
			triggers[i] = durable.Trigger[int]{Tenant: fmt.Sprintf("tenant-%d", i%13), Input: i}
		}
		ids, err := wf.RunManyNoWait(ctx, engines[0], triggers)
		require.NoError(t, err)
		for i, id := range ids {
			res, err := engines[i%4].Wait(ctx, id)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			evs, err := engines[0].Events(ctx, id)
			require.NoError(t, err)
			completed := map[string]int{}
			for _, ev := range evs {
				if ev.Type == durabletype.EventCompleted {
					completed[ev.Step]++
				}
			}
			require.Len(t, completed, 10)
			for step, n := range completed {
				require.Equal(t, 1, n, "run %s step %s recorded %d times", id, step, n)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, executed, runs*10)
		for k, n := range executed {
			require.Equal(t, 1, n, "%v executed %d times", k, n)
		}
	})
}
