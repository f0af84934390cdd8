package durable_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/pgstore"
)

// TestHistoryPeriodsUnderLoad: with a retention of four seconds the
// leader makes and drops a period of the history (a second) every second
// while two engines trigger, claim and complete runs for five seconds, and
// a sleeping run outlives several periods (nine seconds): every run completes, its step
// once or more, and nothing is left queued or running (a claim that
// planned its statement before a period's partitions appeared once took a
// ready row and missed its task, stranding the run).
func TestHistoryPeriodsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of load")
	}
	t.Parallel()
	env := pgSetup(t)
	pool, schema := env.pool, env.schema
	ran := sync.Map{}
	wf := durable.NewWorkflow[int]("churn")
	durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
		ran.Store(ctx.RunID(), true)
		return in, nil
	})
	napper := durable.NewWorkflow[int]("napper")
	nap := durable.Sleep(napper, "nap", 9*time.Second)
	durable.Step(napper, "after", func(ctx durable.Context, in int) (int, error) { return in, nil }, durable.After(nap))
	var engines []*durable.Engine
	for range 2 {
		s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
		require.NoError(t, err)
		e, err := durable.New(s, durable.Config{Retention: 4 * time.Second})
		require.NoError(t, err)
		require.NoError(t, e.Register(wf, napper))
		require.NoError(t, e.Start(context.Background()))
		engines = append(engines, e)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, e.Stop(ctx))
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	sleeper, err := napper.RunNoWait(ctx, engines[0], "t", 1)
	require.NoError(t, err)

	var ids []uuid.UUID
	var made atomic.Int64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		for i, e := range engines {
			batch := make([]durable.Trigger[int], 20)
			for k := range batch {
				batch[k] = durable.Trigger[int]{Tenant: "t", Input: i}
			}
			got, err := wf.RunManyNoWait(ctx, e, batch)
			require.NoError(t, err)
			ids = append(ids, got...)
			made.Add(int64(len(got)))
		}
		time.Sleep(20 * time.Millisecond) // pacing the load, not waiting for it
	}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if _, ok := ran.Load(id); !ok {
				return false
			}
		}
		return true
	}, time.Minute, 50*time.Millisecond, "every run's step ran (%d runs)", made.Load())
	require.Eventually(t, func() bool {
		page, err := engines[0].ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunRunning}}})
		require.NoError(t, err)
		return len(page.Runs) == 0
	}, time.Minute, 100*time.Millisecond, "no run left in flight")
	res, err := engines[1].Wait(ctx, sleeper)
	require.NoError(t, err, "the sleeping run outlived its period")
	require.Equal(t, durabletype.RunCompleted, res.Status)

	// Periods came and went meanwhile: the oldest left began well after
	// the first runs.
	var lo uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, "SELECT lo FROM "+pgx.Identifier{schema, "history_partitions"}.Sanitize()+" ORDER BY lo LIMIT 1").Scan(&lo))
	var ms int64
	for _, b := range lo[:6] {
		ms = ms<<8 | int64(b)
	}
	require.Greater(t, time.UnixMilli(ms), start.Add(2*time.Second), "the first periods were dropped")
}
