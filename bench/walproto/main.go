// Command walproto measures, in raw SQL on PostgreSQL, the WAL that the
// engine's data model writes per run (issue #32), and what alternative
// designs of the queue and of tasks would write for the same operations:
// see README.md. It does not use the engine: it replays the shapes of the
// engine's statements (pgstore/sql) against tables built per design in
// schemas walproto_<design>, and reads the WAL back with pg_walinspect.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

type config struct {
	url                               string
	designs, scenarios                []string
	runs, dagRuns                     int
	insertBatch, claimBatch           int
	finishBatch, window               int
	compress                          string
	keep                              bool
	jsonOut                           string
	quiet                             time.Duration
	quietBytes                        int64
	checkRef                          string
	tag                               string
	explain                           bool
	maxForeignShare                   float64
	inspectSchema                     string
	workflows                         []string
	workflowName, version, stepTenant string
	shapeID                           [16]byte
	keepInspect, verbose              bool
}

func main() {
	var c config
	var designs, scenarios string
	url := os.Getenv("DURABLE_TEST_DATABASE_URL")
	if v := os.Getenv("U"); v != "" {
		url = v
	}
	flag.StringVar(&c.url, "database-url", url, "PostgreSQL URL (default $U or $DURABLE_TEST_DATABASE_URL); needs a superuser (CHECKPOINT, pg_walinspect, a replication slot)")
	flag.StringVar(&designs, "designs", "d0,d1,d2,d3", "designs to measure: d0 (today), d1, d2, d3")
	flag.StringVar(&scenarios, "scenarios", "single,dag", "single (one-step runs) and/or dag (root -> 8 -> join)")
	flag.IntVar(&c.runs, "runs", 100000, "single: runs")
	flag.IntVar(&c.dagRuns, "dag-runs", 10000, "dag: runs (10 tasks each)")
	flag.IntVar(&c.insertBatch, "insert-batch", 5000, "runs per create transaction (durable bench --insert-batch)")
	flag.IntVar(&c.claimBatch, "claim-batch", 200, "tasks per claim (the engine's ClaimBatch under the bench: min(Concurrency 1000, 200))")
	flag.IntVar(&c.finishBatch, "finish-batch", 250, "outcomes per finish transaction (the completer's batches; up to FinishBatch 500)")
	flag.IntVar(&c.window, "window", 1000, "claimed tasks in flight before a finish (the worker's Concurrency)")
	flag.StringVar(&c.compress, "wal-compression", "", "set wal_compression in the measuring sessions (lz4, pglz, zstd); empty: the server's")
	flag.BoolVar(&c.keep, "keep", false, "keep the design schemas")
	flag.StringVar(&c.jsonOut, "json", "", "append each measurement as a JSON line to this file")
	flag.DurationVar(&c.quiet, "quiet", 3*time.Second, "wait for this long a period in which the server writes under -quiet-bytes of WAL before each measurement (0: do not wait)")
	flag.Int64Var(&c.quietBytes, "quiet-bytes", 64<<10, "see -quiet")
	flag.StringVar(&c.checkRef, "check-ref", "", "compare d0's tables with those of this migrated schema (durable migrate up --schema NAME), then exit")
	flag.BoolVar(&c.explain, "explain", false, "print the plans of the claim statements on a small queue, then exit")
	flag.Float64Var(&c.maxForeignShare, "max-foreign", 0.02, "fail a measurement whose phases hold more than this share of other sessions' WAL records")
	flag.StringVar(&c.inspectSchema, "inspect-schema", "walproto_inspect", "schema to create pg_walinspect in when the database has none")
	flag.BoolVar(&c.keepInspect, "keep-inspect", false, "keep pg_walinspect's schema if this program created it")
	flag.BoolVar(&c.verbose, "v", false, "print every relation and record type")
	reportPath := flag.String("report", "", "print README.md's tables from this file of measurements (-json), then exit")
	flag.Parse()
	if *reportPath != "" {
		if err := report(*reportPath, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "walproto:", err)
			os.Exit(1)
		}
		return
	}
	c.designs = strings.Split(designs, ",")
	c.scenarios = strings.Split(scenarios, ",")
	// What durable bench's rows hold (read from a bench schema): its tag
	// names the tenant (8 hex digits) and the worker; versions are 12 hex
	// digits; the worker serves the 14 workflows of the bench's set, which
	// its frontier row records at each claim.
	c.tag = "5a1e2b3c"
	c.stepTenant = c.tag + "-t0"
	c.version = "94efee09d0a8"
	c.workflows = []string{"bench-chain", "bench-child", "bench-dag", "bench-func", "bench-keyed", "bench-map", "bench-noop",
		"bench-parent", "bench-wait", "chaos", "chaos-child", "crash-fn", "crash-fn-child", "order-processing"}
	c.shapeID = [16]byte{0xa7, 0x7a, 0x4b, 0x23, 0x66, 0x62, 0x02, 0x8e, 0x71, 0x1d, 0x34, 0x5d, 0x00, 0x66, 0x65, 0x4c}
	if c.url == "" {
		fmt.Fprintln(os.Stderr, "walproto: no -database-url")
		os.Exit(2)
	}
	ctx := context.Background()
	if err := run(ctx, &c); err != nil {
		fmt.Fprintln(os.Stderr, "walproto:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c *config) error {
	mon, err := connect(ctx, c, "walproto-monitor", "")
	if err != nil {
		return err
	}
	defer mon.Close(ctx)
	if c.checkRef != "" {
		return checkRef(ctx, c, mon)
	}
	if c.explain {
		return explainClaims(ctx, c, mon)
	}
	created, err := ensureInspect(ctx, c, mon)
	if err != nil {
		return err
	}
	if created && !c.keepInspect {
		defer mon.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+pgx.Identifier{c.inspectSchema}.Sanitize()+" CASCADE")
	}
	var failed []string
	for _, sc := range c.scenarios {
		for _, name := range c.designs {
			d, ok := designByName(name)
			if !ok {
				return fmt.Errorf("no design %q", name)
			}
			res, err := measure(ctx, c, mon, d, sc)
			if err != nil {
				return fmt.Errorf("%s %s: %w", d.name, sc, err)
			}
			res.print(os.Stdout, c.verbose)
			if c.jsonOut != "" {
				if err := appendJSON(c.jsonOut, res); err != nil {
					return err
				}
			}
			if res.Problem != "" {
				failed = append(failed, fmt.Sprintf("%s %s: %s", d.name, sc, res.Problem))
			}
		}
	}
	if len(failed) > 0 {
		return errors.New("measurements to repeat:\n  " + strings.Join(failed, "\n  "))
	}
	return nil
}

func appendJSON(path string, res *result) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return err
}

// connect opens a session with the planner settings the engine's
// statements run under (pgstore/sql/session.sql genericPlans, less the
// generic plans) and, when asked, wal_compression.
func connect(ctx context.Context, c *config, app, compress string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(c.url)
	if err != nil {
		return nil, err
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, `SELECT set_config('enable_seqscan', 'off', false), set_config('jit', 'off', false),
  set_config('max_parallel_workers_per_gather', '0', false), set_config('enable_hashjoin', 'off', false),
  set_config('enable_mergejoin', 'off', false)`)
	if err == nil && compress != "" {
		_, err = conn.Exec(ctx, "SET wal_compression = "+compress)
	}
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// ensureInspect finds pg_walinspect, or creates it in c.inspectSchema
// (reporting whether it did).
func ensureInspect(ctx context.Context, c *config, mon *pgx.Conn) (bool, error) {
	var schema string
	err := mon.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_walinspect'`).Scan(&schema)
	if err == nil {
		c.inspectSchema = schema
		return false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, err
	}
	s := pgx.Identifier{c.inspectSchema}.Sanitize()
	if _, err := mon.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s+"; CREATE EXTENSION pg_walinspect SCHEMA "+s); err != nil {
		return false, fmt.Errorf("creating pg_walinspect: %w", err)
	}
	return true, nil
}
