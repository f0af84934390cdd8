package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// mapStep runs the map scenario: one bench-map run of Runs items (list →
// items, a map step running a no-op per item → join), created first, then
// worked. From the database's timestamps it reports the items' throughput
// (first item claimed → last item completed), the fan-out (the map step
// claimed → its items queued, and → the first item claimed) and the join
// (last item completed → join started, → run settled), and checks that
// the run completed with exactly Runs items, all completed, and a join
// output of Runs.
//
// With Tenants above 1, Tenants-1 other tenants queue Runs bench-noop runs
// each after the map run, so that the items compete with them for the
// workers: the report then shows each tenant's share of the claims while
// every tenant still had work (from the first item claim to the first
// tenant's last completion), and Jain's index over them.
func (b *bencher) mapStep(ctx context.Context, rep *Report) error {
	n, others := b.o.Runs, b.o.Tenants-1
	rep.Description = fmt.Sprintf("one bench-map run of %s items (list → items, a no-op per item → join), created first, then worked",
		FormatNumber(float64(n), 0))
	if others > 0 {
		rep.Description += fmt.Sprintf("; %d other tenants queue %s bench-noop runs each, competing",
			others, FormatNumber(float64(n), 0))
	}
	w, err := b.watch(ctx)
	if err != nil {
		return err
	}
	defer w.close()

	id, err := b.set.Map.RunNoWait(ctx, b.client, b.tenant("map"), n)
	if err != nil {
		return fmt.Errorf("creating the map run: %w", err)
	}
	ids := map[uuid.UUID]struct{}{id: {}}
	b.logf("created the bench-map run %s (%d items)", id, n)
	if others > 0 {
		b.logf("inserting %d bench-noop runs for %d other tenants", others*n, others)
		more, _, err := b.insert(ctx, b.set.Noop, others*n, func(i int) string { return b.tenant(fmt.Sprintf("other%d", i%others)) })
		if err != nil {
			return err
		}
		maps.Copy(ids, more)
	}
	w.expect(ids)
	b.checkpoint(ctx)

	f, err := b.startFleet(ctx, workerSpec{n: b.o.Workers, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w"})
	if err != nil {
		return err
	}
	started := time.Now()
	wctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	settled, waitErr := w.waitAll(wctx, b.tenants(""))
	cancel()
	wall := time.Since(started)
	b.logf("%d of %d runs settled after %.2fs; stopping the workers", settled, len(ids), wall.Seconds())
	f.stop()
	if waitErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}

	m, err := b.mapFigures(ctx, id)
	if err != nil {
		return err
	}
	secs := m.lastDone.Sub(m.firstClaim).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(m.itemsDone) / secs
	}
	rep.Add("items_per_s", "items, first item claimed → last item completed", rate, "items/s", 0)
	rep.Add("items_window_s", "that window (database timestamps)", secs, "s", 3)
	rep.Add("fanout_queued_ms", "fan-out: map step claimed → its items queued", ms(m.mapClaim, m.queued), "ms", 1)
	rep.Add("fanout_first_claim_ms", "fan-out: map step claimed → first item claimed", ms(m.mapClaim, m.firstClaim), "ms", 1)
	rep.Add("join_start_ms", "join: last item completed → join started", ms(m.lastDone, m.joinStart), "ms", 1)
	rep.Add("join_settled_ms", "join: last item completed → run settled", ms(m.lastDone, m.settled), "ms", 1)
	rep.Add("run_s", "run: list claimed → run settled", m.settled.Sub(m.listClaim).Seconds(), "s", 3)
	rep.Add("wall_s", "wall: workers started → every run settled", wall.Seconds(), "s", 3)
	rep.Add("items", "item tasks", float64(m.items), "tasks", 0)
	rep.Add("items_completed", "item tasks completed", float64(m.itemsDone), "tasks", 0)
	rep.Add("item_attempts_max", "most attempts of an item", float64(m.maxAttempt), "attempts", 0)
	rep.Add("join_output", "join output (items it received)", float64(m.joinOut), "items", 0)

	var othersDone int
	if others > 0 {
		shares, jain, win, err := b.claimShares(ctx, m.firstClaim)
		if err != nil {
			return err
		}
		rep.Tables = append(rep.Tables, shares)
		rep.Add("jain_index", "Jain's index over the claims while every tenant had work", jain, "", 4)
		rep.Add("shares_window_s", "  that window: first item claimed → first tenant done", win, "s", 3)
		if err := b.monitor.QueryRow(ctx, `SELECT count(*) FROM `+b.table("runs")+
			` WHERE tenant LIKE $1 AND status = 'COMPLETED'`, b.tenants("other")).Scan(&othersDone); err != nil {
			return fmt.Errorf("reading the other tenants' runs: %w", err)
		}
		rep.Add("other_runs_completed", "other tenants' runs completed", float64(othersDone), "runs", 0)
		rep.Note("fair queuing orders each workflow's tasks by tenant (docs/fair-queuing.md): the other tenants share " +
			"bench-noop's queue, the items are alone in bench-map's")
	}
	rep.Note("every item completion is a transition of the one map run: its outcomes lock that run's row (one lock per batch of outcomes)")

	switch {
	case errors.Is(waitErr, context.DeadlineExceeded):
		rep.Verified = false
		rep.Failure = fmt.Sprintf("timed out after %s: %d of %d items completed, run %s", b.o.Timeout, m.itemsDone, n, m.status)
	case waitErr != nil:
		return waitErr
	case m.status != "COMPLETED" || m.items != n || m.itemsDone != n || m.joinOut != n:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("run %s with %d item tasks, %d completed, and a join output of %d (want COMPLETED, %d, %d, %d)",
			m.status, m.items, m.itemsDone, m.joinOut, n, n, n)
	case others > 0 && othersDone != others*n:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d of the other tenants' %d runs completed", othersDone, others*n)
	}
	return nil
}

// mapRun is what the database recorded about the map run.
type mapRun struct {
	status                          string
	items, itemsDone, maxAttempt    int
	joinOut                         int
	listClaim, mapClaim, queued     time.Time
	firstClaim, lastDone, joinStart time.Time
	settled                         time.Time
}

func (b *bencher) mapFigures(ctx context.Context, id uuid.UUID) (mapRun, error) {
	var m mapRun
	var settled, listClaim, mapClaim, joinStart pgtype.Timestamptz
	var out []byte
	err := b.monitor.QueryRow(ctx, `
SELECT r.status, r.finished_at, l.started_at, s.started_at, j.started_at, j.output
FROM `+b.table("runs")+` r
LEFT JOIN `+b.table("tasks")+` l ON l.run_id = r.id AND l.name = 'list'
LEFT JOIN `+b.table("tasks")+` s ON s.run_id = r.id AND s.name = 'items'
LEFT JOIN `+b.table("tasks")+` j ON j.run_id = r.id AND j.name = 'join' AND j.state = 'COMPLETED'
WHERE r.id = $1`, id).Scan(&m.status, &settled, &listClaim, &mapClaim, &joinStart, &out)
	if err != nil {
		return m, fmt.Errorf("reading the map run: %w", err)
	}
	m.settled, m.listClaim, m.mapClaim, m.joinStart = settled.Time, listClaim.Time, mapClaim.Time, joinStart.Time
	if len(out) > 0 {
		if err := json.Unmarshal(out, &m.joinOut); err != nil {
			return m, fmt.Errorf("decoding the join's output %q: %w", out, err)
		}
	}
	var queued, first, last pgtype.Timestamptz
	err = b.monitor.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE state = 'COMPLETED'), coalesce(max(attempt), 0),
       min(q_at), min(started_at), max(finished_at)
FROM `+b.table("tasks")+` WHERE run_id = $1 AND kind = 'item'`, id).Scan(&m.items, &m.itemsDone, &m.maxAttempt, &queued, &first, &last)
	if err != nil {
		return m, fmt.Errorf("reading the items: %w", err)
	}
	m.queued, m.firstClaim, m.lastDone = queued.Time, first.Time, last.Time
	return m, nil
}

// ms returns the milliseconds from a to b, 0 if either is unknown.
func ms(a, b time.Time) float64 {
	if a.IsZero() || b.IsZero() {
		return 0
	}
	return Millis(b.Sub(a))
}

// claimShares returns each tenant's claims from since (the first item
// claim) to the earliest of the tenants' last completions, while every
// tenant still had work, with Jain's index over them and that window's
// length in seconds.
func (b *bencher) claimShares(ctx context.Context, since time.Time) (Table, float64, float64, error) {
	var end pgtype.Timestamptz
	err := b.monitor.QueryRow(ctx, `
SELECT min(last) FROM (SELECT max(finished_at) AS last FROM `+b.table("tasks")+` WHERE tenant LIKE $1 GROUP BY tenant) x`,
		b.tenants("")).Scan(&end)
	if err != nil {
		return Table{}, 0, 0, fmt.Errorf("reading the tenants' claims: %w", err)
	}
	rows, err := b.monitor.Query(ctx, `
SELECT tenant, count(*) FROM `+b.table("tasks")+`
WHERE tenant LIKE $1 AND started_at >= $2 AND started_at <= $3 GROUP BY tenant ORDER BY tenant`,
		b.tenants(""), since, end.Time)
	if err != nil {
		return Table{}, 0, 0, fmt.Errorf("reading the tenants' claims: %w", err)
	}
	var names []string
	var counts []int
	for rows.Next() {
		var t string
		var c int
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return Table{}, 0, 0, err
		}
		names, counts = append(names, t[len(b.tag)+1:]), append(counts, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Table{}, 0, 0, err
	}
	t, jain := shareTable("CLAIMS WHILE EVERY TENANT HAD WORK (from the first item claim)", names, counts)
	return t, jain, end.Time.Sub(since).Seconds(), nil
}

// shareTable tabulates each name's count and share of the total (in
// percent, one decimal), and returns Jain's index over the counts.
func shareTable(title string, names []string, counts []int) (Table, float64) {
	t := Table{Title: title, Columns: []string{"tenant", "claims", "share %"}}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	xs := make([]float64, len(counts))
	for i, c := range counts {
		xs[i] = float64(c)
		share := 0.0
		if sum > 0 {
			share = 100 * float64(c) / float64(sum)
		}
		t.Rows = append(t.Rows, []any{names[i], c, float64(int(share*10+0.5)) / 10})
	}
	return t, Jain(xs)
}
