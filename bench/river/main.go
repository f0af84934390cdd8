// Command riverbench runs River's no-op benchmark (the River CLI's
// `river bench --num-total-jobs N`) the way `durable bench --scenario single`
// measures durable, so that the two can be run side by side on one machine:
//
//   - a fresh schema, river_bench_<random>, migrated with rivermigrate and
//     dropped at the end (unless --keep);
//   - N no-op jobs inserted first, in batches of 5,000 (InsertMany, as the
//     River CLI does), then a CHECKPOINT, as durable's bench takes before its
//     measured phase;
//   - then one River client (--workers) with 2,000 workers on the default
//     queue (--concurrency) and the River CLI's fetch settings works them;
//   - throughput is jobs completed over the database's window, from the
//     first river_job.attempted_at to the last finalized_at, as durable's is
//     over tasks.started_at to finished_at;
//   - WAL is read with pg_current_wal_lsn() around the inserts and around
//     the work (after the checkpoint until every completion is committed).
//
// It lives in its own module so that durable never depends on River.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The River CLI's bench settings (cmd/river/riverbench in River's
// repository): a fetch cooldown and poll interval much shorter than the
// client's defaults, 2,000 workers on one queue, inserts of 5,000 jobs.
const (
	defaultJobs              = 200_000
	defaultConcurrency       = 2_000
	defaultFetchCooldown     = 2 * time.Millisecond
	defaultFetchPollInterval = 20 * time.Millisecond
	defaultInsertBatch       = 5_000
)

type options struct {
	databaseURL       string
	jobs              int
	workers           int
	concurrency       int
	maxConns          int
	fetchCooldown     time.Duration
	fetchPollInterval time.Duration
	insertBatch       int
	insertFast        bool
	checkpoint        bool
	keep              bool
	timeout           time.Duration
	asJSON            bool
	verbose           bool
}

// noopArgs is the job: the same shape as the River CLI's benchmark job, a
// number in a one-field JSON object.
type noopArgs struct {
	Num int `json:"num"`
}

func (noopArgs) Kind() string { return "benchmark" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// Report is what a run measured; with --json it is printed as one object.
type Report struct {
	System      string  `json:"system"`
	Schema      string  `json:"schema"`
	SchemaKept  bool    `json:"schema_kept"`
	Jobs        int     `json:"jobs"`
	Workers     int     `json:"workers"`
	Concurrency int     `json:"concurrency"`
	MaxConns    int     `json:"max_conns"`
	InsertBatch int     `json:"insert_batch"`
	InsertFast  bool    `json:"insert_fast"`
	Checkpoint  bool    `json:"checkpoint"`
	Verified    bool    `json:"verified"`
	Failure     string  `json:"failure,omitempty"`
	ElapsedS    float64 `json:"elapsed_s"`

	// JobsPerS is the headline: completed jobs over WindowS, the first
	// attempted_at to the last finalized_at of river_job.
	JobsPerS float64 `json:"jobs_per_s"`
	WindowS  float64 `json:"window_s"`
	// CommittedPerS is completed jobs from the first attempted_at to the
	// last completion event received (its commit): River stamps
	// finalized_at with the client's clock when a job returns, before the
	// batched completer commits it.
	CommittedPerS float64 `json:"committed_per_s"`
	// WallPerS is completed jobs from the client's Start to the last
	// completion event: the River CLI's "overall job/sec".
	WallPerS      float64 `json:"wall_per_s"`
	WallS         float64 `json:"wall_s"`
	InsertPerS    float64 `json:"insert_per_s"`
	InsertS       float64 `json:"insert_s"`
	JobsCompleted int     `json:"jobs_completed"`

	// WAL, in bytes, from pg_current_wal_lsn(): InsertWAL from before the
	// first insert to after the last; WorkWAL from after the checkpoint
	// (the work's first full-page images included) to the last completion
	// committed. Server-wide: anything else writing at the time counts.
	InsertWALBytes      int64   `json:"insert_wal_bytes"`
	WorkWALBytes        int64   `json:"work_wal_bytes"`
	InsertWALPerJob     float64 `json:"insert_wal_per_job"`
	WorkWALPerJob       float64 `json:"work_wal_per_job"`
	InsertWorkWALPerJob float64 `json:"insert_work_wal_per_job"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("riverbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL `URL` (default $DATABASE_URL)")
	fs.IntVar(&o.jobs, "jobs", defaultJobs, "no-op jobs inserted first, then worked (river bench --num-total-jobs)")
	fs.IntVar(&o.workers, "workers", 1, "River clients working the jobs, each with its own pool (the River CLI runs one)")
	fs.IntVar(&o.concurrency, "concurrency", defaultConcurrency, "each client's MaxWorkers on the default queue (the River CLI's 2,000)")
	fs.IntVar(&o.maxConns, "max-conns", 0, "each worker pool's MaxConns (0: pgxpool's default, max(4, cores), as the River CLI)")
	fs.DurationVar(&o.fetchCooldown, "fetch-cooldown", defaultFetchCooldown, "the clients' FetchCooldown (the River CLI's)")
	fs.DurationVar(&o.fetchPollInterval, "fetch-poll-interval", defaultFetchPollInterval, "the clients' FetchPollInterval (the River CLI's)")
	fs.IntVar(&o.insertBatch, "insert-batch", defaultInsertBatch, "jobs per insert call")
	fs.BoolVar(&o.insertFast, "insert-fast", false, "insert with InsertManyFast (COPY) instead of InsertMany, which the River CLI uses")
	fs.BoolVar(&o.checkpoint, "checkpoint", true, "CHECKPOINT between the inserts and the work, as durable bench does (needs superuser or pg_checkpoint)")
	fs.BoolVar(&o.keep, "keep", false, "keep the schema instead of dropping it")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up waiting for the jobs after this long")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as one JSON object on stdout (the table goes to stderr)")
	fs.BoolVar(&o.verbose, "v", false, "log River's info messages")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: riverbench --database-url URL [flags]

Inserts --jobs no-op River jobs into a fresh schema, then works them with
River clients set as the River CLI's bench sets them, and reports jobs/s over
the database's window (first attempted_at to last finalized_at), as
"durable bench --scenario single" reports runs/s, and the WAL written per job.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case o.databaseURL == "":
		fmt.Fprintln(stderr, "riverbench: --database-url (or $DATABASE_URL) is required")
		return 2
	case o.jobs < 1 || o.workers < 1 || o.concurrency < 1 || o.insertBatch < 1 || o.maxConns < 0:
		fmt.Fprintln(stderr, "riverbench: --jobs, --workers, --concurrency and --insert-batch must be positive")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bencher{o: o, start: time.Now(), log: stderr}
	rep, err := b.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "riverbench: %v\n", err)
		return 1
	}
	text := stdout
	if o.asJSON {
		text = stderr
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "riverbench: %v\n", err)
			return 1
		}
	}
	rep.writeText(text)
	if !rep.Verified {
		return 1
	}
	return 0
}

type bencher struct {
	o      options
	start  time.Time
	log    io.Writer
	logger *slog.Logger
	schema string
	admin  *pgxpool.Pool
}

func (b *bencher) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "riverbench %6.1fs: %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

func (b *bencher) table(name string) string { return pgx.Identifier{b.schema, name}.Sanitize() }

func (b *bencher) poolConfig(role string, maxConns int) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(b.o.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = int32(maxConns)
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "riverbench-" + role + ":" + b.schema
	return cfg, nil
}

func (b *bencher) connect(ctx context.Context, role string, maxConns int) (*pgxpool.Pool, error) {
	cfg, err := b.poolConfig(role, maxConns)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	return pool, nil
}

// lsn reads the server's current WAL position.
func (b *bencher) lsn(ctx context.Context) (string, error) {
	var s string
	err := b.admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s)
	return s, err
}

// walBetween is the WAL written between two positions, in bytes.
func (b *bencher) walBetween(ctx context.Context, from, to string) (int64, error) {
	var n int64
	err := b.admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::bigint`, from, to).Scan(&n)
	return n, err
}

func (b *bencher) run(ctx context.Context) (*Report, error) {
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	b.schema = "river_bench_" + hex.EncodeToString(buf)
	level := slog.LevelWarn
	if b.o.verbose {
		level = slog.LevelInfo
	}
	b.logger = slog.New(slog.NewTextHandler(b.log, &slog.HandlerOptions{Level: level}))

	var err error
	if b.admin, err = b.connect(ctx, "admin", 4); err != nil {
		return nil, err
	}
	defer b.admin.Close()
	if _, err := b.admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{b.schema}.Sanitize()); err != nil {
		return nil, fmt.Errorf("creating schema %s: %w", b.schema, err)
	}
	if !b.o.keep {
		defer b.dropSchema()
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(b.admin), &rivermigrate.Config{Schema: b.schema, Logger: b.logger})
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrating schema %s: %w", b.schema, err)
	}
	b.logf("schema %s ready", b.schema)

	rep := &Report{
		System: "River " + riverVersion(), Schema: b.schema, SchemaKept: b.o.keep, Jobs: b.o.jobs,
		Workers: b.o.workers, Concurrency: b.o.concurrency, MaxConns: b.o.maxConns,
		InsertBatch: b.o.insertBatch, InsertFast: b.o.insertFast, Checkpoint: b.o.checkpoint, Verified: true,
	}
	defer func() { rep.ElapsedS = time.Since(b.start).Seconds() }()

	// Inserts, from a client that only inserts (as durable's bench inserts
	// from an engine it never starts).
	inserter, err := river.NewClient(riverpgxv5.New(b.admin), &river.Config{Logger: b.logger, Schema: b.schema})
	if err != nil {
		return nil, err
	}
	lsnInsert, err := b.lsn(ctx)
	if err != nil {
		return nil, err
	}
	b.logf("inserting %d jobs in batches of %d (%s)", b.o.jobs, b.o.insertBatch, map[bool]string{false: "InsertMany", true: "InsertManyFast"}[b.o.insertFast])
	insertStart := time.Now()
	last := insertStart
	params := make([]river.InsertManyParams, 0, b.o.insertBatch)
	for done := 0; done < b.o.jobs; {
		k := min(b.o.insertBatch, b.o.jobs-done)
		params = params[:0]
		for i := range k {
			params = append(params, river.InsertManyParams{Args: noopArgs{Num: done + i + 1}})
		}
		if b.o.insertFast {
			_, err = inserter.InsertManyFast(ctx, params)
		} else {
			_, err = inserter.InsertMany(ctx, params)
		}
		if err != nil {
			return nil, fmt.Errorf("inserting jobs: %w", err)
		}
		done += k
		if time.Since(last) > 5*time.Second {
			b.logf("inserted %d of %d jobs", done, b.o.jobs)
			last = time.Now()
		}
	}
	insertTime := time.Since(insertStart)
	lsnInserted, err := b.lsn(ctx)
	if err != nil {
		return nil, err
	}
	rep.InsertS = insertTime.Seconds()
	rep.InsertPerS = float64(b.o.jobs) / insertTime.Seconds()
	b.logf("inserted %d jobs in %.2fs (%.0f jobs/s)", b.o.jobs, rep.InsertS, rep.InsertPerS)
	if b.o.checkpoint {
		if _, err := b.admin.Exec(ctx, "CHECKPOINT"); err != nil {
			b.logf("no checkpoint before the measured phase (%v); expect more variance", err)
		} else {
			b.logf("checkpoint done")
		}
	}

	// The work: the River CLI's client settings, each client on its own
	// pool; completions counted from the clients' subscriptions, which
	// report a job once the completer has committed it.
	var (
		completed  atomic.Int64
		lastEvent  atomic.Int64 // UnixNano
		allDone    = make(chan struct{})
		doneOnce   sync.Once
		clients    []*river.Client[pgx.Tx]
		unsubs     []func()
		workerPool []*pgxpool.Pool
	)
	defer func() {
		for _, p := range workerPool {
			p.Close()
		}
	}()
	for i := range b.o.workers {
		pool, err := b.connect(ctx, fmt.Sprintf("w%d", i+1), b.o.maxConns)
		if err != nil {
			return nil, err
		}
		workerPool = append(workerPool, pool)
		workers := river.NewWorkers()
		river.AddWorker(workers, &noopWorker{})
		c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
			FetchCooldown:     b.o.fetchCooldown,
			FetchPollInterval: b.o.fetchPollInterval,
			Logger:            b.logger,
			Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: b.o.concurrency}},
			Schema:            b.schema,
			Workers:           workers,
		})
		if err != nil {
			return nil, err
		}
		events, unsub := c.SubscribeConfig(&river.SubscribeConfig{
			ChanSize: b.o.jobs, // never drop one: they are how completion is counted
			Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
		})
		unsubs = append(unsubs, unsub)
		go func() {
			for ev := range events {
				if ev.Kind != river.EventKindJobCompleted {
					b.logf("job %d: unexpected event %s", ev.Job.ID, ev.Kind)
					continue
				}
				lastEvent.Store(time.Now().UnixNano())
				if completed.Add(1) == int64(b.o.jobs) {
					doneOnce.Do(func() { close(allDone) })
				}
			}
		}()
		clients = append(clients, c)
	}
	lsnWork, err := b.lsn(ctx)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	for _, c := range clients {
		if err := c.Start(ctx); err != nil {
			return nil, fmt.Errorf("starting a client: %w", err)
		}
	}
	b.logf("%d client(s) started, %d workers each", len(clients), b.o.concurrency)

	waitErr := b.wait(ctx, allDone, &completed)
	var lsnWorked string
	if waitErr == nil {
		if lsnWorked, err = b.lsn(ctx); err != nil {
			return nil, err
		}
	}
	wall := time.Unix(0, lastEvent.Load()).Sub(started)
	b.logf("%d of %d jobs completed after %.2fs; stopping the clients", completed.Load(), b.o.jobs, time.Since(started).Seconds())
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	for _, c := range clients {
		if err := c.Stop(stopCtx); err != nil {
			b.logf("stopping a client: %v", err)
		}
	}
	cancel()
	for _, u := range unsubs {
		u()
	}
	if waitErr != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// The database's account of the work.
	var total, done int
	var first, lastFinal pgtype.Timestamptz
	err = b.admin.QueryRow(context.WithoutCancel(ctx), `
SELECT count(*), count(*) FILTER (WHERE state = 'completed'), min(attempted_at), max(finalized_at)
FROM `+b.table("river_job")).Scan(&total, &done, &first, &lastFinal)
	if err != nil {
		return nil, fmt.Errorf("reading the jobs: %w", err)
	}
	rep.JobsCompleted = done
	rate := func(secs float64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(done) / secs
	}
	rep.WindowS = lastFinal.Time.Sub(first.Time).Seconds()
	rep.JobsPerS = rate(rep.WindowS)
	if lastEvent.Load() != 0 {
		rep.CommittedPerS = rate(time.Unix(0, lastEvent.Load()).Sub(first.Time).Seconds())
		rep.WallS = wall.Seconds()
		rep.WallPerS = rate(rep.WallS)
	}
	if rep.InsertWALBytes, err = b.walBetween(ctx, lsnInsert, lsnInserted); err != nil {
		return nil, err
	}
	rep.InsertWALPerJob = float64(rep.InsertWALBytes) / float64(b.o.jobs)
	if lsnWorked != "" {
		if rep.WorkWALBytes, err = b.walBetween(ctx, lsnWork, lsnWorked); err != nil {
			return nil, err
		}
		rep.WorkWALPerJob = float64(rep.WorkWALBytes) / float64(b.o.jobs)
		rep.InsertWorkWALPerJob = rep.InsertWALPerJob + rep.WorkWALPerJob
	}
	switch {
	case waitErr != nil:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%v: %d of %d jobs completed", waitErr, done, b.o.jobs)
	case total != b.o.jobs || done != b.o.jobs:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d of %d jobs completed (%d in the table)", done, b.o.jobs, total)
	}
	return rep, nil
}

// wait waits until every job's completion event has arrived. Events are
// not expected to be lost (the subscriptions' buffers hold every job), but
// if none arrives for 5s it asks the database, which has the last word.
func (b *bencher) wait(ctx context.Context, allDone <-chan struct{}, completed *atomic.Int64) error {
	deadline := time.After(b.o.timeout)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	seen := completed.Load()
	for {
		select {
		case <-allDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("timed out after %s", b.o.timeout)
		case <-tick.C:
			now := completed.Load()
			if now != seen {
				seen = now
				continue
			}
			var left int
			err := b.admin.QueryRow(ctx, `SELECT count(*) FROM `+b.table("river_job")+` WHERE finalized_at IS NULL`).Scan(&left)
			if err != nil {
				return fmt.Errorf("counting the jobs left: %w", err)
			}
			if left == 0 {
				b.logf("the database has every job finalized though %d completion events arrived", now)
				return nil
			}
		}
	}
}

func (b *bencher) dropSchema() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{b.schema}.Sanitize()+" CASCADE"); err != nil {
		b.logf("dropping schema %s: %v", b.schema, err)
		return
	}
	b.logf("schema %s dropped", b.schema)
}

func (r *Report) writeText(w io.Writer) {
	var s strings.Builder
	fmt.Fprintf(&s, "riverbench: %d no-op jobs inserted first, then worked (%s)\n", r.Jobs, r.System)
	fmt.Fprintf(&s, "workers: %d client(s), %d workers each, max conns %s; inserts: %s, batches of %d\n",
		r.Workers, r.Concurrency, map[bool]string{true: "pgxpool's default", false: fmt.Sprint(r.MaxConns)}[r.MaxConns == 0],
		map[bool]string{false: "InsertMany", true: "InsertManyFast"}[r.InsertFast], r.InsertBatch)
	fmt.Fprintf(&s, "schema: %s (%s)\n\n", r.Schema, map[bool]string{true: "kept", false: "dropped"}[r.SchemaKept])
	tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', 0)
	row := func(label string, v float64, dec int, unit string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", label, formatNumber(v, dec), unit)
	}
	fmt.Fprintln(tw, "FIGURE\tVALUE\tUNIT")
	row("throughput, first attempted_at → last finalized_at", r.JobsPerS, 0, "jobs/s")
	row("window (database timestamps)", r.WindowS, 3, "s")
	row("  the same to the last completion committed", r.CommittedPerS, 0, "jobs/s")
	row("wall rate, clients started → last completion (the River CLI's)", r.WallPerS, 0, "jobs/s")
	row("insert rate (one inserter)", r.InsertPerS, 0, "jobs/s")
	row("insert time", r.InsertS, 3, "s")
	row("jobs completed", float64(r.JobsCompleted), 0, "jobs")
	row("WAL of the inserts", r.InsertWALPerJob, 0, "B/job")
	row("WAL of the work (checkpoint → last completion)", r.WorkWALPerJob, 0, "B/job")
	row("WAL of inserts and work", r.InsertWorkWALPerJob, 0, "B/job")
	tw.Flush()
	if r.Verified {
		s.WriteString("\nverified: yes\n")
	} else {
		fmt.Fprintf(&s, "\nverified: NO: %s\n", r.Failure)
	}
	fmt.Fprintf(&s, "took %.1fs\n", r.ElapsedS)
	_, _ = io.WriteString(w, s.String())
}

// formatNumber formats v with thousands separators: 23456.7 is "23,457".
func formatNumber(v float64, decimals int) string {
	s := fmt.Sprintf("%.*f", decimals, v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// riverVersion is the River module this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "(unknown version)"
}
