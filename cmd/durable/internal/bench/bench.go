// Package bench measures durable on PostgreSQL: throughput of one-step runs,
// of DAG runs and of durable functions' steps inserted first and then worked, trigger and hand-off
// latency at low load, fairness between tenants, what idle workers cost
// the database, list pages over a million settled runs, a soak at a fixed
// rate with short retention, and the steps that wait: a map step's items,
// runs waiting for events, child runs. It is the engine of `durable bench`.
//
// Every figure that can be is computed from the database's own timestamps
// (tasks.started_at, tasks.finished_at, runs.created_at), which the store
// takes from PostgreSQL's clock, so the bench's own scheduling does not
// distort them. Each scenario runs in its own schema (fresh by default), and
// its runs belong to tenants named after a random tag, so that the analysis
// only sees its own work.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/pgstore"
)

// Scenario names.
const (
	Single   = "single"
	DAG      = "dag"
	Func     = "func"
	Latency  = "latency"
	Fairness = "fairness"
	Idle     = "idle"
	List     = "list"
	Soak     = "soak"
	Keyed    = "concurrency"
	Cron     = "cron"
	Map      = "map"
	Events   = "events"
	Children = "children"
)

// Scenarios lists the scenario names.
var Scenarios = []string{Single, DAG, Func, Latency, Fairness, Idle, List, Soak, Keyed, Cron, Map, Events, Children}

// ThroughputConcurrency is each worker's concurrency in the single and dag
// scenarios unless Options.Concurrency says otherwise. With no-op steps the
// engine's default of 100 leaves the database waiting on commits: more steps
// in flight put more outcomes and claims in each transaction. Measured on a
// 2-core machine, single: 17,600 runs/s at 100, 25,500 at 400 and at 1,000,
// 22,500 at 2,000; dag: 12,200 tasks/s at 100, 13,900 at 400, 15,900 at
// 1,000, 16,600 at 2,000. River's benchmark likewise runs 2,000 workers.
const ThroughputConcurrency = 1000

// Worker modes, as reported in Params.Mode.
const (
	ModeInProcess = "in-process"
	ModeProcesses = "processes"
)

// Options configure a benchmark. Zero values take the defaults documented on
// each field, which depend on the scenario.
type Options struct {
	// DatabaseURL is the PostgreSQL URL. Required.
	DatabaseURL string
	// Schema, when set, is used (created and migrated if needed) and kept
	// instead of a fresh durable_bench_<random> schema. No other workers
	// should serve it while the benchmark runs.
	Schema string
	// Keep keeps the fresh schema (and idle's scratch database) instead of
	// dropping it at the end.
	Keep bool
	// SameDatabase makes idle measure in the database of DatabaseURL. By
	// default (unless Schema is set) it creates a scratch database, when it
	// may, so that the server's per-database counters see no other clients,
	// and has it log every statement (log_statement = 'all', which needs a
	// superuser) for the statement count of the server log.
	SameDatabase bool
	// ServerLog is the server's log file, read by idle to count statements
	// when the logging collector is off. Defaults to Debian's
	// /var/log/postgresql/postgresql-<version>-<cluster>.log; with the
	// collector on, to pg_current_logfile().
	ServerLog string

	// Scenario is one of Scenarios. Required.
	Scenario string
	// Runs is the number of runs: single 100,000, dag 10,000 (100,000
	// tasks), func 10,000 (100,000 steps), latency 500, events 100,000, children 1,000 (parents,
	// each starting workloads.ParentChildren child runs); for fairness,
	// tenant B's backlog (10,000); for map, the items of its one run
	// (10,000, at most dag.MaxItems).
	Runs int
	// Processes, when positive, runs the workers as that many `durable
	// worker` processes (started from WorkerExe); 0 runs them in this
	// process.
	Processes int
	// Workers is the number of in-process engines when Processes is 0:
	// 3 for idle, 1 otherwise.
	Workers int
	// Concurrency is each worker's Config.Concurrency. Defaults to
	// ThroughputConcurrency for single, dag, func, list, soak, concurrency, map,
	// events and children, where it sets how many outcomes and claims
	// share a transaction, and to the engine's default, 100, for the
	// other scenarios.
	Concurrency int
	// ClaimBatch and FinishBatch are each in-process engine's
	// Config.ClaimBatch and Config.FinishBatch; 0 keeps the engine's
	// defaults. `durable worker` has no flags for them, so they need
	// Processes 0.
	ClaimBatch  int
	FinishBatch int
	// Tenants spreads single, dag, func, soak, events and children runs over
	// that many tenants (default 1); for fairness it is the number of
	// tenants with skewed backlogs (default 10), of TenantStep,
	// 2×TenantStep, ... runs (default 100); for map, above 1, Tenants-1
	// other tenants queue Runs bench-noop runs each, competing with the
	// map's items.
	Tenants    int
	TenantStep int
	// InsertBatch is how many runs each RunManyNoWait call inserts.
	// Defaults to 5,000.
	InsertBatch int
	// Keys is the number of distinct concurrency keys of the concurrency
	// scenario (each capped at one running task). Defaults to 1,000.
	Keys int
	// Interval is the pause between two latency runs (each is waited for
	// first). Defaults to 10ms.
	Interval time.Duration
	// Duration is how long idle measures (default 60s), how long soak
	// triggers runs (default 10m), how long cron's workers run (default
	// 150s), and the quiet period over which events samples the waiting
	// workers' memory and goroutines (default 10s).
	Duration time.Duration
	// Senders is how many goroutines send the events scenario's events,
	// each calling SendEvents with SendBatch events at a time. Defaults to
	// DefaultSenders and 1,000.
	Senders   int
	SendBatch int
	// Repeat is how many times list times each kind of page. Defaults to
	// 200.
	Repeat int
	// Rate is soak's trigger rate in runs per second. Defaults to 5,000.
	Rate int
	// Retention is the workers' Config.Retention in soak. Defaults to 1m.
	Retention time.Duration
	// Sample is soak's sampling interval. Defaults to 10s.
	Sample time.Duration
	// Autovacuum says who vacuums the durable tables during soak:
	// VacuumServer (PostgreSQL's autovacuum), VacuumBench (the bench, as
	// autovacuum would) or VacuumAuto, the default: the server's when its
	// autovacuum is on, else the bench's.
	Autovacuum string
	// Settle is how long idle workers run before measuring, at least 2s.
	// Defaults to 35s: an idle engine's poll backs off from 1s to 30s in
	// about 31s.
	Settle time.Duration
	// Timeout bounds the wait for the work to complete. Defaults to 10m.
	Timeout time.Duration
	// WorkerExe is the durable binary started for Processes.
	WorkerExe string
	// WAL, for single, dag and func, measures the server's WAL: the bytes
	// written by the inserts and by the work, per run (and per task, or
	// per step), and with
	// pg_walinspect (created in the bench's schema when the database has
	// none; it needs a superuser or pg_read_server_files) their attribution
	// by operation, relation and record type, full-page images apart.
	WAL bool
	// Log receives progress lines and the workers' logs. Defaults to
	// io.Discard.
	Log io.Writer
}

// schemaRE is pgstore's rule for schema names.
var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ErrInvalidOptions matches the errors Run returns for options it cannot use.
var ErrInvalidOptions = errors.New("invalid options")

func (o *Options) setDefaults() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch o.Scenario {
	case Single, DAG, Func, Latency, Fairness, Idle, List, Soak, Keyed, Cron, Map, Events, Children:
	case "":
		return bad("a scenario is required (%s)", strings.Join(Scenarios, ", "))
	default:
		return bad("unknown scenario %q (want %s)", o.Scenario, strings.Join(Scenarios, ", "))
	}
	if o.DatabaseURL == "" {
		return bad("a database URL is required")
	}
	for name, v := range map[string]int{
		"runs": o.Runs, "processes": o.Processes, "workers": o.Workers, "concurrency": o.Concurrency,
		"claim batch": o.ClaimBatch, "finish batch": o.FinishBatch, "tenants": o.Tenants,
		"tenant step": o.TenantStep, "insert batch": o.InsertBatch, "repeat": o.Repeat, "rate": o.Rate,
		"senders": o.Senders, "send batch": o.SendBatch,
	} {
		if v < 0 {
			return bad("%s must not be negative", name)
		}
	}
	for name, v := range map[string]time.Duration{
		"interval": o.Interval, "duration": o.Duration, "settle": o.Settle, "timeout": o.Timeout,
		"retention": o.Retention, "sample": o.Sample,
	} {
		if v < 0 {
			return bad("%s must not be negative", name)
		}
	}
	if o.Schema != "" && !schemaRE.MatchString(o.Schema) {
		return bad("schema %q: use 1-63 lowercase letters, digits or underscores, not starting with a digit", o.Schema)
	}
	if o.Runs == 0 {
		o.Runs = map[string]int{Single: 100_000, DAG: 10_000, Func: 10_000, Latency: 500, Fairness: 10_000, List: 1_000_000, Keyed: 100_000, Cron: 10_000,
			Map: 10_000, Events: 100_000, Children: 1_000}[o.Scenario]
	}
	if o.Scenario == Map && o.Runs > dag.MaxItems {
		return bad("map: %d items: a map step fans out to at most %d", o.Runs, dag.MaxItems)
	}
	if o.Processes > 0 && (o.Scenario == List || o.Scenario == Soak) {
		return bad("%s needs in-process workers (processes 0): %s", o.Scenario, map[string]string{
			List: "its workers serve workflows of its own (failing and sleeping runs)",
			Soak: "it sets the workers' Config.Retention, and durable worker has no flag for it",
		}[o.Scenario])
	}
	if o.WAL && o.Scenario != Single && o.Scenario != DAG && o.Scenario != Func {
		return bad("wal: single, dag and func only, not %s", o.Scenario)
	}
	if o.Processes > 0 {
		if o.Workers != 0 && o.Workers != o.Processes {
			return bad("workers (%d) and processes (%d) disagree: with processes, each process is one worker", o.Workers, o.Processes)
		}
		if o.ClaimBatch != 0 || o.FinishBatch != 0 {
			return bad("claim batch and finish batch need in-process workers (processes 0): durable worker has no flags for them")
		}
		if o.WorkerExe == "" {
			return bad("processes need the durable executable")
		}
		o.Workers = o.Processes
	}
	if o.Workers == 0 {
		o.Workers = 1
		if o.Scenario == Idle {
			o.Workers = 3
		}
	}
	if o.Concurrency == 0 {
		o.Concurrency = 100
		switch o.Scenario {
		case Single, DAG, Func, List, Soak, Keyed, Map, Events, Children:
			o.Concurrency = ThroughputConcurrency
		}
	}
	if o.Tenants == 0 {
		o.Tenants = 1
		switch o.Scenario {
		case Fairness:
			o.Tenants = 10
		case List:
			o.Tenants = 100
		}
	}
	if o.Keys == 0 {
		o.Keys = 1000
	}
	if o.TenantStep == 0 {
		o.TenantStep = 100
	}
	if o.InsertBatch == 0 {
		o.InsertBatch = 5000
	}
	if o.Interval == 0 {
		o.Interval = 10 * time.Millisecond
	}
	if o.Duration == 0 {
		o.Duration = 60 * time.Second
		switch o.Scenario {
		case Soak:
			o.Duration = 10 * time.Minute
		case Cron:
			o.Duration = 150 * time.Second
		case Events:
			o.Duration = 10 * time.Second
		}
	}
	if o.Senders == 0 {
		o.Senders = DefaultSenders
	}
	if o.SendBatch == 0 {
		o.SendBatch = 1000
	}
	if o.Repeat == 0 {
		o.Repeat = 200
	}
	if o.Rate == 0 {
		o.Rate = 5000
	}
	if o.Retention == 0 {
		o.Retention = time.Minute
	}
	if o.Sample == 0 {
		o.Sample = 10 * time.Second
	}
	switch o.Autovacuum {
	case "":
		o.Autovacuum = VacuumAuto
	case VacuumAuto, VacuumServer, VacuumBench:
	default:
		return bad("autovacuum %q: want %s, %s or %s", o.Autovacuum, VacuumAuto, VacuumServer, VacuumBench)
	}
	if o.Scenario == Soak {
		if o.Sample < 100*time.Millisecond {
			return bad("sample %s: at least 100ms", o.Sample)
		}
		if o.Sample > o.Duration {
			return bad("sample %s is longer than the duration %s", o.Sample, o.Duration)
		}
		// A sample counts the runs that settled in its interval, read
		// sampleLag after it ends: they must not have been pruned by then.
		if o.Sample+sampleLag > o.Retention {
			return bad("retention %s must be at least the sample interval %s plus %s, or runs are pruned before they are counted",
				o.Retention, o.Sample, sampleLag)
		}
	}
	if o.Scenario == Idle {
		if o.Settle == 0 {
			o.Settle = 35 * time.Second
		}
		o.Settle = max(o.Settle, minSettle)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

func (o *Options) params() Params {
	p := Params{
		Mode: ModeInProcess, Workers: o.Workers, Concurrency: o.Concurrency,
		ClaimBatch: o.ClaimBatch, FinishBatch: o.FinishBatch,
	}
	if o.Processes > 0 {
		p.Mode = ModeProcesses
	}
	switch o.Scenario {
	case Single, Keyed:
		p.Runs, p.Tasks, p.Tenants, p.InsertBatch = o.Runs, o.Runs, o.Tenants, o.InsertBatch
	case DAG:
		p.Runs, p.Tasks, p.Tenants, p.InsertBatch = o.Runs, 10*o.Runs, o.Tenants, o.InsertBatch
	case Func:
		// Each run: its body and a record per step, all task rows.
		p.Runs, p.Steps, p.Tasks, p.Tenants, p.InsertBatch = o.Runs, workloads.FuncSteps*o.Runs,
			(1+workloads.FuncSteps)*o.Runs, o.Tenants, o.InsertBatch
	case Latency:
		p.Runs, p.Tasks, p.IntervalMS = o.Runs, 2*o.Runs, Millis(o.Interval)
	case Fairness:
		p.Runs, p.Tenants, p.TenantStep, p.InsertBatch = o.Runs, o.Tenants, o.TenantStep, o.InsertBatch
	case Idle:
		p.DurationS, p.SettleS = o.Duration.Seconds(), o.Settle.Seconds()
	case List:
		p.Runs, p.Tenants, p.InsertBatch, p.Repeat = o.Runs, o.Tenants, o.InsertBatch, o.Repeat
	case Soak:
		p.Tenants, p.DurationS, p.Rate = o.Tenants, o.Duration.Seconds(), o.Rate
		p.RetentionS, p.SampleS, p.Autovacuum = o.Retention.Seconds(), o.Sample.Seconds(), o.Autovacuum
	case Map:
		// list, the map step, its items and join.
		p.Runs, p.Items, p.Tasks, p.Tenants = 1, o.Runs, o.Runs+3, o.Tenants
		if o.Tenants > 1 {
			p.Runs += (o.Tenants - 1) * o.Runs
			p.Tasks += (o.Tenants - 1) * o.Runs
			p.InsertBatch = o.InsertBatch
		}
	case Events:
		p.Runs, p.Tasks, p.Tenants, p.InsertBatch = o.Runs, o.Runs, o.Tenants, o.InsertBatch
		p.DurationS, p.Senders, p.SendBatch = o.Duration.Seconds(), o.Senders, o.SendBatch
	case Children:
		// Each parent: its child steps and join; each child: one step.
		p.Runs, p.Children, p.Tasks, p.Tenants, p.InsertBatch = o.Runs, o.Runs*workloads.ParentChildren,
			o.Runs*(2*workloads.ParentChildren+1), o.Tenants, o.InsertBatch
	}
	return p
}

// Run runs a scenario and returns its report. A report whose work could not
// be verified (runs left unfinished) comes with a nil error and
// Verified false; errors are for everything else (bad options, a database
// that cannot be reached).
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	b := &bencher{o: o, start: start}
	if err := b.setup(ctx); err != nil {
		b.teardown()
		return nil, err
	}
	defer b.teardown()

	rep := &Report{
		Scenario: o.Scenario, Schema: b.schema, SchemaKept: !b.fresh || o.Keep,
		Database: b.scratchDB, Params: o.params(), Verified: true, Notes: b.notes,
	}
	var err error
	switch o.Scenario {
	case Single, DAG, Func:
		err = b.throughput(ctx, rep)
	case Latency:
		err = b.latency(ctx, rep)
	case Fairness:
		err = b.fairness(ctx, rep)
	case Idle:
		err = b.idle(ctx, rep)
	case Keyed:
		err = b.keyed(ctx, rep)
	case Cron:
		err = b.cron(ctx, rep)
	case List:
		err = b.list(ctx, rep)
	case Soak:
		err = b.soak(ctx, rep)
	case Map:
		err = b.mapStep(ctx, rep)
	case Events:
		err = b.events(ctx, rep)
	case Children:
		err = b.children(ctx, rep)
	}
	if err != nil {
		return nil, err
	}
	rep.ElapsedSeconds = time.Since(start).Seconds()
	return rep, nil
}

// bencher holds what a scenario shares: the schema, a monitoring pool whose
// statements are counted (so that idle can subtract them), and a client
// engine that triggers runs and is never started.
type bencher struct {
	o     Options
	start time.Time

	tag       string // random; names this invocation's tenants and workers
	url       string // DatabaseURL, or the scratch database's
	scratchDB string // idle's scratch database, if created
	logAll    bool   // log_statement = 'all' was set on the scratch database
	pids      *sessions
	schema    string
	fresh     bool
	table     func(name string) string

	monitor  *pgxpool.Pool
	monCount Counter
	// stats reads idle's server counters: the monitor, or with a scratch
	// database a pool on the original one, so that reading them does not
	// count; dbName is the database measured.
	stats    *pgxpool.Pool
	dbName   string
	clientDB *pgxpool.Pool
	client   *durable.Engine
	// clientStore is client's store.
	clientStore *pgstore.Store
	set         *workloads.Set
	logger      *slog.Logger
	notes       []string // for the report, from setup
	logMu       sync.Mutex
}

func (b *bencher) logf(format string, args ...any) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	fmt.Fprintf(b.o.Log, "bench %6.1fs: %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

// lockedWriter is o.Log made safe for concurrent writers (workers' output).
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *bencher) logOut() io.Writer { return lockedWriter{&b.logMu, b.o.Log} }

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf) // never fails since Go 1.24
	return hex.EncodeToString(buf)
}

// appName is the application_name of the bench's connections for a role;
// every connection of this benchmark has a name ending in ":<schema>"
// (pgstore names its listener and elector connections that way too).
func (b *bencher) appName(role string) string {
	return "durable-bench-" + role + ":" + b.schema
}

// poolConfig parses the URL into a pool config named for role.
func (b *bencher) poolConfig(role string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		return nil, fmt.Errorf("%w: database URL: %w", ErrInvalidOptions, err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = b.appName(role)
	return cfg, nil
}

func connectPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
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

func (b *bencher) setup(ctx context.Context) error {
	b.tag = randomHex(4)
	b.url = b.o.DatabaseURL
	b.pids = newSessions()
	if b.o.Scenario == Idle && !b.o.SameDatabase && b.o.Schema == "" {
		if err := b.createScratchDB(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.notes = append(b.notes, fmt.Sprintf("could not create a scratch database (%v): measured in the given one", err))
		}
	}
	b.schema, b.fresh = b.o.Schema, b.o.Schema == ""
	if b.fresh {
		b.schema = "durable_bench_" + b.tag
	}
	b.table = func(name string) string { return pgx.Identifier{b.schema, name}.Sanitize() }
	b.logger = slog.New(slog.NewTextHandler(b.logOut(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.set = workloads.New(workloads.Options{})

	cfg, err := b.poolConfig("monitor", 4)
	if err != nil {
		return err
	}
	b.monCount.Instrument(cfg)
	if b.monitor, err = connectPool(ctx, cfg); err != nil {
		return err
	}
	if _, err := pgstore.Migrate(ctx, b.monitor, &pgstore.MigrateConfig{Schema: b.schema}); err != nil {
		if b.fresh {
			b.dropSchema() // the migration may have created it
		}
		return fmt.Errorf("migrating schema %s: %w", b.schema, err)
	}
	b.logf("schema %s ready", b.schema)
	b.stats = b.monitor
	if err := b.monitor.QueryRow(ctx, `SELECT current_database()`).Scan(&b.dbName); err != nil {
		return err
	}
	if b.scratchDB != "" {
		scfg, err := pgxpool.ParseConfig(b.o.DatabaseURL)
		if err != nil {
			return fmt.Errorf("%w: database URL: %w", ErrInvalidOptions, err)
		}
		scfg.MaxConns = 2
		if scfg.ConnConfig.RuntimeParams == nil {
			scfg.ConnConfig.RuntimeParams = map[string]string{}
		}
		scfg.ConnConfig.RuntimeParams["application_name"] = b.appName("stats")
		if b.stats, err = connectPool(ctx, scfg); err != nil {
			return err
		}
	}

	if cfg, err = b.poolConfig("client", 8); err != nil {
		return err
	}
	if b.clientDB, err = connectPool(ctx, cfg); err != nil {
		return err
	}
	s, err := pgstore.New(b.clientDB, &pgstore.Config{Schema: b.schema})
	if err != nil {
		return err
	}
	b.clientStore = s
	b.client, err = durable.New(s, durable.Config{WorkerID: "bench-" + b.tag + "-client", Logger: b.logger})
	return err
}

func (b *bencher) teardown() {
	if b.clientDB != nil {
		b.clientDB.Close()
	}
	if b.stats != nil && b.stats != b.monitor {
		b.stats.Close()
	}
	if b.monitor != nil {
		if b.fresh && !b.o.Keep && b.scratchDB == "" {
			b.dropSchema()
		}
		b.monitor.Close()
	}
	if b.scratchDB != "" {
		if b.logAll {
			b.resetLogStatement()
		}
		if !b.o.Keep {
			b.dropScratchDB()
		}
	}
}

// createScratchDB creates an empty database for idle, on the server of
// DatabaseURL, and points b.url at it.
func (b *bencher) createScratchDB(ctx context.Context) error {
	name := "durable_bench_" + b.tag
	u, err := withDatabase(b.o.DatabaseURL, name)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, b.o.DatabaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// template0 never has connections, which would make CREATE DATABASE fail.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return err
	}
	b.scratchDB, b.url = name, u
	b.logf("scratch database %s created", name)
	// Before anyone connects: sessions read the setting when they start.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET log_statement = 'all'"); err != nil {
		b.notes = append(b.notes, fmt.Sprintf("could not have the scratch database log every statement (%v): "+
			"the statement count cannot come from the server log", err))
		return nil
	}
	b.logAll = true
	return nil
}

// resetLogStatement undoes createScratchDB's log_statement setting.
func (b *bencher) resetLogStatement() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.o.DatabaseURL)
	if err != nil {
		b.logf("resetting log_statement of %s: %v", b.scratchDB, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{b.scratchDB}.Sanitize()+" RESET log_statement"); err != nil {
		b.logf("resetting log_statement of %s: %v", b.scratchDB, err)
	}
}

func (b *bencher) dropScratchDB() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.o.DatabaseURL)
	if err != nil {
		b.logf("dropping scratch database %s: %v", b.scratchDB, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{b.scratchDB}.Sanitize()+" WITH (FORCE)"); err != nil {
		b.logf("dropping scratch database %s: %v", b.scratchDB, err)
		return
	}
	b.logf("scratch database %s dropped", b.scratchDB)
}

// withDatabase returns the connection string u with its database replaced.
func withDatabase(u, db string) (string, error) {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		parsed, err := url.Parse(u)
		if err != nil {
			return "", err
		}
		parsed.Path = "/" + db
		parsed.RawPath = ""
		return parsed.String(), nil
	}
	return u + " dbname=" + db, nil // keyword/value form: the last setting wins
}

func (b *bencher) dropSchema() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.monitor.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{b.schema}.Sanitize()+" CASCADE"); err != nil {
		b.logf("dropping schema %s: %v", b.schema, err)
		return
	}
	b.logf("schema %s dropped", b.schema)
}

// tenant names a tenant of this invocation; tenants(prefix) is the LIKE
// pattern matching the tenants whose name starts with prefix.
func (b *bencher) tenant(name string) string { return b.tag + "-" + name }

func (b *bencher) tenants(prefix string) string { return b.tag + "-" + prefix + "%" }

// workerRole is the role in appName of worker id's pool: "w1" for
// "bench-<tag>-w1".
func (b *bencher) workerRole(id string) string {
	return strings.TrimPrefix(id, "bench-"+b.tag+"-")
}

// workerURL is the database URL for worker process id, naming its pool's
// connections like an in-process engine's (the listener and elector
// connections are named by pgstore).
func (b *bencher) workerURL(id string) string {
	name := b.appName(b.workerRole(id))
	u := b.url
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		if parsed, err := url.Parse(u); err == nil {
			q := parsed.Query()
			q.Set("application_name", name)
			parsed.RawQuery = q.Encode()
			return parsed.String()
		}
		return u
	}
	return u + " application_name='" + name + "'" // keyword/value form
}
