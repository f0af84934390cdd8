package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
)

// children runs the children scenario: Runs bench-parent runs, each of
// whose workloads.ParentChildren child steps starts a bench-child run (one
// no-op step) and waits for it, then a join; inserted first, then worked.
// From the database's timestamps it reports parent and child runs per
// second (first claim → last parent settled), how long a child step takes
// to start its child (the step claimed → the child run created), how long
// a settled child takes to complete its parent's step (the child settled →
// the step completed), p50/p99/max each, and checks that every parent and
// child completed and that every child step started exactly one child.
func (b *bencher) children(ctx context.Context, rep *Report) error {
	n, per, tenants := b.o.Runs, workloads.ParentChildren, b.o.Tenants
	rep.Description = fmt.Sprintf("%s bench-parent runs (%d child steps, each starting a one-step bench-child run, → join: %s child runs) "+
		"inserted first, then worked", FormatNumber(float64(n), 0), per, FormatNumber(float64(n*per), 0))
	w, err := b.watch(ctx)
	if err != nil {
		return err
	}
	defer w.close()

	b.logf("inserting %d %s runs in batches of %d", n, b.set.Parent.Name(), b.o.InsertBatch)
	ids, insertTime, err := b.insert(ctx, b.set.Parent, n, func(i int) string { return b.tenant(fmt.Sprintf("t%d", i%tenants)) })
	if err != nil {
		return err
	}
	b.logf("inserted %d runs in %.2fs", n, insertTime.Seconds())
	w.expect(ids)
	b.checkpoint(ctx)

	f, err := b.startFleet(ctx, workerSpec{n: b.o.Workers, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w"})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	settled, waitErr := w.waitAll(wctx, b.tenants(""))
	cancel()
	b.logf("%d of %d parent runs settled; stopping the workers", settled, n)
	f.stop()
	if waitErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}

	var first, last pgtype.Timestamptz
	var parentsDone, kids, kidsDone, steps, dups int
	err = b.monitor.QueryRow(ctx, `
SELECT (SELECT min(started_at) FROM `+b.table("tasks")+` WHERE tenant LIKE $1),
       (SELECT max(finished_at) FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND parent_id IS NULL),
       (SELECT count(*) FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND parent_id IS NULL AND status = 'COMPLETED'),
       (SELECT count(*) FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND parent_id IS NOT NULL),
       (SELECT count(*) FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND parent_id IS NOT NULL AND status = 'COMPLETED'),
       count(*), count(*) FILTER (WHERE k > 1)
FROM (SELECT count(*) AS k FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND parent_id IS NOT NULL
      GROUP BY parent_id, parent_step) x`, b.tenants("")).Scan(&first, &last, &parentsDone, &kids, &kidsDone, &steps, &dups)
	if err != nil {
		return fmt.Errorf("reading the runs: %w", err)
	}
	rows, err := b.monitor.Query(ctx, `
SELECT extract(epoch FROM c.created_at - t.started_at) * 1000, extract(epoch FROM t.finished_at - c.finished_at) * 1000,
       extract(epoch FROM c.finished_at - c.created_at) * 1000
FROM `+b.table("runs")+` c JOIN `+b.table("tasks")+` t ON t.run_id = c.parent_id AND t.name = c.parent_step
WHERE c.tenant LIKE $1 AND c.parent_id IS NOT NULL AND c.finished_at IS NOT NULL AND t.state = 'COMPLETED'`, b.tenants(""))
	if err != nil {
		return fmt.Errorf("reading the child steps: %w", err)
	}
	var start, back, life []float64
	for rows.Next() {
		var s, k, l float64
		if err := rows.Scan(&s, &k, &l); err != nil {
			rows.Close()
			return fmt.Errorf("reading the child steps: %w", err)
		}
		start, back, life = append(start, s), append(back, k), append(life, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the child steps: %w", err)
	}

	secs := last.Time.Sub(first.Time).Seconds()
	rate := func(k int) float64 {
		if secs <= 0 || !first.Valid || !last.Valid {
			return 0
		}
		return float64(k) / secs
	}
	rep.Add("parents_per_s", "parent runs, first claim → last parent settled", rate(parentsDone), "runs/s", 0)
	rep.Add("children_per_s", "  child runs in that window", rate(kidsDone), "runs/s", 0)
	rep.Add("window_s", "window (database timestamps)", secs, "s", 3)
	addSummary(rep, "child_start", "child step claimed → child run created", Summarize(start))
	addSummary(rep, "child_to_parent", "child run settled → parent step completed", Summarize(back))
	addSummary(rep, "child_run", "child run created → settled", Summarize(life))
	rep.Add("insert_runs_per_s", "insert rate of the parents (RunManyNoWait, one inserter)", float64(n)/insertTime.Seconds(), "runs/s", 0)
	rep.Add("runs_completed", "parent runs completed", float64(parentsDone), "runs", 0)
	rep.Add("children_completed", "child runs completed", float64(kidsDone), "runs", 0)
	rep.Add("children", "child runs", float64(kids), "runs", 0)
	rep.Add("child_steps_duplicated", "child steps that started more than one child", float64(dups), "steps", 0)
	rep.Note("a child step's child run is created by the transition recording the step's outcome; a settled child's " +
		"transition leaves a message for its parent, applied in a transaction of its own right after it commits")

	switch {
	case errors.Is(waitErr, context.DeadlineExceeded):
		rep.Verified = false
		rep.Failure = fmt.Sprintf("timed out after %s: %d of %d parent runs and %d of %d child runs completed",
			b.o.Timeout, parentsDone, n, kidsDone, n*per)
	case waitErr != nil:
		return waitErr
	case parentsDone != n || kids != n*per || kidsDone != n*per:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d of %d parent runs completed; %d child runs (want %d), %d completed",
			parentsDone, n, kids, n*per, kidsDone)
	case steps != n*per || dups != 0:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d child steps started children (want %d), %d of them more than one", steps, n*per, dups)
	}
	return nil
}

// addSummary adds the p50, p99 and maximum of a latency in milliseconds,
// keyed <key>_p50_ms, <key>_p99_ms and <key>_max_ms.
func addSummary(rep *Report, key, label string, s Summary) {
	rep.Add(key+"_p50_ms", label+" p50", s.P50, "ms", 2)
	rep.Add(key+"_p99_ms", label+" p99", s.P99, "ms", 2)
	rep.Add(key+"_max_ms", label+" max", s.Max, "ms", 2)
}
