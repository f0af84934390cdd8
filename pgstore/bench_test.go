package pgstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// Batch sizes of the benchmarks, as an engine would use them.
const (
	benchCreateBatch = 1000
	benchClaimBatch  = 100
	benchWorkers     = 4
)

func benchStore(b *testing.B) *pgstore.Store {
	b.Helper()
	_, _, s := benchSchema(b)
	return s
}

// createRuns creates n runs of a shape in batches, spread over tenants.
func createRuns(b *testing.B, s store.Store, n, batch, tenants int, sh *durabletype.Shape) {
	b.Helper()
	for done := 0; done < n; {
		k := min(batch, n-done)
		runs := make([]store.NewRun, k)
		for i := range runs {
			runs[i] = store.NewRun{ID: uuid.New(), Workflow: "wf", Tenant: fmt.Sprintf("t%d", (done+i)%tenants),
				Input: []byte(`{"n":1}`), Shape: sh}
		}
		if _, err := s.CreateRuns(ctx, &store.CreateRunsParams{Runs: runs}); err != nil {
			b.Fatal(err)
		}
		done += k
	}
}

// work runs workers that claim and complete tasks until total tasks have
// been completed.
func work(b *testing.B, s store.Store, workers, batch int, total int64) {
	b.Helper()
	workQueues(b, s, workers, batch, total, nil)
}

// workQueues is work by workers that claim the versions queues names
// (nil: every version).
func workQueues(b *testing.B, s store.Store, workers, batch int, total int64, queues []string) {
	b.Helper()
	var finished atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("w%d", w)
			idle := 0
			for finished.Load() < total {
				cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: id, Limit: batch, Workflows: []string{"wf"}, Queues: queues})
				if err != nil {
					b.Error(err)
					return
				}
				if len(cs) == 0 {
					// Another worker holds the last tasks; they enqueue more.
					idle++
					time.Sleep(time.Duration(min(idle, 10)) * 100 * time.Microsecond)
					continue
				}
				idle = 0
				outs := make([]store.Outcome, len(cs))
				for i, c := range cs {
					outs[i] = store.Outcome{Task: c.Ref(), Kind: store.OutcomeComplete, Output: []byte(`{"ok":true}`)}
				}
				if _, err := s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: outs}); err != nil {
					b.Error(err)
					return
				}
				finished.Add(int64(len(cs)))
			}
		})
	}
	wg.Wait()
}

// BenchmarkCreateClaimFinish: b.N one-step runs created in batches of 1000,
// then claimed and finished in batches of 100 by 4 concurrent workers.
// Reports creation, claim+finish and overall rates.
func BenchmarkCreateClaimFinish(b *testing.B) {
	s := benchStore(b)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "only", Retry: durabletype.RetryPolicy{MaxAttempts: 3, Factor: 2, InitialDelay: time.Second}}}}
	b.ResetTimer()
	start := time.Now()
	createRuns(b, s, b.N, benchCreateBatch, 10, sh)
	created := time.Now()
	work(b, s, benchWorkers, benchClaimBatch, int64(b.N))
	end := time.Now()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/created.Sub(start).Seconds(), "created/s")
	b.ReportMetric(float64(b.N)/end.Sub(created).Seconds(), "worked/s")
	b.ReportMetric(float64(b.N)/end.Sub(start).Seconds(), "tasks/s")
}

// BenchmarkClaimPastUnserved: b.N one-step runs of version "new" worked as
// in BenchmarkCreateClaimFinish by workers serving that version only,
// while the runs of version "old", which no worker serves, wait ready at
// the head of the queue (a deploy's old runs that no worker accepts): each
// claim passes over their rows.
func BenchmarkClaimPastUnserved(b *testing.B) {
	for _, stranded := range []int{0, 10_000, 50_000} {
		b.Run(fmt.Sprintf("unserved=%d", stranded), func(b *testing.B) {
			s := benchStore(b)
			step := durabletype.StepSpec{Name: "only", Retry: durabletype.RetryPolicy{MaxAttempts: 3, Factor: 2, InitialDelay: time.Second}}
			createRuns(b, s, stranded, benchCreateBatch, 10, &durabletype.Shape{Version: "old", Steps: []durabletype.StepSpec{step}})
			b.ResetTimer()
			createRuns(b, s, b.N, benchCreateBatch, 10, &durabletype.Shape{Version: "new", Steps: []durabletype.StepSpec{step}})
			created := time.Now()
			workQueues(b, s, benchWorkers, benchClaimBatch, int64(b.N), []string{"wf@new"})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(created).Seconds(), "worked/s")
		})
	}
}

// BenchmarkDAG: b.N tasks of runs shaped root -> 8 parallel steps -> join
// (10 steps), created in batches of 100 runs, claimed and finished in
// batches of 100 by 4 concurrent workers.
func BenchmarkDAG(b *testing.B) {
	s := benchStore(b)
	steps := []durabletype.StepSpec{{Name: "root", Retry: durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}}}
	var mids []string
	for i := range 8 {
		name := fmt.Sprintf("fan%d", i)
		mids = append(mids, name)
		steps = append(steps, durabletype.StepSpec{Name: name, Parents: []string{"root"}, Retry: durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}})
	}
	steps = append(steps, durabletype.StepSpec{Name: "join", Parents: mids, Retry: durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}})
	sh := &durabletype.Shape{Steps: steps}
	runs := max(b.N/len(steps), 1)
	total := int64(runs * len(steps))
	b.ResetTimer()
	start := time.Now()
	createRuns(b, s, runs, 100, 10, sh)
	created := time.Now()
	work(b, s, benchWorkers, benchClaimBatch, total)
	end := time.Now()
	b.StopTimer()
	b.ReportMetric(float64(runs)/created.Sub(start).Seconds(), "runs-created/s")
	b.ReportMetric(float64(total)/end.Sub(created).Seconds(), "worked/s")
	b.ReportMetric(float64(total)/end.Sub(start).Seconds(), "tasks/s")
}

// BenchmarkFireTimersDueTogether: 100,000 sleeps due at one instant (what
// one trigger of 100,000 runs with a sleeping root creates), fired by the
// leader's loop, 1,000 per call. Reports timers fired per second.
func BenchmarkFireTimersDueTogether(b *testing.B) {
	const timers = 100_000
	for range b.N {
		b.StopTimer()
		s := benchStore(b)
		sh := &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "nap", Sleep: time.Millisecond, Retry: durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}}}}
		t0 := time.Now().Truncate(time.Microsecond)
		for done := 0; done < timers; done += 5000 {
			runs := make([]store.NewRun, 5000)
			for i := range runs {
				runs[i] = store.NewRun{ID: uuid.New(), Workflow: "wf", Tenant: "t", Input: []byte(`1`), Shape: sh}
			}
			if _, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: t0, Runs: runs}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		fired := 0
		for fired < timers {
			res, err := s.FireTimers(ctx, &store.FireTimersParams{Limit: 1000})
			if err != nil {
				b.Fatal(err)
			}
			if res.Fired == 0 {
				b.Fatalf("fired %d of %d timers, then none", fired, timers)
			}
			fired += res.Fired
		}
		b.ReportMetric(float64(timers)/time.Since(start).Seconds(), "timers/s")
	}
}
