package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/effectivelabs/durable"
)

// cron runs the cron scenario: Runs schedules of bench-noop (10,000), each
// firing every minute ("* * * * *"), created through the engine, then
// workers (whose leader fires the slots) for Duration (150s: two or three
// minute boundaries). Each boundary fires every schedule's slot at once.
// It reports, from the database's timestamps, how fast the leader fired a
// boundary's slots (slots/s from the boundary to the last run created),
// the fire lag of each slot (its run's creation time after the slot time,
// p50/p99/max), and checks that every schedule fired exactly once at each
// boundary that passed after the schedules were created, none twice.
func (b *bencher) cron(ctx context.Context, rep *Report) error {
	n := b.o.Runs
	rep.Description = fmt.Sprintf("%s schedules of bench-noop firing every minute, worked for %s: each minute boundary fires every schedule once",
		FormatNumber(float64(n), 0), b.o.Duration)
	if err := b.client.Register(b.set.Noop); err != nil {
		return err
	}
	b.logf("creating %d schedules", n)
	start := time.Now()
	for i := range n {
		tenant := b.tenant(fmt.Sprintf("t%d", i%b.o.Tenants))
		if _, err := b.set.Noop.Schedule(ctx, b.client, tenant, fmt.Sprintf("s%d", i), i, "* * * * *", durable.ScheduleOptions{}); err != nil {
			return fmt.Errorf("creating schedule %d: %w", i, err)
		}
	}
	created := time.Since(start)
	var since time.Time // the database's clock once every schedule exists
	if err := b.monitor.QueryRow(ctx, `SELECT now()`).Scan(&since); err != nil {
		return err
	}
	b.logf("created %d schedules in %.2fs", n, created.Seconds())

	f, err := b.startFleet(ctx, workerSpec{n: b.o.Workers, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w"})
	if err != nil {
		return err
	}
	select {
	case <-time.After(b.o.Duration):
	case <-ctx.Done():
	}
	f.stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Runs by slot (the minute of their creation: a slot's run is created
	// at or after its boundary, well within the minute).
	rows, err := b.monitor.Query(ctx, `
SELECT date_trunc('minute', created_at) AS slot, count(*), count(DISTINCT id),
       extract(epoch FROM max(created_at) - date_trunc('minute', created_at))
FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND created_at >= date_trunc('minute', $2::timestamptz) + interval '1 minute'
GROUP BY 1 ORDER BY 1`, b.tenants(""), since)
	if err != nil {
		return fmt.Errorf("reading the fired runs: %w", err)
	}
	var slots, fired int
	var bad []string
	var burst []float64
	for rows.Next() {
		var slot time.Time
		var runs, distinct int
		var last float64
		if err := rows.Scan(&slot, &runs, &distinct, &last); err != nil {
			rows.Close()
			return err
		}
		slots++
		fired += runs
		if runs != n || distinct != n {
			bad = append(bad, fmt.Sprintf("%s: %d runs", slot.Format(time.TimeOnly), runs))
		}
		if last > 0 {
			burst = append(burst, float64(runs)/last)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var p50, p99, pmax float64
	var completed int
	err = b.monitor.QueryRow(ctx, `
SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), 0), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY lag), 0),
       coalesce(max(lag), 0), count(*) FILTER (WHERE status = 'COMPLETED')
FROM (SELECT extract(epoch FROM created_at - date_trunc('minute', created_at)) * 1000 AS lag, status
      FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND created_at >= date_trunc('minute', $2::timestamptz) + interval '1 minute') x`,
		b.tenants(""), since).Scan(&p50, &p99, &pmax, &completed)
	if err != nil {
		return fmt.Errorf("reading the fire lag: %w", err)
	}
	rate := 0.0
	for _, r := range burst {
		rate += r / float64(len(burst))
	}
	rep.Add("schedules", "schedules", float64(n), "schedules", 0)
	rep.Add("create_per_s", "schedules created per second (one at a time, through the engine)", float64(n)/created.Seconds(), "schedules/s", 0)
	rep.Add("boundaries", "minute boundaries fired", float64(slots), "boundaries", 0)
	rep.Add("slots_fired", "slots fired (runs created)", float64(fired), "slots", 0)
	rep.Add("fire_rate", "slots fired per second at a boundary (mean over boundaries)", rate, "slots/s", 0)
	rep.Add("lag_p50_ms", "fire lag p50 (run created after its slot time)", p50, "ms", 1)
	rep.Add("lag_p99_ms", "fire lag p99", p99, "ms", 1)
	rep.Add("lag_max_ms", "fire lag max", pmax, "ms", 1)
	rep.Add("runs_completed", "fired runs completed", float64(completed), "runs", 0)
	switch {
	case slots == 0:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("no minute boundary passed within %s", b.o.Duration)
	case len(bad) > 0:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("boundaries without exactly one run per schedule (%d each): %v", n, bad)
	}
	return nil
}
