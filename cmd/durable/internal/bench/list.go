package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// The list scenario's own workflows, served by its in-process workers.
const (
	ListFail  = "bench-list-fail"
	ListSleep = "bench-list-sleep"
)

// listPageSize is the page size timed; listWalkSize the page size of the
// walk that finds the deep cursors (the engine's largest).
const (
	listPageSize = 50
	listWalkSize = 1000
	listWarmup   = 10
)

var errListFail = errors.New("bench: this run fails on purpose")

// listWorkflows defines the list scenario's workflows: one whose only step
// fails for good, and one that sleeps for a day, whose runs stay RUNNING.
func listWorkflows() (fail, sleep *durable.Workflow[int]) {
	fail = durable.NewWorkflow[int](ListFail)
	durable.Step(fail, "fail", func(durable.Context, int) (struct{}, error) {
		return struct{}{}, durable.Terminal(errListFail)
	})
	sleep = durable.NewWorkflow[int](ListSleep)
	durable.Sleep(sleep, "nap", 24*time.Hour)
	return fail, sleep
}

// listMix is how list's runs divide: 1% fail, up to 300 (1%) stay in
// flight, the rest complete.
type listMix struct {
	total, failed, running int
}

func newListMix(n int) listMix {
	return listMix{total: n, failed: max(n/100, 1), running: min(300, max(n/100, 1))}
}

func (m listMix) completed() int { return m.total - m.failed - m.running }

// share returns how many of k runs spread evenly over total fall in the
// runs [lo, hi).
func share(k, total, lo, hi int) int { return k*hi/total - k*lo/total }

// listKind is one kind of page list times.
type listKind struct {
	key, label string
	opts       durable.ListOptions
	// where selects the matching runs in SQL (for their count), with args.
	where string
	args  []any
	check func(durabletype.RunSummary) bool
	goal  bool

	times []float64
	page  *durable.RunPage
	match int
}

// list creates settled runs through the engine (one-step runs, 1% failing,
// a few hundred kept in flight by a day-long sleep) over many tenants, then
// times ListRuns pages: the first, one half-way down, and the first pages of
// filtered listings.
func (b *bencher) list(ctx context.Context, rep *Report) error {
	mix := newListMix(b.o.Runs)
	if mix.completed() < 1 {
		return fmt.Errorf("%w: list needs at least 100 runs", ErrInvalidOptions)
	}
	rep.Description = fmt.Sprintf("%s runs (%s completed, %s failed, %s in flight) over %d tenants, then ListRuns pages of %d, each timed %d times",
		FormatNumber(float64(mix.total), 0), FormatNumber(float64(mix.completed()), 0), FormatNumber(float64(mix.failed), 0),
		FormatNumber(float64(mix.running), 0), b.o.Tenants, listPageSize, b.o.Repeat)
	noop := b.set.Noop
	fail, sleep := listWorkflows()

	mode, av, err := b.vacuumMode(ctx, rep)
	if err != nil {
		return err
	}
	w, err := b.watch(ctx)
	if err != nil {
		return err
	}
	defer w.close()
	load := loadAvg()
	f, err := b.startFleet(ctx, workerSpec{n: b.o.Workers, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w",
		extra: func() []durable.Definition { f, s := listWorkflows(); return []durable.Definition{f, s} }})
	if err != nil {
		return err
	}
	defer f.stop()

	// Insert while the workers work: batches of InsertBatch runs, each
	// with its share of failing and sleeping runs.
	b.logf("creating %d runs in batches of %d while %d worker(s) work them (vacuum: %s)", mix.total, b.o.InsertBatch, b.o.Workers, mode)
	var vac *vacuumer
	vctx, stopVac := context.WithCancel(ctx)
	defer stopVac()
	var vdone chan struct{}
	if mode == VacuumBench {
		if vac, err = b.startVacuumer(ctx, av, time.Now()); err != nil {
			return err
		}
		defer vac.close()
		vdone = make(chan struct{})
		go func() { defer close(vdone); vac.run(vctx) }()
	}
	tenantOf := func(i int) string { return b.tenant(fmt.Sprintf("t%03d", i%b.o.Tenants)) }
	settle := make(map[uuid.UUID]struct{}, mix.total-mix.running)
	start := time.Now()
	last := start
	// Each workflow's runs go round the tenants, so that every tenant has
	// its share of each kind.
	var next [3]int
	for lo := 0; lo < mix.total; {
		hi := min(lo+b.o.InsertBatch, mix.total)
		nf, ns := share(mix.failed, mix.total, lo, hi), share(mix.running, mix.total, lo, hi)
		i := lo
		for p, part := range []struct {
			wf     *durable.Workflow[int]
			n      int
			settle bool
		}{{noop, hi - lo - nf - ns, true}, {fail, nf, true}, {sleep, ns, false}} {
			if part.n == 0 {
				continue
			}
			trig := make([]durable.Trigger[int], part.n)
			for j := range trig {
				trig[j] = durable.Trigger[int]{Tenant: tenantOf(next[p]), Input: i}
				next[p]++
				i++
			}
			ids, err := part.wf.RunManyNoWait(ctx, b.client, trig)
			if err != nil {
				return fmt.Errorf("inserting runs: %w", err)
			}
			if part.settle {
				for _, id := range ids {
					settle[id] = struct{}{}
				}
			}
		}
		lo = hi
		if time.Since(last) > 5*time.Second {
			b.logf("inserted %d of %d runs", lo, mix.total)
			last = time.Now()
		}
	}
	insertTime := time.Since(start)
	b.logf("inserted %d runs in %.1fs (%.0f runs/s); waiting for %d to settle", mix.total, insertTime.Seconds(),
		float64(mix.total)/insertTime.Seconds(), len(settle))
	w.expect(settle)
	wctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	settled, waitErr := w.waitAll(wctx, b.tenants(""))
	cancel()
	setupTime := time.Since(start)
	f.stop()
	stopVac()
	var vacTable *Table
	if vdone != nil {
		<-vdone
		t := vac.summary()
		t.Title += ", DURING THE SETUP"
		vacTable = &t
	}
	rep.Note("load average (1 min) at the start %s, when the runs had settled %s: the machine is shared", load, loadAvg())
	if waitErr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(waitErr, context.DeadlineExceeded) {
			return waitErr
		}
		rep.Verified = false
		rep.Failure = fmt.Sprintf("timed out after %s: %d of %d runs settled", b.o.Timeout, settled, len(settle))
		rep.Add("setup_s", "setup: runs created and settled (incomplete)", setupTime.Seconds(), "s", 1)
		return nil
	}
	b.logf("%d runs settled after %.1fs (%.0f runs/s)", settled, setupTime.Seconds(), float64(mix.total)/setupTime.Seconds())

	var counts [3]int
	if err := b.monitor.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'COMPLETED'), count(*) FILTER (WHERE status = 'FAILED'),
       count(*) FILTER (WHERE status = 'RUNNING' AND finished_at IS NULL)
FROM `+b.table("runs")+` WHERE tenant LIKE $1`, b.tenants("")).Scan(&counts[0], &counts[1], &counts[2]); err != nil {
		return fmt.Errorf("counting the runs: %w", err)
	}
	if counts != [3]int{mix.completed(), mix.failed, mix.running} {
		rep.Verified = false
		rep.Failure = fmt.Sprintf("runs completed, failed, in flight: %d, %d, %d; want %d, %d, %d",
			counts[0], counts[1], counts[2], mix.completed(), mix.failed, mix.running)
	}

	// Leave the table as autovacuum would once the inserts stop (this
	// server may have it off): vacuumed, with fresh statistics.
	vstart := time.Now()
	if _, err := b.monitor.Exec(ctx, "VACUUM (ANALYZE) "+b.table("runs")); err != nil {
		return fmt.Errorf("vacuuming the runs: %w", err)
	}
	vacuumTime := time.Since(vstart)
	b.logf("VACUUM (ANALYZE) runs: %.1fs", vacuumTime.Seconds())
	b.checkpoint(ctx)

	// Walk half-way down, newest first, in pages of 1,000: the deep cursor,
	// and the creation times a quarter and half-way down for a range.
	var walkTimes []float64
	walk := func(f durable.RunFilter, depth int, at func(pos int, r durabletype.RunSummary)) (string, int, error) {
		cursor, pos := "", 0
		for pos < depth {
			t := time.Now()
			page, err := b.client.ListRuns(ctx, durable.ListOptions{RunFilter: f, Limit: min(listWalkSize, depth-pos), Cursor: cursor})
			if err != nil {
				return "", pos, fmt.Errorf("walking the list: %w", err)
			}
			walkTimes = append(walkTimes, Millis(time.Since(t)))
			for _, r := range page.Runs {
				if at != nil {
					at(pos, r)
				}
				pos++
			}
			cursor = page.Next
			if cursor == "" {
				break
			}
		}
		return cursor, pos, nil
	}
	var quarter, half time.Time
	wstart := time.Now()
	deep, deepPos, err := walk(durable.RunFilter{}, mix.total/2, func(pos int, r durabletype.RunSummary) {
		if pos == mix.total/4 {
			quarter = r.CreatedAt
		}
		half = r.CreatedAt
	})
	if err != nil {
		return err
	}
	walkTime := time.Since(wstart)
	walkPages := len(walkTimes)
	b.logf("walked %d runs in %d pages of %d in %.2fs", deepPos, walkPages, listWalkSize, walkTime.Seconds())
	tenant := tenantOf(42 % b.o.Tenants)
	var tenantRuns int
	if err := b.monitor.QueryRow(ctx, `SELECT count(*) FROM `+b.table("runs")+` WHERE tenant = $1`, tenant).Scan(&tenantRuns); err != nil {
		return fmt.Errorf("counting the runs of %s: %w", tenant, err)
	}
	tdeep, tdeepPos, err := walk(durable.RunFilter{Tenant: tenant}, tenantRuns/2, nil)
	if err != nil {
		return err
	}

	failed := []durabletype.RunStatus{durabletype.RunFailed}
	kinds := []*listKind{
		{key: "first", label: "first page", goal: true,
			check: func(durabletype.RunSummary) bool { return true }},
		{key: "deep", label: fmt.Sprintf("deep page (cursor %s runs down)", FormatNumber(float64(deepPos), 0)), goal: true,
			opts:  durable.ListOptions{Cursor: deep},
			where: "true", check: func(durabletype.RunSummary) bool { return true }},
		{key: "tenant", label: "tenant, first page",
			opts:  durable.ListOptions{RunFilter: durable.RunFilter{Tenant: tenant}},
			where: "tenant = $2", args: []any{tenant},
			check: func(r durabletype.RunSummary) bool { return r.Tenant == tenant }},
		{key: "tenant_deep", label: fmt.Sprintf("tenant, deep page (cursor %s runs down)", FormatNumber(float64(tdeepPos), 0)),
			opts:  durable.ListOptions{RunFilter: durable.RunFilter{Tenant: tenant}, Cursor: tdeep},
			where: "tenant = $2", args: []any{tenant},
			check: func(r durabletype.RunSummary) bool { return r.Tenant == tenant }},
		{key: "failed", label: "status FAILED, first page",
			opts:  durable.ListOptions{RunFilter: durable.RunFilter{Statuses: failed}},
			where: "status = 'FAILED'",
			check: func(r durabletype.RunSummary) bool { return r.Status == durabletype.RunFailed }},
		{key: "running", label: "status RUNNING, first page",
			opts:  durable.ListOptions{RunFilter: durable.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunRunning}}},
			where: "status = 'RUNNING'",
			check: func(r durabletype.RunSummary) bool { return r.Status == durabletype.RunRunning }},
		{key: "created_range", label: "created in a range (¼ to ½ down), first page",
			opts:  durable.ListOptions{RunFilter: durable.RunFilter{CreatedAfter: half, CreatedBefore: quarter}},
			where: "created_at >= $2 AND created_at < $3", args: []any{half, quarter},
			check: func(r durabletype.RunSummary) bool { return !r.CreatedAt.Before(half) && r.CreatedAt.Before(quarter) }},
		{key: "tenant_failed", label: "tenant and status FAILED, first page",
			opts:  durable.ListOptions{RunFilter: durable.RunFilter{Tenant: tenant, Statuses: failed}},
			where: "tenant = $2 AND status = 'FAILED'", args: []any{tenant},
			check: func(r durabletype.RunSummary) bool { return r.Tenant == tenant && r.Status == durabletype.RunFailed }},
		{key: "tenant_running", label: "tenant and status RUNNING, first page",
			opts:  durable.ListOptions{RunFilter: durable.RunFilter{Tenant: tenant, Statuses: []durabletype.RunStatus{durabletype.RunRunning}}},
			where: "tenant = $2 AND status = 'RUNNING'", args: []any{tenant},
			check: func(r durabletype.RunSummary) bool { return r.Tenant == tenant && r.Status == durabletype.RunRunning }},
		{key: "workflow", label: "workflow " + ListFail + ", first page",
			opts:  durable.ListOptions{RunFilter: durable.RunFilter{Workflow: ListFail}},
			where: "workflow = $2", args: []any{ListFail},
			check: func(r durabletype.RunSummary) bool { return r.Workflow == ListFail }},
	}
	for _, k := range kinds {
		k.opts.Limit = listPageSize
		if k.where == "" {
			k.where = "true"
		}
		if err := b.monitor.QueryRow(ctx, `SELECT count(*) FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND `+k.where,
			append([]any{b.tenants("")}, k.args...)...).Scan(&k.match); err != nil {
			return fmt.Errorf("counting the runs of %s: %w", k.key, err)
		}
	}
	kinds[1].match = max(mix.total-deepPos, 0)
	kinds[3].match = max(kinds[3].match-tdeepPos, 0)

	// Time them round-robin, so that noise spreads evenly, after a few
	// untimed rounds (the pool's connections prepare the statements).
	b.logf("timing %d kinds of page and Stats, %d times each", len(kinds), b.o.Repeat)
	var statsTimes []float64
	var stats *durabletype.Stats
	for round := range listWarmup + b.o.Repeat {
		t := time.Now()
		st, err := b.client.Stats(ctx, durable.StatsOptions{Window: 24 * time.Hour})
		if err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		if round >= listWarmup {
			statsTimes = append(statsTimes, Millis(time.Since(t)))
		}
		stats = st
		for _, k := range kinds {
			t := time.Now()
			page, err := b.client.ListRuns(ctx, k.opts)
			d := time.Since(t)
			if err != nil {
				return fmt.Errorf("listing %s: %w", k.key, err)
			}
			if round >= listWarmup {
				k.times = append(k.times, Millis(d))
			}
			k.page = page
		}
	}

	var problems []string
	var settledRuns, inFlight int
	for _, c := range stats.Runs {
		if c.Settled {
			settledRuns += c.Count
		} else {
			inFlight += c.Count
		}
	}
	if settledRuns != counts[0]+counts[1] || inFlight != counts[2] {
		problems = append(problems, fmt.Sprintf("stats: %d settled and %d in flight, want %d and %d",
			settledRuns, inFlight, counts[0]+counts[1], counts[2]))
	}
	for _, k := range kinds {
		if p := checkPage(k.page.Runs, min(k.match, listPageSize), k.check); p != "" {
			problems = append(problems, k.key+": "+p)
		}
	}
	if len(problems) > 0 && rep.Verified {
		rep.Verified = false
		rep.Failure = fmt.Sprintf("pages not as expected: %v", problems)
	}

	for _, k := range kinds {
		s := Summarize(k.times)
		if k.goal {
			rep.AddGoal("list_"+k.key+"_p50_ms", k.label+" p50", s.P50, "ms", 2, AtMost(5))
		} else {
			rep.Add("list_"+k.key+"_p50_ms", k.label+" p50", s.P50, "ms", 2)
		}
		rep.Add("list_"+k.key+"_p95_ms", "  p95", s.P95, "ms", 2)
		rep.Add("list_"+k.key+"_p99_ms", "  p99", s.P99, "ms", 2)
	}
	ss := Summarize(statsTimes)
	rep.Add("stats_p50_ms", "Stats (window 24h) p50", ss.P50, "ms", 2)
	rep.Add("stats_p99_ms", "  p99", ss.P99, "ms", 2)
	rep.Add("setup_s", "setup: runs created and settled", setupTime.Seconds(), "s", 1)
	rep.Add("setup_runs_per_s", "  runs created and settled per second", float64(mix.total)/setupTime.Seconds(), "runs/s", 0)
	rep.Add("insert_s", "  of which inserting (RunManyNoWait, one inserter)", insertTime.Seconds(), "s", 1)
	rep.Add("vacuum_s", "VACUUM (ANALYZE) runs afterwards", vacuumTime.Seconds(), "s", 1)
	ws := Summarize(walkTimes[:walkPages])
	rep.Add("walk_s", fmt.Sprintf("walk half-way down in pages of %d", listWalkSize), walkTime.Seconds(), "s", 2)
	rep.Add("walk_page_p50_ms", fmt.Sprintf("  page of %d p50", listWalkSize), ws.P50, "ms", 2)
	rep.Add("walk_page_p99_ms", fmt.Sprintf("  page of %d p99", listWalkSize), ws.P99, "ms", 2)
	rep.Add("runs_completed", "runs completed", float64(counts[0]), "runs", 0)
	rep.Add("runs_failed", "runs failed", float64(counts[1]), "runs", 0)
	rep.Add("runs_in_flight", "runs in flight", float64(counts[2]), "runs", 0)

	pages := Table{Title: fmt.Sprintf("PAGES (limit %d, %d timings each, ms)", listPageSize, b.o.Repeat),
		Columns: []string{"page", "matching runs", "returned", "p50", "p95", "p99", "max"}}
	for _, k := range kinds {
		s := Summarize(k.times)
		pages.Rows = append(pages.Rows, []any{k.label, k.match, len(k.page.Runs),
			round2(s.P50), round2(s.P95), round2(s.P99), round2(s.Max)})
	}
	rep.Tables = append(rep.Tables, pages)
	sizes, err := b.relationSizes(ctx, "runs")
	if err != nil {
		return err
	}
	rep.Tables = append(rep.Tables, sizes)
	if vacTable != nil {
		rep.Tables = append(rep.Tables, *vacTable)
	}

	rep.Note("times are ListRuns calls of the engine, measured by the client: its round trip to PostgreSQL included")
	rep.Note("the runs table was vacuumed and analyzed after the inserts, as autovacuum would leave it (%s)", b.autovacuumSetting(ctx))
	rep.Note("tenant filters use tenant %s (%s runs); the deep cursor came from walking pages of %d (a cursor does not depend on the page size)",
		tenant, FormatNumber(float64(tenantRuns), 0), listWalkSize)
	return nil
}

// checkPage says what is wrong with a page, or "": it must hold want runs,
// newest first, each passing check.
func checkPage(runs []durabletype.RunSummary, want int, check func(durabletype.RunSummary) bool) string {
	if len(runs) != want {
		return fmt.Sprintf("%d runs, want %d", len(runs), want)
	}
	for i, r := range runs {
		if !check(r) {
			return fmt.Sprintf("run %s (%s, %s, %s) does not match the filter", r.ID, r.Workflow, r.Tenant, r.Status)
		}
		if i > 0 {
			p := runs[i-1]
			if r.CreatedAt.After(p.CreatedAt) || (r.CreatedAt.Equal(p.CreatedAt) && slices.Compare(r.ID[:], p.ID[:]) >= 0) {
				return fmt.Sprintf("run %s comes after a newer run", r.ID)
			}
		}
	}
	return ""
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// relationSizes tabulates a table of the schema and its indexes, in MB.
func (b *bencher) relationSizes(ctx context.Context, table string) (Table, error) {
	t := Table{Title: "SIZES (MB): " + table + " and its indexes", Columns: []string{"relation", "MB"}}
	rows, err := b.monitor.Query(ctx, `
SELECT c.relname, pg_total_relation_size(c.oid) - pg_indexes_size(c.oid), 0
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2
UNION ALL
SELECT i.relname, pg_relation_size(i.oid), 1
FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2
ORDER BY 3, 1`, b.schema, table)
	if err != nil {
		return t, fmt.Errorf("reading sizes: %w", err)
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		var name string
		var size int64
		var idx int
		if err := rows.Scan(&name, &size, &idx); err != nil {
			return t, fmt.Errorf("reading sizes: %w", err)
		}
		if idx == 0 {
			name += " (heap and TOAST)"
		}
		total += size
		t.Rows = append(t.Rows, []any{name, mb(size)})
	}
	if err := rows.Err(); err != nil {
		return t, fmt.Errorf("reading sizes: %w", err)
	}
	t.Rows = append(t.Rows, []any{"total", mb(total)})
	return t, nil
}

// mb is bytes in MB (2^20), to one decimal.
func mb(bytes int64) float64 { return float64(bytes*10/(1<<20)) / 10 }

// autovacuumSetting describes the server's autovacuum setting.
func (b *bencher) autovacuumSetting(ctx context.Context) string {
	var on string
	if err := b.monitor.QueryRow(ctx, `SELECT current_setting('autovacuum')`).Scan(&on); err != nil {
		return "autovacuum: unknown"
	}
	if on == "on" {
		return "the server's autovacuum is on"
	}
	return "the server's autovacuum is OFF"
}
