package durablecli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/effectivelabs/durable"
)

const workersUsage = `Usage: {name} workers --database-url URL [flags]

Lists the live workers: the engines started on the schema ("{name} worker"
processes, or programs using the library) that were seen within their
dead-after window (--dead-after of "{name} worker", 30s by default), after
which their running steps are rescued. For each: its ID, host, version,
when it started, how long ago it was last seen (on the database's clock),
the workflows it serves, its concurrency, the steps it ran at its last
refresh (every third of its dead-after window, at most 15s) and whether it
leads (fires timers, rescues dead workers' steps). With --all, the workers
that are not live are listed too, with a LIVE column: a worker removes its
record when it stops gracefully, and the leader deletes the records of
workers not seen for a day.

Then, on stderr, a warning for each workflow with queued steps that no
live worker serves: its runs wait until a worker that serves it starts.

With --json, one JSON object:
  {"at": TIME,
   "workers": [{"id", "host", "version", "started_at", "last_seen",
                "last_seen_age_s", "workflows", "concurrency", "in_flight",
                "leader", "live", "dead_after_s"}, ...],
   "unserved": [{"workflow", "ready"}, ...]}
with RFC 3339 times; "workers" holds the live ones only unless --all.

Exit status: 0 done (whether or not workflows are unserved), 1 failed
(database errors), 2 bad flags.

Flags:
`

type workersJSON struct {
	At       time.Time          `json:"at"`
	Workers  []workerJSON       `json:"workers"`
	Unserved []unservedFlowJSON `json:"unserved"`
}

type workerJSON struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	Version     string    `json:"version"`
	StartedAt   time.Time `json:"started_at"`
	LastSeen    time.Time `json:"last_seen"`
	LastSeenAge float64   `json:"last_seen_age_s"`
	Workflows   []string  `json:"workflows"`
	Concurrency int       `json:"concurrency"`
	InFlight    int       `json:"in_flight"`
	Leader      bool      `json:"leader"`
	Live        bool      `json:"live"`
	DeadAfter   float64   `json:"dead_after_s"`
}

// unservedFlowJSON is a workflow with ready steps and no live worker
// serving it.
type unservedFlowJSON struct {
	Workflow string `json:"workflow"`
	Ready    int    `json:"ready"`
}

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
	out := workersView(ws, st, now, *all)
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
		fmt.Fprintf(stderr, "warning: workflow %s has %d queued steps, but no live worker serves it\n", u.Workflow, u.Ready)
	}
	return 0
}

// workersView keeps the live workers (all of them with all) and finds the
// workflows with ready steps that no live worker serves.
func workersView(ws []durable.WorkerInfo, st *durable.Stats, now time.Time, all bool) *workersJSON {
	out := &workersJSON{At: now, Workers: []workerJSON{}, Unserved: []unservedFlowJSON{}}
	for _, w := range ws {
		if !w.Live && !all {
			continue
		}
		wfs := w.Workflows
		if wfs == nil {
			wfs = []string{}
		}
		out.Workers = append(out.Workers, workerJSON{
			ID: w.ID, Host: w.Host, Version: w.Version, StartedAt: w.StartedAt.UTC(), LastSeen: w.LastSeen.UTC(),
			LastSeenAge: max(now.Sub(w.LastSeen), 0).Seconds(), Workflows: wfs, Concurrency: w.Concurrency,
			InFlight: w.InFlight, Leader: w.Leader, Live: w.Live, DeadAfter: w.DeadAfter.Seconds(),
		})
	}
	for _, u := range durable.UnservedQueues(ws, st) {
		out.Unserved = append(out.Unserved, unservedFlowJSON{Workflow: u.Workflow, Ready: u.Ready})
	}
	return out
}

// maxListedWorkflows is how many workflows a row of the table names; the
// others are counted.
const maxListedWorkflows = 3

func printWorkers(w io.Writer, v *workersJSON, all bool) {
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
		wfs := "-"
		if n := len(x.Workflows); n > 0 {
			wfs = strings.Join(x.Workflows[:min(n, maxListedWorkflows)], ",")
			if n > maxListedWorkflows {
				wfs += fmt.Sprintf(" (+%d)", n-maxListedWorkflows)
			}
		}
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
