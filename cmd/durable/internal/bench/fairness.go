package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// fairness measures two things, in one schema, in this order:
//
//  1. Skewed backlogs: Tenants tenants with TenantStep, 2×TenantStep, ...
//     queued runs, then worked by the configured workers. Over the window
//     in which every tenant is still backlogged (from the first claim to
//     the last completion of the smallest backlog) each tenant's
//     completions, and Jain's index over them.
//  2. Newcomer: tenant B queues Runs runs, then tenant A queues one; one
//     worker with concurrency 1 (so claim batch 1) starts. A's claim
//     position (1 + the claims before it) and its wait.
//
// The backlogs run first because they drain completely, while the newcomer
// part stops as soon as A's run is done (B's backlog is left queued).
func (b *bencher) fairness(ctx context.Context, rep *Report) error {
	T, step := b.o.Tenants, b.o.TenantStep
	total := step * T * (T + 1) / 2
	rep.Description = fmt.Sprintf("(1) %d tenants with backlogs of %d, %d, ... %d runs, worked together; "+
		"(2) tenant B queues %s runs, then tenant A one; one worker, concurrency 1",
		T, step, 2*step, T*step, FormatNumber(float64(b.o.Runs), 0))
	w, err := b.watch(ctx)
	if err != nil {
		return err
	}
	defer w.close()

	// (1) Skewed backlogs.
	names := make([]string, T)
	var tenantOf []string
	for i := range T {
		names[i] = fmt.Sprintf("f%03d", i+1)
		for range (i + 1) * step {
			tenantOf = append(tenantOf, b.tenant(names[i]))
		}
	}
	b.logf("inserting %d runs for %d tenants", total, T)
	ids, _, err := b.insert(ctx, b.set.Noop, total, func(i int) string { return tenantOf[i] })
	if err != nil {
		return err
	}
	w.expect(ids)
	f, err := b.startFleet(ctx, workerSpec{n: b.o.Workers, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w"})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	settled, waitErr := w.waitAll(wctx, b.tenants("f"))
	cancel()
	f.stop()
	if waitErr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(waitErr, context.DeadlineExceeded) {
			return waitErr
		}
		rep.Verified = false
		rep.Failure = fmt.Sprintf("backlogs: timed out after %s with %d of %d runs settled", b.o.Timeout, settled, total)
		return nil
	}
	counts, secs, err := b.backlogWindow(ctx, names)
	if err != nil {
		return err
	}
	xs := make([]float64, T)
	table := Table{Title: "COMPLETIONS WHILE EVERY TENANT WAS BACKLOGGED", Columns: []string{"tenant", "backlog", "completed", "share %"}}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	for i, c := range counts {
		xs[i] = float64(c)
		share := 0.0
		if sum > 0 {
			share = 100 * float64(c) / float64(sum)
		}
		table.Rows = append(table.Rows, []any{names[i], (i + 1) * step, c, float64(int(share*10+0.5)) / 10})
	}
	rep.Tables = append(rep.Tables, table)

	// (2) Newcomer behind a backlog.
	b.logf("inserting %d runs for tenant B, then 1 for tenant A", b.o.Runs)
	if _, _, err := b.insert(ctx, b.set.Noop, b.o.Runs, func(int) string { return b.tenant("new-B") }); err != nil {
		return err
	}
	aID, err := b.set.Noop.RunNoWait(ctx, b.client, b.tenant("new-A"), 0)
	if err != nil {
		return err
	}
	f, err = b.startFleet(ctx, workerSpec{n: 1, concurrency: 1, claimBatch: 1, name: "solo"})
	if err != nil {
		return err
	}
	wctx, cancel = context.WithTimeout(ctx, b.o.Timeout)
	waitErr = w.waitRun(wctx, aID)
	cancel()
	f.stop()
	if waitErr != nil {
		if ctx.Err() != nil || !errors.Is(waitErr, context.DeadlineExceeded) {
			return errors.Join(waitErr, ctx.Err())
		}
		rep.Verified = false
		rep.Failure = fmt.Sprintf("newcomer: tenant A's run did not complete within %s", b.o.Timeout)
		return nil
	}
	pos, wait, afterFirst, err := b.newcomer(ctx, aID)
	if err != nil {
		return err
	}

	rep.AddGoal("newcomer_claim_position", "tenant A's claim position (1 = first)", float64(pos), "claims", 0, AtMost(2))
	rep.Add("newcomer_wait_ms", "tenant A's wait, created → started", wait, "ms", 2)
	rep.Add("newcomer_wait_after_first_claim_ms", "tenant A's wait after the first claim", afterFirst, "ms", 2)
	rep.AddGoal("jain_index", "Jain's index over completions while backlogged", Jain(xs), "", 4, AtLeast(0.99))
	rep.Add("window_completions", "completions in that window", float64(sum), "tasks", 0)
	rep.Add("window_s", "that window", secs, "s", 3)
	rep.Add("runs_completed", "backlog runs completed", float64(settled), "runs", 0)
	rep.Note("the newcomer's wait includes the worker's start: A and B were queued before it started")
	rep.Note("the newcomer part stops once A's run is done: the rest of B's backlog stays queued")
	return nil
}

// backlogWindow returns, for each backlog tenant, its completions up to the
// last completion of the smallest backlog (names[0]), and that window's
// length from the first claim.
func (b *bencher) backlogWindow(ctx context.Context, names []string) ([]int, float64, error) {
	var first, end pgtype.Timestamptz
	err := b.monitor.QueryRow(ctx, `
SELECT (SELECT min(started_at) FROM `+b.table("tasks")+` WHERE tenant LIKE $1),
       (SELECT max(finished_at) FROM `+b.table("tasks")+` WHERE tenant = $2)`,
		b.tenants("f"), b.tenant(names[0])).Scan(&first, &end)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the backlogs: %w", err)
	}
	rows, err := b.monitor.Query(ctx, `
SELECT tenant, count(*) FROM `+b.table("tasks")+`
WHERE tenant LIKE $1 AND state = 'COMPLETED' AND finished_at <= $2 GROUP BY tenant`, b.tenants("f"), end)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the backlogs: %w", err)
	}
	byTenant := map[string]int{}
	for rows.Next() {
		var t string
		var n int
		if err := rows.Scan(&t, &n); err != nil {
			rows.Close()
			return nil, 0, err
		}
		byTenant[t] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	counts := make([]int, len(names))
	for i, n := range names {
		counts[i] = byTenant[b.tenant(n)]
	}
	return counts, end.Time.Sub(first.Time).Seconds(), nil
}

// newcomer returns tenant A's claim position among the newcomer part's
// claims, its wait from creation and its wait from the part's first claim.
func (b *bencher) newcomer(ctx context.Context, aID uuid.UUID) (pos int, wait, afterFirst float64, err error) {
	var created, started, first time.Time
	err = b.monitor.QueryRow(ctx, `
SELECT r.created_at, t.started_at,
       (SELECT min(started_at) FROM `+b.table("tasks")+` WHERE tenant LIKE $2),
       1 + (SELECT count(*) FROM `+b.table("tasks")+` WHERE tenant LIKE $2 AND started_at < t.started_at)
FROM `+b.table("runs")+` r JOIN `+b.table("tasks")+` t ON t.run_id = r.id
WHERE r.id = $1`, aID, b.tenants("new-")).Scan(&created, &started, &first, &pos)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("reading tenant A's run: %w", err)
	}
	return pos, Millis(started.Sub(created)), Millis(started.Sub(first)), nil
}
