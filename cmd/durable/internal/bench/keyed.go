package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
)

// keyed runs the concurrency scenario: Runs one-step bench-keyed runs over
// Keys concurrency keys (run i has key i mod Keys), each key capped at one
// running step, inserted first, then worked. It reports the throughput as
// single does, and checks from the database's timestamps that no two steps
// of a key ever ran at once: each step of a key started at or after the
// previous one finished.
func (b *bencher) keyed(ctx context.Context, rep *Report) error {
	n, keys := b.o.Runs, b.o.Keys
	wf := b.set.Keyed
	rep.Description = fmt.Sprintf("%s one-step bench-keyed runs over %s concurrency keys (at most 1 running per key), inserted first, then worked",
		FormatNumber(float64(n), 0), FormatNumber(float64(keys), 0))
	tenants := b.o.Tenants
	w, err := b.watch(ctx)
	if err != nil {
		return err
	}
	defer w.close()

	b.logf("inserting %d %s runs over %d keys in batches of %d", n, wf.Name(), keys, b.o.InsertBatch)
	ids := make(map[uuid.UUID]struct{}, n)
	start := time.Now()
	for done := 0; done < n; {
		k := min(b.o.InsertBatch, n-done)
		trig := make([]durable.Trigger[int], k)
		for i := range trig {
			trig[i] = durable.Trigger[int]{Tenant: b.tenant(fmt.Sprintf("t%d", (done+i)%tenants)), Input: (done + i) % keys}
		}
		got, err := wf.RunManyNoWait(ctx, b.client, trig)
		if err != nil {
			return fmt.Errorf("inserting runs: %w", err)
		}
		for _, id := range got {
			ids[id] = struct{}{}
		}
		done += k
	}
	insertTime := time.Since(start)
	b.logf("inserted %d runs in %.2fs", n, insertTime.Seconds())
	w.expect(ids)
	b.checkpoint(ctx)

	f, err := b.startFleet(ctx, workerSpec{n: b.o.Workers, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w"})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	_, waitErr := w.waitAll(wctx, b.tenants(""))
	cancel()
	f.stop()
	if waitErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	win, err := b.window(ctx, b.tenants(""))
	if err != nil {
		return err
	}
	var overlaps, seenKeys int
	err = b.monitor.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE started_at < prev), count(DISTINCT ckey) FROM (
  SELECT ckey, started_at, lag(finished_at) OVER (PARTITION BY ckey ORDER BY started_at, finished_at) AS prev
  FROM `+b.table("tasks")+` WHERE tenant LIKE $1 AND ckey IS NOT NULL) x`, b.tenants("")).Scan(&overlaps, &seenKeys)
	if err != nil {
		return fmt.Errorf("checking the cap: %w", err)
	}
	secs := win.seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(win.runsDone) / secs
	}
	rep.Add("runs_per_s", "throughput, first claim → last completion", rate, "runs/s", 0)
	rep.Add("window_s", "window (database timestamps)", secs, "s", 3)
	rep.Add("insert_runs_per_s", "insert rate (RunManyNoWait, one inserter)", float64(n)/insertTime.Seconds(), "runs/s", 0)
	rep.Add("keys", "distinct concurrency keys", float64(seenKeys), "keys", 0)
	rep.Add("overlaps", "steps started before the previous step of their key finished", float64(overlaps), "steps", 0)
	rep.Add("runs_completed", "runs completed", float64(win.runsDone), "runs", 0)
	switch {
	case errors.Is(waitErr, context.DeadlineExceeded):
		rep.Verified = false
		rep.Failure = fmt.Sprintf("timed out after %s: %d of %d runs completed", b.o.Timeout, win.runsDone, n)
	case waitErr != nil:
		return waitErr
	case win.runsDone != n:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d of %d runs completed", win.runsDone, n)
	case overlaps != 0:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d steps ran while another step of their key ran (cap 1)", overlaps)
	}
	return nil
}
