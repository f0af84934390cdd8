package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/effectivelabs/durable/internal/core/sleep"
)

// latency triggers bench-chain runs (a → b) one at a time while the workers
// are idle and listening, waits for each to settle, and measures from the
// database's timestamps how long a trigger takes to start the first step
// (runs.created_at → a.started_at) and a completed parent to start its
// child (a.finished_at → b.started_at).
func (b *bencher) latency(ctx context.Context, rep *Report) error {
	n := b.o.Runs
	rep.Description = fmt.Sprintf("%s bench-chain runs (a → b), triggered one at a time, each waited for, %s apart",
		FormatNumber(float64(n), 0), b.o.Interval)
	w, err := b.watch(ctx)
	if err != nil {
		return err
	}
	defer w.close()
	f, err := b.startFleet(ctx, workerSpec{n: b.o.Workers, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w"})
	if err != nil {
		return err
	}
	defer f.stop()
	if err := f.waitListening(ctx); err != nil {
		return err
	}
	// Let the workers take their first look at the (empty) queue.
	if !sleep.For(ctx, 200*time.Millisecond) {
		return ctx.Err()
	}

	b.logf("triggering %d runs one at a time", n)
	client := make([]float64, 0, n)
	tenant := b.tenant("lat")
	deadline, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	var failure string
	for i := range n {
		t := time.Now()
		id, err := b.set.Chain.RunNoWait(deadline, b.client, tenant, i)
		if err == nil {
			err = w.waitRun(deadline, id)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if deadline.Err() != nil {
				failure = fmt.Sprintf("timed out after %s, at run %d of %d", b.o.Timeout, i+1, n)
				break
			}
			return err
		}
		client = append(client, Millis(time.Since(t)))
		if !sleep.For(deadline, b.o.Interval) && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	f.stop()

	rows, err := b.monitor.Query(ctx, `
SELECT r.created_at, r.finished_at, a.started_at, a.finished_at, c.started_at
FROM `+b.table("runs")+` r
JOIN `+b.table("tasks")+` a ON a.run_id = r.id AND a.name = 'a'
JOIN `+b.table("tasks")+` c ON c.run_id = r.id AND c.name = 'b'
WHERE r.tenant = $1 AND r.status = 'COMPLETED' AND c.state = 'COMPLETED'`, tenant)
	if err != nil {
		return fmt.Errorf("reading the runs: %w", err)
	}
	var toStart, handoff, settle []float64
	for rows.Next() {
		var created, finished, aStart, aEnd, bStart time.Time
		if err := rows.Scan(&created, &finished, &aStart, &aEnd, &bStart); err != nil {
			rows.Close()
			return fmt.Errorf("reading the runs: %w", err)
		}
		toStart = append(toStart, Millis(aStart.Sub(created)))
		handoff = append(handoff, Millis(bStart.Sub(aEnd)))
		settle = append(settle, Millis(finished.Sub(created)))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the runs: %w", err)
	}

	add := func(key, label string, s Summary, goal50, goal99 float64) {
		if goal50 > 0 {
			rep.AddGoal(key+"_p50_ms", label+" p50", s.P50, "ms", 2, AtMost(goal50))
		} else {
			rep.Add(key+"_p50_ms", label+" p50", s.P50, "ms", 2)
		}
		rep.Add(key+"_p95_ms", label+" p95", s.P95, "ms", 2)
		if goal99 > 0 {
			rep.AddGoal(key+"_p99_ms", label+" p99", s.P99, "ms", 2, AtMost(goal99))
		} else {
			rep.Add(key+"_p99_ms", label+" p99", s.P99, "ms", 2)
		}
		rep.Add(key+"_max_ms", label+" max", s.Max, "ms", 2)
	}
	add("trigger_to_start", "trigger → first step started", Summarize(toStart), 2, 10)
	add("parent_to_child", "parent completed → child started", Summarize(handoff), 2, 10)
	add("trigger_to_settled", "trigger → run settled (database)", Summarize(settle), 0, 0)
	add("client_trigger_to_result", "trigger → result seen by the client", Summarize(client), 0, 0)
	rep.Add("runs_completed", "runs measured", float64(len(toStart)), "runs", 0)
	rep.References = []Reference{hatchetLatency}
	rep.Note("database figures use PostgreSQL's transaction timestamps (now()): a run's created_at is when its insert transaction began")
	rep.Note("the client figure includes RunNoWait's round trips and the settle notification; Hatchet's is a one-task run, ours two chained steps")

	switch {
	case failure != "":
		rep.Verified, rep.Failure = false, failure
	case len(toStart) != n:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d of %d runs completed", len(toStart), n)
	}
	return nil
}
