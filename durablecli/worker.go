package durablecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
	"github.com/effectivelabs/durable/pgstore"
)

const workerUsage = `Usage: {name} worker --database-url URL [flags]

Runs an engine that serves the workflows of this program (listed below)
until SIGTERM or SIGINT, then stops claiming and lets running steps finish
for up to --drain-timeout. A second SIGTERM or SIGINT during that drain
exits at once, with status 130, leaving the running steps to be rescued
once their heartbeats go stale.

The schema is migrated up first if needed: durable's migrations, then
this program's own (under the same lock, so workers starting together
apply each once); with --no-migrate it is only checked, so that a role
without DDL rights can serve a schema migrated by "{name} migrate up":
the worker then exits with status 1 and says so if the schema is missing
or older than this binary, or lacks one of the program's own migrations.

With --metrics-addr (e.g. :9464) the worker serves its metrics to
Prometheus at http://ADDR/metrics: steps started, completed, failed,
retried, rescued and released (durable_steps_completed_total, ...), runs
settled by status, step, queue-wait and store-call durations, the
queue depth the leader samples every 30s, and the storage of durable's
tables that the leader reads when scraped (durable_table_dead_rows,
durable_table_live_rows, durable_table_size_bytes and
durable_table_attention, by table; see docs/observability.md).
Without it the worker records no metrics.

Behind a connection pooler in transaction mode (PgBouncer's pool_mode =
transaction, the pooled URL of a managed PostgreSQL) pass --pooler
transaction, and the direct URL as --direct-database-url for LISTEN and
the leader election. Without a direct URL the workers do not listen: they
claim new work and fire due timers within --poll-interval by polling (see
docs/operating.md, "Connection poolers").

Settled runs are kept for --retention (default 168h, 7 days): the leader
among the workers deletes the runs that settled longer ago, with their
steps and events, in small batches. --retention 0 keeps every run; "{name}
runs prune" deletes old runs on demand.

Exit status: 0 stopped (drained, or the drain timed out; or stopped by
SIGTERM or SIGINT at any moment of its start: while it connects, migrates
or registers, the migration's transaction rolled back), 1 failed (could
not connect or start), 2 bad flags, 130 stopped at once by a second signal.

Flags:
`

// errSecondSignal is returned by runWorker when a second signal ended the
// drain: running steps were abandoned, nothing was closed.
var errSecondSignal = errors.New("second signal during the drain")

// workerOptions are the flags of "worker".
type workerOptions struct {
	db                *cliflag.DB
	workerID          string
	concurrency       int
	drainTimeout      time.Duration
	heartbeatInterval time.Duration
	deadAfter         time.Duration
	pollInterval      time.Duration
	tenantLimit       int
	retention         time.Duration
	leaderLease       time.Duration
	noMigrate         bool
	logFormat         string
	logLevel          string
	metricsAddr       string
}

func (c *cli) workerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o workerOptions
	fs := c.newWorkerFlags(&o, stderr)
	wf := c.workflowFlags("worker", fs)
	if code := c.parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	prefix := c.name + " worker"
	if o.retention < 0 {
		fmt.Fprintf(stderr, "%s: --retention must not be negative (0 keeps every run), got %s\n", prefix, o.retention)
		return exitUsage
	}
	if o.leaderLease < 100*time.Millisecond {
		fmt.Fprintf(stderr, "%s: --leader-lease must be at least 100ms, got %s\n", prefix, o.leaderLease)
		return exitUsage
	}
	logger, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitUsage
	}
	if o.db.URL() == "" {
		fmt.Fprintf(stderr, "%s: %s\n", prefix, missingURL)
		return exitUsage
	}
	if err := checkValues(opt(dag.WorkerRule, "--worker-id", o.workerID)); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitUsage
	}
	err = c.runWorker(ctx, &o, wf, logger)
	var le *loadErr
	switch {
	case errors.Is(err, errSecondSignal):
		return exitSecondSignal
	case errors.As(err, &le) && le.usage:
		fmt.Fprintf(stderr, "%s: %v\n", prefix, le.err)
		return exitUsage
	case err != nil && ctx.Err() != nil:
		logger.Info(prefix+": stopped by a signal before serving", "during", err.Error())
		return 0
	case err != nil:
		logger.Error(prefix + ": " + err.Error())
		return 1
	}
	return 0
}

// newWorkerFlags defines the flags of "worker" into o.
func (c *cli) newWorkerFlags(o *workerOptions, stderr io.Writer) *flag.FlagSet {
	fs := c.flagSet("worker", c.withWorkflows(workerUsage, false), stderr)
	o.db = c.dbFlags(fs)
	o.db.RegisterDirect(fs)
	fs.StringVar(&o.workerID, "worker-id", "", "unique id of this worker (default <hostname>-<pid>-<random>)")
	fs.IntVar(&o.concurrency, "concurrency", 100, "most steps running at once")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "how long running steps may finish after SIGTERM before they are cancelled")
	fs.DurationVar(&o.heartbeatInterval, "heartbeat-interval", 5*time.Second, "how often running steps are reported alive")
	fs.DurationVar(&o.deadAfter, "dead-after", 30*time.Second, "missed-heartbeat time after which a worker's steps are rescued")
	fs.DurationVar(&o.pollInterval, "poll-interval", time.Second, "fallback polling interval when no notification arrives")
	fs.IntVar(&o.tenantLimit, "tenant-limit", 0, "most running steps per tenant across all workers (0: no cap)")
	fs.DurationVar(&o.retention, "retention", durable.DefaultRetention, "how long settled runs are kept before the leader deletes them (0: keep every run)")
	fs.DurationVar(&o.leaderLease, "leader-lease", pgstore.DefaultLeaderLease, "how long the leader's lease lasts unrenewed: a frozen or cut-off leader's duties (timers, schedules, rescues) pass to another worker within 1.5× it; use the same on every worker of a schema (at least 100ms)")
	fs.BoolVar(&o.noMigrate, "no-migrate", false, "do not migrate the schema at start (for roles without DDL rights); fail if it is missing or old")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "address to serve Prometheus metrics on at /metrics, e.g. :9464 (default: no metrics)")
	return fs
}

// checkAppMigrations returns an error naming the program's own
// migrations that the schema lacks, for a worker that does not migrate.
func (c *cli) checkAppMigrations(ctx context.Context, pool *pgxpool.Pool, db *cliflag.DB) error {
	if len(db.App) == 0 {
		return nil
	}
	states, err := pgstore.AppMigrationStatus(ctx, pool, db.Schema, db.App)
	if err != nil {
		return err
	}
	var missing []string
	for _, s := range states {
		if !s.Applied {
			missing = append(missing, fmt.Sprintf("%03d_%s", s.Version, s.Name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("schema %s lacks this program's own migrations %s (--no-migrate does not apply them): run `%s migrate up`",
			db.Schema, strings.Join(missing, ", "), c.name)
	}
	return nil
}

// config is the engine's configuration for the flags.
func (o *workerOptions) config(logger *slog.Logger) durable.Config {
	retention := o.retention
	if retention == 0 {
		retention = durable.KeepForever
	}
	return durable.Config{
		WorkerID: o.workerID, Concurrency: o.concurrency, HeartbeatInterval: o.heartbeatInterval,
		DeadAfter: o.deadAfter, PollInterval: o.pollInterval, TenantLimit: o.tenantLimit,
		Retention: retention, Logger: logger,
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func (c *cli) runWorker(ctx context.Context, o *workerOptions, wf *workflowFlags, logger *slog.Logger) error {
	prefix := c.name + " worker"
	pool, err := o.db.NewPool(int32(min(o.concurrency/4+4, 32)))
	if err != nil {
		return err
	}
	closePool := true
	defer func() {
		if closePool { // not after a second signal: Close waits for running steps
			pool.Close()
		}
	}()
	set, le := c.workflows(ctx, wf, pool, o.db.Schema)
	if le != nil {
		return le
	}
	if err := o.db.Ping(ctx, pool); err != nil {
		return err
	}
	if o.noMigrate {
		if err := c.checkAppMigrations(ctx, pool, o.db); err != nil {
			return err
		}
	} else if err := o.db.Migrate(ctx, pool); err != nil {
		return err
	}
	scfg, err := o.db.StoreConfig()
	if err != nil {
		return err
	}
	scfg.Logger = logger
	scfg.LeaderLease = o.leaderLease
	s, err := pgstore.New(pool, scfg)
	if err != nil {
		return err
	}

	cfg := o.config(logger)
	if o.metricsAddr != "" {
		m, err := startMetrics(o.metricsAddr, logger, prefix)
		if err != nil {
			return err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := m.stop(ctx); err != nil {
				logger.Warn(prefix+": stopping the metrics server", "error", err)
			}
		}()
		cfg.MeterProvider = m.provider
	}
	e, err := durable.New(s, c.engineConfig(cfg))
	if err != nil {
		return err
	}
	if err := e.Register(set.defs...); err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return fmt.Errorf("cannot start: %w", err)
	}
	logger.Info(prefix+": serving", "schema", o.db.Schema, "worker", e.WorkerID(),
		"workflows", strings.Join(set.names(), ","))
	<-ctx.Done()

	// The first signal was taken by Main's signal context; signals from now
	// on come here. A signal between ctx.Done and Notify would be lost, but
	// the window is too short for a person to press Ctrl-C twice.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	logger.Info(prefix+": draining; a second SIGTERM or SIGINT exits at once", "timeout", o.drainTimeout)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.drainTimeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(stopCtx) }()
	select {
	case err = <-stopped:
	case sig := <-again:
		logger.Warn(prefix+": second signal during the drain; exiting at once, running steps will be rescued", "signal", sig.String())
		closePool = false
		return errSecondSignal
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			logger.Warn(prefix + ": drain timeout reached; running steps were cancelled and given back")
			return nil
		}
		return err
	}
	logger.Info(prefix + ": stopped")
	return nil
}
