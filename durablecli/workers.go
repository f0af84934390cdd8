package durablecli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
)

const workersUsage = `Usage: {name} workers --database-url URL [flags]

Lists the live workers: the engines started on the schema ("{name} worker"
processes, or programs using the library) that were seen within their
dead-after window (--dead-after of "{name} worker", 30s by default), after
which their running steps are rescued. For each: its ID, host, version (of
its code: Config.Version), when it started, how long ago it was last seen
(on the database's clock), the workflow versions it serves (as
workflow@version, the first 3 then a count; a worker older than versions
lists bare workflows: it serves every version of them), its concurrency,
the steps it ran at its last refresh (every third of its dead-after window,
at most 15s) and whether it leads (fires timers, rescues dead workers'
steps). With --all, the workers that are not live are listed too, with a
LIVE column: a worker removes its record when it stops gracefully, and the
leader deletes the records of workers not seen for a day.

Then, on stderr, a warning for each version of a workflow with queued
steps that no live worker serves or accepts: its runs wait until a worker
of that version starts, or until they are moved to another version
("{name} runs upgrade"; "{name} workflows" lists the versions).

With --json, one JSON object, the one GET /api/v1/workers of "{name} serve"
answers:
  {"at": TIME,
   "workers": [{"id", "host", "version", "started_at", "last_seen",
                "last_seen_age_s", "workflows", "versions", "accepts",
                "concurrency", "in_flight", "leader", "live",
                "dead_after", "dead_after_s"}, ...],
   "unserved": [{"workflow", "version", "ready"}, ...]}
with RFC 3339 times, "dead_after" a duration such as "30s" ("dead_after_s"
the same in seconds); "workers" holds the live ones only unless --all. A
worker's "version" labels its code; "workflows" are the names of the
workflows it serves, "versions" the versions it serves and "accepts" those
whose runs it moves to a version it serves (Workflow.Accepts) or serves as
its own (the legacy version that releases before fingerprint 2 gave each
of its definitions), each as "workflow@version". An unserved "version" is the workflow version the runs
are pinned to ("" for runs started before versions).

Exit status: 0 done (whether or not versions are unserved), 1 failed
(database errors), 2 bad flags.

Flags:
`

func (c *cli) workersCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := c.flagSet("workers", workersUsage, stderr)
	db := c.dbFlags(fs)
	all := fs.Bool("all", false, "also list the workers that are not live")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if code := c.parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	if db.URL() == "" {
		fmt.Fprintf(stderr, "%s workers: %s\n", c.name, missingURL)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s workers: %v\n", c.name, err)
		return 1
	}
	op, err := c.openOperator(ctx, db, "workers", stderr)
	if err != nil {
		return fail(err)
	}
	defer op.close()
	ws, err := op.e.Workers(ctx)
	if err != nil {
		return fail(err)
	}
	st, err := op.e.Stats(ctx, durable.StatsOptions{})
	if err != nil {
		return fail(err)
	}
	now, err := op.now(ctx)
	if err != nil {
		return fail(err)
	}
	out := durablejson.NewWorkers(ws, st, now, *all)
	if *asJSON {
		b, err := json.Marshal(out)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	printWorkers(stdout, out, *all)
	for _, u := range out.Unserved {
		if u.Version == "" {
			fmt.Fprintf(stderr, "warning: workflow %s has %s, but no live worker serves it\n", u.Workflow, plural(u.Ready, "queued step"))
			continue
		}
		fmt.Fprintf(stderr, "warning: version %s of workflow %s has %s, but no live worker serves or accepts it: start a worker of that version, or move its runs: %s\n",
			u.Version, u.Workflow, plural(u.Ready, "queued step"), upgradeCommand(c.name, u.Workflow, u.Version, servedVersion(ws, u.Workflow, u.Version)))
	}
	return 0
}

// servedVersion returns the version of workflow other than except that
// live workers serve, when there is exactly one; "" otherwise.
func servedVersion(ws []durable.WorkerInfo, workflow, except string) string {
	var served []string
	for _, w := range ws {
		if !w.Live {
			continue
		}
		for _, v := range w.Versions {
			if v.Workflow == workflow && v.Version != except && !slices.Contains(served, v.Version) {
				served = append(served, v.Version)
			}
		}
	}
	if len(served) == 1 {
		return served[0]
	}
	return ""
}

// maxListedWorkflows is how many workflow versions a row of the table
// names; the others are counted.
const maxListedWorkflows = 3

func printWorkers(w io.Writer, v *durablejson.Workers, all bool) {
	if len(v.Workers) == 0 {
		if all {
			fmt.Fprintln(w, "no workers")
		} else {
			fmt.Fprintln(w, "no live workers")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "ID\tHOST\tVERSION\tSTARTED\tLAST SEEN\tWORKFLOWS\tCONCURRENCY\tIN FLIGHT\tLEADER"
	if all {
		header += "\tLIVE"
	}
	fmt.Fprintln(tw, header)
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	for _, x := range v.Workers {
		served := x.Versions
		if len(served) == 0 {
			served = x.Workflows // a worker older than versions
		}
		wfs := capped(served, maxListedWorkflows)
		version := x.Version
		if version == "" {
			version = "-"
		}
		host := x.Host
		if host == "" {
			host = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\t%s\t%d\t%d\t%s", x.ID, host, version, timestamp(x.StartedAt),
			age(time.Duration(x.LastSeenAge*float64(time.Second))), wfs, x.Concurrency, x.InFlight, yes(x.Leader))
		if all {
			fmt.Fprintf(tw, "\t%s", yes(x.Live))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
