package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

var ctx = context.Background()

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// setup returns a store on a fresh schema, with its pool and schema name.
func setup(t *testing.T) (*pgstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	return s, pool, schema
}

func once() durabletype.RetryPolicy { return durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1} }

func step(name string, parents ...string) durabletype.StepSpec {
	return durabletype.StepSpec{Name: name, Parents: parents, Retry: once()}
}

func newRun(wf, tenant string, sh *durabletype.Shape) store.NewRun {
	return store.NewRun{ID: uuid.New(), Workflow: wf, Tenant: tenant, Input: []byte(`{}`), Shape: sh}
}

func claimAll(t *testing.T, s store.Store, wf string, limit int) []*store.ClaimedTask {
	t.Helper()
	var out []*store.ClaimedTask
	for {
		cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: "w", Limit: limit, Workflows: []string{wf}})
		require.NoError(t, err)
		if len(cs) == 0 {
			return out
		}
		out = append(out, cs...)
	}
}

func complete(c *store.ClaimedTask) store.Outcome {
	return store.Outcome{Task: c.Ref(), Kind: store.OutcomeComplete, Output: []byte(`1`)}
}

func stepEvents(t *testing.T, s store.Store, id uuid.UUID, stepName string) []string {
	t.Helper()
	evs, err := s.ListEvents(ctx, id)
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		if e.Step == stepName {
			out = append(out, string(e.Type))
		}
	}
	return out
}

// TestCancellationRace fails runs while other goroutines claim their queued
// siblings: each sibling ends either CANCELLED and never claimed, or
// claimed and RUNNING under that claim; the runs settle once the claimed
// siblings finish.
func TestCancellationRace(t *testing.T) {
	t.Parallel()
	s, _, _ := setup(t)
	const rounds, runsPerRound, siblings = 12, 10, 24
	for round := range rounds {
		wf := fmt.Sprintf("race%d", round)
		// Two roots: "bad", which will fail, and "go", whose completion
		// enqueues the siblings.
		steps := []durabletype.StepSpec{step("bad"), step("go")}
		for i := range siblings {
			steps = append(steps, step(fmt.Sprintf("s%d", i), "go"))
		}
		sh := &durabletype.Shape{Steps: steps}
		var runs []store.NewRun
		for i := range runsPerRound {
			runs = append(runs, newRun(wf, fmt.Sprintf("t%d", i%2), sh))
		}
		require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Now: t0, Runs: runs})))
		roots := claimAll(t, s, wf, 100)
		require.Len(t, roots, 2*runsPerRound)
		var bad []*store.ClaimedTask
		var gos []store.Outcome
		for _, c := range roots {
			if c.Step == "bad" {
				bad = append(bad, c)
			} else {
				gos = append(gos, complete(c))
			}
		}
		_, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: t0, Outcomes: gos})
		require.NoError(t, err)

		var mu sync.Mutex
		claimed := map[uuid.UUID]map[string]int64{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		done := make(chan struct{})
		var fwg sync.WaitGroup
		for _, c := range bad {
			fwg.Go(func() {
				<-start
				res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: t0, Outcomes: []store.Outcome{
					{Task: c.Ref(), Kind: store.OutcomeFail, Error: "no", Terminal: true}}})
				if err != nil {
					t.Error(err)
				} else if res[0].Status != store.FinishApplied {
					t.Errorf("failing outcome %v", res[0].Status)
				}
			})
		}
		for w := range 4 {
			wg.Go(func() {
				<-start
				for {
					cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: fmt.Sprintf("c%d", w), Limit: 1 + w%2, Workflows: []string{wf}})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, c := range cs {
						if claimed[c.RunID] == nil {
							claimed[c.RunID] = map[string]int64{}
						}
						if _, dup := claimed[c.RunID][c.Step]; dup {
							t.Errorf("run %s step %s claimed twice", c.RunID, c.Step)
						}
						claimed[c.RunID][c.Step] = c.Token
					}
					mu.Unlock()
					if len(cs) == 0 {
						select {
						case <-done:
							return
						default:
						}
					}
				}
			})
		}
		close(start)
		fwg.Wait()
		close(done)
		wg.Wait()

		var outs []store.Outcome
		for _, r := range runs {
			ts, err := s.ListTasks(ctx, r.ID)
			require.NoError(t, err)
			for _, tk := range ts {
				switch tk.Name {
				case "bad":
					require.Equal(t, durabletype.TaskFailed, tk.State)
					continue
				case "go":
					require.Equal(t, durabletype.TaskCompleted, tk.State)
					continue
				}
				evs := stepEvents(t, s, r.ID, tk.Name)
				if token, ok := claimed[r.ID][tk.Name]; ok {
					require.Equal(t, durabletype.TaskRunning, tk.State, "claimed sibling %s of %s", tk.Name, r.ID)
					require.Equal(t, token, tk.Token)
					require.NotContains(t, evs, "CANCELLED")
					outs = append(outs, store.Outcome{Task: store.TaskRef{RunID: r.ID, Step: tk.Name, Token: token},
						Kind: store.OutcomeComplete})
				} else {
					require.Equal(t, durabletype.TaskCancelled, tk.State, "unclaimed sibling %s of %s", tk.Name, r.ID)
					require.Equal(t, []string{"QUEUED", "CANCELLED"}, evs)
				}
			}
		}
		res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: t0, Outcomes: outs})
		require.NoError(t, err)
		for _, r := range res {
			require.Equal(t, store.FinishApplied, r.Status)
		}
		for _, r := range runs {
			got, err := s.GetRun(ctx, r.ID)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunFailed, got.Status)
			require.True(t, got.Settled(), "run %s settles", r.ID)
		}
		cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: "w", Limit: 100, Workflows: []string{wf}})
		require.NoError(t, err)
		require.Empty(t, cs)
	}
}

// TestTenantCapConcurrent claims with a cap from many goroutines at once:
// no tenant ever has more RUNNING tasks than the cap.
func TestTenantCapConcurrent(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const capN = 3
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	var runs []store.NewRun
	for i := range 300 {
		runs = append(runs, newRun("wf", fmt.Sprintf("t%d", i%5), sh))
	}
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Now: t0, Runs: runs})))
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for range 5 {
				_, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: fmt.Sprintf("w%d", w), Limit: 4,
					Workflows: []string{"wf"}, TenantLimit: capN})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// Concurrent claimers skip tenants another claimer holds: fill the
	// remaining room sequentially, then every tenant is exactly at its cap.
	_, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: "last", Limit: 100,
		Workflows: []string{"wf"}, TenantLimit: capN})
	require.NoError(t, err)
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT tenant, count(*) FROM %q.tasks WHERE state = 'RUNNING' GROUP BY tenant`, schema))
	require.NoError(t, err)
	counts := map[string]int{}
	for rows.Next() {
		var ten string
		var n int
		require.NoError(t, rows.Scan(&ten, &n))
		counts[ten] = n
	}
	require.NoError(t, rows.Err())
	require.Len(t, counts, 5)
	for ten, n := range counts {
		require.Equal(t, capN, n, "tenant %s", ten)
	}
}
