package bench

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/pgstore"
)

// sampleLag is how long after an interval ends soak reads the runs that
// settled in it: a run's finished_at is its transaction's start, a little
// before the commit that makes it visible.
const sampleLag = time.Second

// soakTick paces the triggers.
const soakTick = 20 * time.Millisecond

// The goal (issue #32) judges the second half of the run: its sizes flat
// within 5%, and so its throughput, p99, Stats and first page of the runs
// list. plateauTolerance is how much a table's peak may grow after the
// early window and still count as flat; soakTolerance is how far the last
// window's figures may move from the early window's. soakTimingSlackMs:
// Stats and the runs list, timed in milliseconds or less, also meet their
// goal when they move by at most this much (noise alone moves a
// sub-millisecond timing by more than 5%). soakReads is how many times
// each sample calls each.
const (
	plateauTolerance  = 5.0  // %
	plateauSlackMB    = 1.0  // small tables: growth under this is no growth
	soakTolerance     = 5.0  // %
	soakTimingSlackMs = 1.0  // ms
	soakSustained     = 0.95 // of the rate
	soakReads         = 3
	soakListLimit     = 50
)

// SoakSample is what soak records for one sampling interval.
type SoakSample struct {
	// T is the end of the interval, in seconds since triggering began;
	// Seconds its length.
	T       float64 `json:"t_s"`
	Seconds float64 `json:"interval_s"`
	// Triggered counts the runs triggered in the interval; TriggerLag the
	// runs due by the rate but not yet triggered at its end.
	Triggered  int `json:"triggered"`
	TriggerLag int `json:"trigger_lag"`
	// Completed counts the runs that settled in the interval (finished_at);
	// the latencies are theirs, created_at → finished_at.
	Completed int     `json:"completed"`
	P50       float64 `json:"p50_ms"`
	P95       float64 `json:"p95_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
	// InFlight counts the runs not settled, Kept all the runs in the
	// table, at the sample; Pruned the runs deleted in the interval.
	InFlight int `json:"in_flight"`
	Kept     int `json:"kept"`
	Pruned   int `json:"pruned"`
	// Settled counts the runs kept whose finished_at is before the
	// interval's end: with the runs pruned, what the final sample
	// reconciles the intervals' counts against (soakAccount).
	Settled int `json:"settled_kept"`
	// Vacuums counts the vacuums of the schema's tables in the interval,
	// by anyone (pg_stat_user_tables).
	Vacuums int             `json:"vacuums"`
	Tables  []TableSnapshot `json:"tables"`
	// StatsMs and ListMs time Stats (a 24-hour window) and the first page
	// of the runs list (ListRuns, 50 runs) at the sample: the median of
	// soakReads calls each, measured by the client.
	StatsMs float64 `json:"stats_ms"`
	ListMs  float64 `json:"list_ms"`
}

// TableSnapshot is one table of the schema at a sample.
type TableSnapshot struct {
	Name string `json:"name"`
	// Bytes is pg_total_relation_size: heap, indexes and TOAST.
	Bytes int64 `json:"bytes"`
	Live  int64 `json:"live_tup"`
	Dead  int64 `json:"dead_tup"`
	// Vacuums is the table's vacuum_count + autovacuum_count so far.
	Vacuums int64 `json:"vacuums"`
	// Updates and HOTUpdates count the table's updates so far, and those
	// that were heap-only (no index entry written).
	Updates    int64 `json:"updates"`
	HOTUpdates int64 `json:"hot_updates"`
}

func (s SoakSample) totalBytes() int64 {
	var n int64
	for _, t := range s.Tables {
		n += t.Bytes
	}
	return n
}

func (s SoakSample) totalDead() int64 {
	var n int64
	for _, t := range s.Tables {
		n += t.Dead
	}
	return n
}

func (s SoakSample) table(name string) (TableSnapshot, bool) {
	for _, t := range s.Tables {
		if t.Name == name {
			return t, true
		}
	}
	return TableSnapshot{}, false
}

// soakWindow is a window of soak's intervals: [From, To) seconds, with
// what the intervals it covers counted and timed.
type soakWindow struct {
	From, To    float64
	seconds     float64
	runs        int
	lat         []float64
	stats, list []float64 // the samples' StatsMs and ListMs
}

const soakEps = 1e-6

// covers tells whether the sample's interval lies in the window.
func (w *soakWindow) covers(s SoakSample) bool {
	return s.T-s.Seconds >= w.From-soakEps && s.T <= w.To+soakEps
}

// holds tells whether the sample was taken in the window (its end, when
// the table sizes are read, is in [From, To]).
func (w *soakWindow) holds(s SoakSample) bool {
	return s.T >= w.From-soakEps && s.T <= w.To+soakEps
}

// add counts the sample, with its interval's latencies, if it covers it.
func (w *soakWindow) add(s SoakSample, lat []float64) {
	if !w.covers(s) {
		return
	}
	w.seconds += s.Seconds
	w.runs += s.Completed
	w.lat = append(w.lat, lat...)
	w.stats = append(w.stats, s.StatsMs)
	w.list = append(w.list, s.ListMs)
}

func (w *soakWindow) perSecond() float64 {
	if w.seconds <= 0 {
		return 0
	}
	return float64(w.runs) / w.seconds
}

// soakWindows returns the windows the goal compares, of width min(1m,
// duration/5): the early one opens the judged span, the run's second half
// (the last 10 minutes of 20), and the last one closes it.
func soakWindows(d time.Duration) (early, last *soakWindow) {
	w := min(time.Minute, d/5).Seconds()
	half := d.Seconds() / 2
	return &soakWindow{From: half, To: half + w}, &soakWindow{From: d.Seconds() - w, To: d.Seconds()}
}

// soak triggers one-step runs at a fixed rate for the duration, with the
// workers pruning runs past a short retention, and samples the tables, the
// throughput and the latency every interval.
func (b *bencher) soak(ctx context.Context, rep *Report) error {
	o := b.o
	rep.Description = fmt.Sprintf("one-step bench-noop runs triggered at %s runs/s for %s, retention %s, sampled every %s",
		FormatNumber(float64(o.Rate), 0), o.Duration, o.Retention, o.Sample)

	mode, av, err := b.vacuumMode(ctx, rep)
	if err != nil {
		return err
	}

	f, err := b.startFleet(ctx, workerSpec{n: o.Workers, concurrency: o.Concurrency,
		claimBatch: o.ClaimBatch, finishBatch: o.FinishBatch, name: "w", retention: o.Retention})
	if err != nil {
		return err
	}
	defer f.stop()
	if err := f.waitListening(ctx); err != nil {
		return err
	}

	var t0db time.Time
	if err := b.monitor.QueryRow(ctx, `SELECT now()`).Scan(&t0db); err != nil {
		return fmt.Errorf("reading the time: %w", err)
	}
	t0 := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	var vac *vacuumer
	var bg sync.WaitGroup
	if mode == VacuumBench {
		if vac, err = b.startVacuumer(ctx, av, t0); err != nil {
			return err
		}
		defer vac.close()
		bg.Go(func() { vac.run(runCtx) })
	}
	load := loadAvg()
	defer func() {
		rep.Note("load average (1 min) at the start %s, at the end %s: the machine is shared", load, loadAvg())
	}()

	// The trigger loop: every tick, the runs due by now at the rate.
	var sent atomic.Int64
	var insertErr error
	triggered := make(chan struct{}) // closed when the trigger loop ends
	total := int64(math.Round(float64(o.Rate) * o.Duration.Seconds()))
	due := func(at time.Duration) int64 {
		return min(int64(float64(o.Rate)*at.Seconds()), total)
	}
	bg.Go(func() {
		defer close(triggered)
		tick := time.NewTicker(soakTick)
		defer tick.Stop()
		i := 0
		for {
			n := due(time.Since(t0)) - sent.Load()
			for n > 0 {
				k := int(min(n, int64(o.InsertBatch)))
				trig := make([]durable.Trigger[int], k)
				for j := range trig {
					trig[j] = durable.Trigger[int]{Tenant: b.tenant(fmt.Sprintf("s%d", i%o.Tenants)), Input: i}
					i++
				}
				if _, err := b.set.Noop.RunManyNoWait(runCtx, b.client, trig); err != nil {
					if runCtx.Err() == nil {
						insertErr = fmt.Errorf("triggering runs: %w", err)
					}
					return
				}
				sent.Add(int64(k))
				n -= int64(k)
			}
			if sent.Load() >= total {
				return
			}
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
		}
	})

	b.logf("triggering %d runs/s for %s (retention %s; vacuum: %s)", o.Rate, o.Duration, o.Retention, mode)
	early, last := soakWindows(o.Duration)
	var samples []SoakSample
	var prev *SoakSample
	var prevSent int64
	var prevKept int
	for end := o.Sample; ; end += o.Sample {
		end = min(end, o.Duration)
		// The triggers are counted when the interval ends, the database
		// read sampleLag later.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(t0.Add(end))):
		}
		if end >= o.Duration {
			// The last runs are due at the very end: count them once the
			// trigger loop has sent them (or failed).
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-triggered:
			}
		}
		n := sent.Load()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(t0.Add(end + sampleLag))):
		}
		from := time.Duration(0)
		if prev != nil {
			from = time.Duration(prev.T * float64(time.Second))
		}
		s, lat, err := b.sample(ctx, t0db.Add(from), t0db.Add(end))
		if err != nil {
			return err
		}
		if s.StatsMs, s.ListMs, err = b.timeReads(ctx); err != nil {
			return err
		}
		s.T, s.Seconds = end.Seconds(), (end - from).Seconds()
		s.Triggered, s.TriggerLag = int(n-prevSent), int(max(due(end)-n, 0))
		prevSent = n
		// The runs gone since the previous sample: deleted, or dropped
		// with their period's partitions (which no row counter counts).
		s.Pruned = max(prevKept+s.Triggered-s.Kept, 0)
		prevKept = s.Kept
		if prev != nil {
			for _, t := range s.Tables {
				if p, ok := prev.table(t.Name); ok {
					s.Vacuums += int(t.Vacuums - p.Vacuums)
				}
			}
		}
		early.add(s, lat)
		last.add(s, lat)
		samples = append(samples, s)
		prev = &samples[len(samples)-1]
		runs, _ := s.table("runs")
		tasks, _ := s.table("tasks")
		b.logf("t=%4.0fs triggered %6.0f/s completed %6.0f/s p50 %7.1fms p99 %7.1fms in flight %7d kept %7d pruned %6.0f/s | runs %6.1fMB (%d dead) tasks %6.1fMB (%d dead) total %6.1fMB | stats %.1fms list %.2fms",
			s.T, float64(s.Triggered)/s.Seconds, float64(s.Completed)/s.Seconds, s.P50, s.P99, s.InFlight, s.Kept,
			float64(s.Pruned)/s.Seconds, mb(runs.Bytes), runs.Dead, mb(tasks.Bytes), tasks.Dead, mb(s.totalBytes()), s.StatsMs, s.ListMs)
		if end >= o.Duration {
			break
		}
	}
	stop()
	bg.Wait()
	f.stop()
	rep.Series = samples
	b.soakReport(rep, samples, early, last, sent.Load(), total)
	if vac != nil {
		rep.Tables = append(rep.Tables, vac.summary())
	}
	if insertErr != nil {
		rep.Verified = false
		rep.Failure = insertErr.Error()
	}
	return nil
}

// sample reads the runs that settled in [from, to) (their latencies), the
// runs kept and in flight, and every table's size and tuples.
func (b *bencher) sample(ctx context.Context, from, to time.Time) (SoakSample, []float64, error) {
	var s SoakSample
	// One pass over runs (finished_at has no index), on one core: the
	// sample competes for the machine with what it measures, and a
	// parallel scan took every core for a second or more at each sample.
	var lat []float64
	err := pgx.BeginFunc(ctx, b.monitor, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL max_parallel_workers_per_gather = 0`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE finished_at IS NULL), count(*) FILTER (WHERE finished_at < $2),
       coalesce(array_agg((extract(epoch FROM finished_at - created_at) * 1000)::float8)
                FILTER (WHERE finished_at >= $1 AND finished_at < $2), '{}')
FROM `+b.table("runs"), from, to).Scan(&s.Kept, &s.InFlight, &s.Settled, &lat)
	})
	if err != nil {
		return s, nil, fmt.Errorf("sampling: %w", err)
	}
	sum := Summarize(lat)
	s.Completed, s.P50, s.P95, s.P99, s.Max = sum.N, round2(sum.P50), round2(sum.P95), round2(sum.P99), round2(sum.Max)
	// A partitioned table (the history's, by period) counts as the sum of
	// its partitions, which come and go.
	rows, err := b.monitor.Query(ctx, `
SELECT `+pgstore.CountsAs("c", "p")+`, sum(coalesce(pg_total_relation_size(c.oid), 0))::int8, sum(coalesce(s.n_live_tup, 0))::int8,
       sum(coalesce(s.n_dead_tup, 0))::int8, sum(coalesce(s.vacuum_count + s.autovacuum_count, 0))::int8,
       sum(coalesce(s.n_tup_upd, 0))::int8, sum(coalesce(s.n_tup_hot_upd, 0))::int8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
LEFT JOIN pg_class p ON p.oid = i.inhparent
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = $1 AND c.relkind = 'r'
GROUP BY 1`, b.schema)
	if err != nil {
		return s, nil, fmt.Errorf("sampling the tables: %w", err)
	}
	s.Tables, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (TableSnapshot, error) {
		var t TableSnapshot
		err := r.Scan(&t.Name, &t.Bytes, &t.Live, &t.Dead, &t.Vacuums, &t.Updates, &t.HOTUpdates)
		return t, err
	})
	if err != nil {
		return s, nil, fmt.Errorf("sampling the tables: %w", err)
	}
	sortTables(s.Tables)
	return s, lat, nil
}

// timeReads times what an operator reads while the runs go by: Stats over
// a day and the first page of the runs list, soakReads times each, in
// turn; it returns the median of each, in milliseconds.
func (b *bencher) timeReads(ctx context.Context) (statsMs, listMs float64, err error) {
	var stats, list []float64
	for range soakReads {
		t := time.Now()
		if _, err := b.client.Stats(ctx, durable.StatsOptions{Window: 24 * time.Hour}); err != nil {
			return 0, 0, fmt.Errorf("sampling: stats: %w", err)
		}
		stats = append(stats, Millis(time.Since(t)))
		t = time.Now()
		if _, err := b.client.ListRuns(ctx, durable.ListOptions{Limit: soakListLimit}); err != nil {
			return 0, 0, fmt.Errorf("sampling: listing runs: %w", err)
		}
		list = append(list, Millis(time.Since(t)))
	}
	return round3(Percentile(stats, 50)), round3(Percentile(list, 50)), nil
}

// tableOrder puts the big durable tables first.
var tableOrder = []string{"runs", "tasks", "events", "ready", "run_counts", "lanes", "shapes"}

func sortTables(ts []TableSnapshot) {
	rank := func(n string) int {
		for i, x := range tableOrder {
			if x == n {
				return i
			}
		}
		return len(tableOrder)
	}
	sort.SliceStable(ts, func(i, j int) bool {
		ri, rj := rank(ts[i].Name), rank(ts[j].Name)
		if ri != rj {
			return ri < rj
		}
		return ts[i].Name < ts[j].Name
	})
}

// plateau is one table's growth after the early window: its largest size
// after it against its largest in it.
type plateau struct {
	name                  string
	atRef, atEnd, maxLate int64 // bytes
	deadRef, deadEnd      int64 // deadRef: the most in the early window
	deadMax               int64 // the most after it
}

func (p plateau) growthPct() float64 {
	if p.atRef == 0 {
		if p.maxLate == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return (float64(p.maxLate)/float64(p.atRef) - 1) * 100
}

// flat tells whether the table plateaued: its peak grew by at most
// plateauTolerance, or (a single table) by less than plateauSlackMB.
func (p plateau) flat() bool {
	return p.growthPct() <= plateauTolerance || (p.name != allTables && mb(p.maxLate-p.atRef) < plateauSlackMB)
}

const allTables = "all tables"

// refSpan is when the reference samples were taken: t=From to t=To.
type refSpan struct{ From, To float64 }

func (r refSpan) String() string {
	if r.From == r.To {
		return fmt.Sprintf("t=%.0fs", r.From)
	}
	return fmt.Sprintf("t=%.0f-%.0fs", r.From, r.To)
}

// plateaus compares every table's size after the early window with its
// size in it, peak against peak: the history's partitions are dropped a
// period at a time, so a table's size is a sawtooth, and a sample in a
// trough is no reference. The reference is a table's largest size among
// the samples taken in the early window (none was: the last one before
// its end, else the first sample), the growth its largest size after
// that over the reference; a table that keeps growing grows its peaks
// too. The total comes first, named "all tables". Without a sample after
// the reference there is nothing to judge: no plateaus.
func plateaus(samples []SoakSample, early *soakWindow) (ref refSpan, ps []plateau) {
	refs, late := plateauSamples(samples, early)
	if len(refs) == 0 || len(late) == 0 {
		return refSpan{}, nil
	}
	ref = refSpan{refs[0].T, refs[len(refs)-1].T}
	names := []string{allTables}
	for _, t := range refs[len(refs)-1].Tables {
		names = append(names, t.Name)
	}
	get := func(s SoakSample, name string) (int64, int64) {
		if name == allTables {
			return s.totalBytes(), s.totalDead()
		}
		t, _ := s.table(name)
		return t.Bytes, t.Dead
	}
	for _, n := range names {
		p := plateau{name: n}
		for _, s := range refs {
			size, dead := get(s, n)
			p.atRef, p.deadRef = max(p.atRef, size), max(p.deadRef, dead)
		}
		for _, s := range late {
			size, dead := get(s, n)
			p.maxLate, p.deadMax = max(p.maxLate, size), max(p.deadMax, dead)
		}
		p.atEnd, p.deadEnd = get(late[len(late)-1], n)
		ps = append(ps, p)
	}
	return ref, ps
}

// plateauSamples splits the samples into the reference ones (taken in the
// early window, or the last before its end, or the first) and those after.
func plateauSamples(samples []SoakSample, early *soakWindow) (refs, late []SoakSample) {
	last := -1 // the last sample before the window's end
	for i, s := range samples {
		switch {
		case early.holds(s):
			refs = append(refs, s)
		case s.T > early.To+soakEps:
			late = append(late, s)
		default:
			last = i
		}
	}
	if len(refs) > 0 || len(samples) == 0 {
		return refs, late
	}
	if last < 0 {
		return samples[:1], late[1:]
	}
	return samples[last : last+1], late
}

// soakAccount reconciles the intervals' counts with the final sample, taken
// once every run was triggered. Each run triggered (sent) is then pruned
// (sent − kept), settled before the end and kept, settled after the end, or
// in flight. A pruned run settled more than the retention before the final
// sample, so before the end too: the retention is at least the sample
// interval plus sampleLag, and the final sample is not an interval late.
// The runs settled before the end that no interval counted
// are uncounted: the sample of their interval came too late (they were
// pruned first) or too early (their transaction committed after it).
type soakAccount struct {
	settled, uncounted, after, inFlight int
}

func accountSoak(samples []SoakSample, sent int64) soakAccount {
	if len(samples) == 0 {
		return soakAccount{}
	}
	end := samples[len(samples)-1]
	var counted int
	for _, s := range samples {
		counted += s.Completed
	}
	settled := int(sent) - end.Kept + end.Settled
	return soakAccount{settled: settled, uncounted: settled - counted,
		after: end.Kept - end.Settled - end.InFlight, inFlight: end.InFlight}
}

func pctChange(from, to float64) float64 {
	if from == 0 {
		return 0
	}
	return (to/from - 1) * 100
}

func (b *bencher) soakReport(rep *Report, samples []SoakSample, early, last *soakWindow, sent, total int64) {
	o := b.o
	var pruned, vacuums int
	for _, s := range samples {
		pruned += s.Pruned
		vacuums += s.Vacuums
	}
	acct := accountSoak(samples, sent)
	dur := o.Duration.Seconds()
	rep.Add("triggered_per_s", "triggered, whole run", float64(sent)/dur, "runs/s", 0)
	rep.Add("completed_per_s", "completed, whole run", float64(acct.settled)/dur, "runs/s", 0)
	b.soakWindowsReport(rep, early, last)
	soakPlateauReport(rep, samples, early)
	if len(samples) > 0 {
		end := samples[len(samples)-1]
		if runs, ok := end.table("runs"); ok && runs.Updates > 0 {
			rep.Add("runs_hot_pct", "updates of runs that were HOT (no index entry written)",
				100*float64(runs.HOTUpdates)/float64(runs.Updates), "%", 1)
		}
		rep.Add("in_flight_end", "runs in flight at the end", float64(end.InFlight), "runs", 0)
		rep.Add("kept_end", "runs kept at the end", float64(end.Kept), "runs", 0)
	}
	rep.Add("pruned", "runs pruned", float64(pruned), "runs", 0)
	rep.Add("vacuums", "vacuums of the schema's tables", float64(vacuums), "", 0)
	rep.Add("runs_completed", "runs completed by the end", float64(acct.settled), "runs", 0)
	rep.Add("runs_completed_after", "runs completed after the end, by the last sample", float64(acct.after), "runs", 0)
	rep.AddGoal("runs_uncounted", "runs completed that no interval counted", float64(acct.uncounted), "runs", 0, AtMost(0))
	if acct.uncounted > 0 {
		rep.Note("%s runs completed in an interval that its sample did not count (pruned before it read them, or committed after): "+
			"the intervals' throughput and latency leave them out; the sampler fell behind (retention %s, sample %s, read %s after each interval)",
			FormatNumber(float64(acct.uncounted), 0), o.Retention, o.Sample, sampleLag)
	}
	rep.Tables = append(rep.Tables, soakTables(samples)...)
	rep.Note("latency is trigger → completed from the database: runs.created_at (the trigger's transaction) → finished_at, of the runs that settled in each interval")
	rep.Note("each sample reads the runs table once, whole (finished_at has no index), without parallel workers, and the sizes from pg_total_relation_size; dead tuples are pg_stat_user_tables.n_dead_tup")
	rep.Note("each sample then times Stats (window 24h) and the first page of the runs list (%d runs), %d calls each in turn, the median kept, measured by the client (its round trip included)",
		soakListLimit, soakReads)
	if sent < total {
		rep.Note("the trigger loop fell behind: %s of %s runs triggered", FormatNumber(float64(sent), 0), FormatNumber(float64(total), 0))
	}
}

// windowName names a window: "minute 11", or "600-630s" when it is not a
// minute long.
func windowName(w *soakWindow) string {
	if w.To-w.From == 60 {
		return fmt.Sprintf("minute %.0f", w.To/60)
	}
	return fmt.Sprintf("%.0f-%.0fs", w.From, w.To)
}

// soakWindowsReport compares the last window with the early one:
// throughput, p50 and p99 trigger → completed, Stats and the runs list.
func (b *bencher) soakWindowsReport(rep *Report, early, last *soakWindow) {
	o := b.o
	rep.Note("the verdicts judge the run's second half: the last window (%s) against the early window (%s) that opens it, the sizes after the early window against the sizes in it",
		windowName(last), windowName(early))
	if early.seconds <= 0 || last.seconds <= 0 {
		rep.Note("the windows compared (%s, %s) are shorter than the sample interval %s: no comparison",
			windowName(early), windowName(last), o.Sample)
		return
	}
	se, sl := Summarize(early.lat), Summarize(last.lat)
	label := "early window (" + windowName(early) + ")"
	lastLabel := "last window (" + windowName(last) + ")"
	vs := "  last vs early"
	rep.Add("early_runs_per_s", "throughput, "+label, early.perSecond(), "runs/s", 0)
	rep.AddGoal("last_runs_per_s", "throughput, "+lastLabel, last.perSecond(), "runs/s", 0, AtLeast(soakSustained*float64(o.Rate)))
	rep.AddGoal("throughput_change_pct", vs, pctChange(early.perSecond(), last.perSecond()), "%", 1, AtLeast(-soakTolerance))
	rep.Add("early_p50_ms", "trigger → completed p50, "+label, se.P50, "ms", 1)
	rep.Add("last_p50_ms", "trigger → completed p50, "+lastLabel, sl.P50, "ms", 1)
	rep.Add("early_p99_ms", "trigger → completed p99, "+label, se.P99, "ms", 1)
	rep.Add("last_p99_ms", "trigger → completed p99, "+lastLabel, sl.P99, "ms", 1)
	rep.AddGoal("p99_change_pct", vs, pctChange(se.P99, sl.P99), "%", 1, AtMost(soakTolerance))
	timing := func(key, what string, e, l []float64) {
		me, ml := Percentile(e, 50), Percentile(l, 50)
		rep.Add("early_"+key+"_ms", what+", median, "+label, me, "ms", 2)
		rep.Add("last_"+key+"_ms", what+", median, "+lastLabel, ml, "ms", 2)
		rep.AddGoalOr(key+"_change_pct", vs, pctChange(me, ml), "%", 1, AtMost(soakTolerance),
			fmt.Sprintf("or within %.0f ms", soakTimingSlackMs), ml-me <= soakTimingSlackMs)
	}
	timing("stats", "Stats (window 24h)", early.stats, last.stats)
	timing("list", fmt.Sprintf("runs list, first page (%d)", soakListLimit), early.list, last.list)
	rep.Note("Stats and the runs list meet their goal when the last window's median is at most %.0f%% or at most %.0f ms slower than the early window's: sub-millisecond timings are noise-bound (the first page takes about half a millisecond), noise alone moves them by more than %.0f%%",
		soakTolerance, soakTimingSlackMs, soakTolerance)
}

// soakPlateauReport judges the sizes: each table's peak after the early
// window against its peak in it.
func soakPlateauReport(rep *Report, samples []SoakSample, early *soakWindow) {
	ref, ps := plateaus(samples, early)
	if len(ps) == 0 {
		if len(samples) > 0 {
			rep.Note("no sample after the early window (%s): no verdict on the sizes", windowName(early))
		}
		return
	}
	after := fmt.Sprintf("after t=%.0fs", ref.To)
	all := ps[0]
	rep.AddGoal("size_growth_pct", fmt.Sprintf("all tables' size: largest %s vs largest at %s", after, ref), all.growthPct(), "%", 1, AtMost(plateauTolerance))
	rep.Add("size_ref_mb", fmt.Sprintf("  largest at %s", ref), mb(all.atRef), "MB", 1)
	rep.Add("size_max_mb", "  largest "+after, mb(all.maxLate), "MB", 1)
	rep.Add("size_end_mb", "  size at the end", mb(all.atEnd), "MB", 1)
	rep.Add("dead_max", "  dead tuples, most "+after, float64(all.deadMax), "tuples", 0)
	rep.Add("dead_end", "  dead tuples at the end", float64(all.deadEnd), "tuples", 0)
	t := Table{Title: fmt.Sprintf("PLATEAU: each table (with indexes), its largest size %s against its largest at %s (flat: grew under %.0f%% or %.0f MB; all tables: %.0f%%)",
		after, ref, plateauTolerance, plateauSlackMB, plateauTolerance),
		Columns: []string{"table", "MB max at ref", "MB max after", "MB at end", "growth %", "dead max at ref", "dead max after", "dead at end", "flat"}}
	for _, p := range ps {
		flat := "yes"
		if !p.flat() {
			flat = "NO"
		}
		g := math.Round(p.growthPct()*10) / 10
		t.Rows = append(t.Rows, []any{p.name, mb(p.atRef), mb(p.maxLate), mb(p.atEnd), g, p.deadRef, p.deadMax, p.deadEnd, flat})
	}
	rep.Tables = append(rep.Tables, t)
	rep.Note("the sizes are judged by their peaks: the history's partitions go a period at a time, so the total is a sawtooth, and a sample in a trough is no reference")
}

// soakTables renders the series: the runs, the table sizes and the dead
// tuples over time.
func soakTables(samples []SoakSample) []Table {
	series := Table{Title: "SERIES (per interval; rates per second; latency trigger → completed, ms; Stats and the runs list's first page at the sample, median of 3, ms)",
		Columns: []string{"t s", "triggered/s", "completed/s", "p50", "p99", "max", "in flight", "kept", "pruned/s", "vacuums", "MB", "dead", "stats", "list"}}
	var names []string
	if len(samples) > 0 {
		for _, t := range samples[len(samples)-1].Tables {
			names = append(names, t.Name)
		}
	}
	sizes := Table{Title: "TABLE SIZES (MB, with indexes)", Columns: append([]string{"t s"}, names...)}
	dead := Table{Title: "DEAD TUPLES", Columns: append([]string{"t s"}, names...)}
	for _, s := range samples {
		per := func(n int) float64 { return math.Round(float64(n) / s.Seconds) }
		series.Rows = append(series.Rows, []any{s.T, per(s.Triggered), per(s.Completed), s.P50, s.P99, s.Max,
			s.InFlight, s.Kept, per(s.Pruned), s.Vacuums, mb(s.totalBytes()), s.totalDead(), s.StatsMs, s.ListMs})
		sr, dr := []any{s.T}, []any{s.T}
		for _, n := range names {
			t, _ := s.table(n)
			sr = append(sr, mb(t.Bytes))
			dr = append(dr, t.Dead)
		}
		sizes.Rows = append(sizes.Rows, sr)
		dead.Rows = append(dead.Rows, dr)
	}
	return []Table{series, sizes, dead}
}
