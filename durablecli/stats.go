package durablecli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

const statsUsage = `Usage: {name} stats --database-url URL [flags]

Prints two tables, by workflow, version and tenant. Queues: the tasks ready
to be claimed, waiting for a timer (retry backoffs and sleeps) and running,
and how long the oldest ready task has waited. Runs: the runs in flight, by
status, and the runs that settled within --window (counted by the minute
they settled in, by workflow only: their VERSION is "-"), by status. The
VERSION is the version of the workflow the runs are pinned to ("-" for runs
started before versions; "{name} workflows" lists the versions). It reads
the queues, the runs in flight and per-minute counts, never the history of
settled runs, so it is cheap enough to poll. Ages are taken on the
database's clock. The schema is checked, never migrated.

With --json, one JSON object, the one GET /api/v1/stats of "{name} serve"
answers:
  {"at": TIME, "tenant": "", "window": "1h0m0s", "window_s": 3600,
   "queues": [{"workflow", "version", "tenant", "ready", "waiting",
               "running", "oldest_ready": TIME, "oldest_ready_age_s"}, ...],
   "runs": [{"workflow", "version", "tenant", "status", "settled",
             "count"}, ...]}
with RFC 3339 times; "oldest_ready" and its age are null when no task is
ready; "settled" is false for runs in flight; a count's "version" is
absent for settled runs and for runs started before versions.

With --storage, it prints the storage of durable's tables instead, to
see bloat before it slows the engine down: for each table its live and
dead rows (row versions that vacuum has not reclaimed yet), its size on
disk (heap and TOAST, indexes, total), when it was last vacuumed and
whether autovacuum is on for it; then the warnings about the server
(autovacuum or track_counts off) and the tables that need attention: at
least 10,000 dead rows, and either more than 20% of the table's rows
(autovacuum is behind) or autovacuum off (see docs/operating.md,
"Bloat"). It costs one catalog query. With --json, the one object GET
/api/v1/storage answers:
  {"at": TIME, "autovacuum": true, "track_counts": true,
   "warnings": [...], "attention": N,
   "tables": [{"name", "partition_of", "live_rows", "dead_rows",
               "dead_fraction", "total_bytes", "table_bytes",
               "index_bytes", "last_vacuum", "last_autovacuum",
               "last_analyze", "last_autoanalyze", "autovacuum",
               "attention"}, ...]}
with "attention" (a table's) empty when it needs none, and the times
null when never.

Exit status: 0 done, 1 failed (database errors), 2 bad flags.

Flags:
`

func (c *cli) statsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := c.flagSet("stats", statsUsage, stderr)
	db := c.dbFlags(fs)
	tenant := fs.String("tenant", "", "count only this tenant's tasks and runs")
	window := fs.Duration("window", time.Hour, "count the runs that settled within this long")
	asJSON := fs.Bool("json", false, "print one JSON object")
	storage := fs.Bool("storage", false, "print the storage of durable's tables (rows, dead rows, sizes, vacuum) and what needs attention")
	if code := c.parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, c.name+" stats: "+format+"\n", a...)
		return exitUsage
	}
	bad := checkValues(opt(dag.TenantRule, "--tenant", *tenant))
	switch {
	case db.URL() == "":
		return usageErr(missingURL)
	case bad != nil:
		return usageErr("%v", bad)
	case *window <= 0:
		return usageErr("--window must be positive, got %s", *window)
	case *storage && (set["tenant"] || set["window"]):
		return usageErr("--storage reads every table: it takes no --tenant or --window")
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s stats: %v\n", c.name, err)
		return 1
	}

	op, err := c.openOperator(ctx, db, "stats", stderr)
	if err != nil {
		return fail(err)
	}
	defer op.close()
	if *storage {
		return c.printStorage(ctx, op, *asJSON, stdout, stderr)
	}
	var st *durabletype.Stats
	opts := durable.StatsOptions{Window: *window}
	if *tenant != "" {
		st, err = op.e.Tenant(*tenant).Stats(ctx, opts)
	} else {
		st, err = op.e.Stats(ctx, opts)
	}
	if err != nil {
		return fail(err)
	}
	now, err := op.now(ctx)
	if err != nil {
		return fail(err)
	}
	out := durablejson.NewStats(st, now, *tenant, *window)
	if *asJSON {
		b, err := json.Marshal(out)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	printStats(stdout, out, *window)
	return 0
}

func printStats(w io.Writer, st *durablejson.Stats, window time.Duration) {
	if len(st.Queues) == 0 {
		fmt.Fprintln(w, "queues: no task ready, waiting or running")
	} else {
		fmt.Fprintln(w, "queues (tasks):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "WORKFLOW\tVERSION\tTENANT\tREADY\tWAITING\tRUNNING\tOLDEST READY\n")
		for _, q := range st.Queues {
			oldest := "-"
			if q.OldestReady != nil {
				oldest = age(time.Duration(*q.OldestReadyAge * float64(time.Second)))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", q.Workflow, versionCell(q.Version), q.Tenant, q.Ready, q.Waiting, q.Running, oldest)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(st.Runs) == 0 {
		fmt.Fprintf(w, "runs: none in flight, none settled in the last %s\n", window)
		return
	}
	fmt.Fprintf(w, "runs (in flight, and settled in the last %s):\n", window)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "WORKFLOW\tVERSION\tTENANT\tSTATUS\tPHASE\tCOUNT\n")
	for _, c := range st.Runs {
		phase := "in-flight"
		if c.Settled {
			phase = "settled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", c.Workflow, versionCell(c.Version), c.Tenant, c.Status, phase, c.Count)
	}
	tw.Flush()
}

// age formats a duration for a table: milliseconds under a minute, seconds
// above.
func age(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.3fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
