package durablecli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
)

// The versions of workflows (docs/semantics.md, "Versions and deploys"):
// the "workflows" command, and what "runs show" and "runs upgrade" say
// about versions.

const workflowsUsage = `Usage: {name} workflows --database-url URL [flags]

Lists the versions of the workflows, by workflow and newest first: those
this program registers, those that runs recorded in the store, and those
that live workers serve. Runs are pinned to the version they started with:
only workers that registered it (or accept it) run their steps. For each
version:

  KIND         "function" for a durable function (durable.NewFunction:
               its one step is its body, whose calls "runs show" lists),
               "workflow" for a DAG of steps ("-": its DAG is unknown here)
  VERSION      its fingerprint (what Workflow.Version returns in Go; a new
               definition takes the runs of this one with
               Accepts("<VERSION>") or AcceptsRunsOf(old)), or the version
               set by WithVersion ("-" for runs started before versions)
  REGISTERED   "newest": this program registers it and starts it by name
               (trigger, schedules); "yes": it registers it beside a newer
               one; "legacy": the id releases of durable before
               fingerprint 2 gave a version it registers, whose workers
               serve its runs as their own; "-": it does not
  IN FLIGHT    its runs that have not settled
  READY        their steps waiting for a worker
  WORKERS      the live workers that serve it (the first 2, then a count)
  ACCEPTED BY  the live workers that accept it (Workflow.Accepts) and move
               its runs to a version they serve, or that serve its runs as
               their own: the fingerprint an older release of durable gave
               their definition (its legacy version)
  RECORDED     when a run first recorded it ("-": no run yet, or they were
               pruned)
  STATUS       UNSERVED when it has runs in flight that no live worker
               serves or accepts: they wait (they never fail for it)
               until a worker of that version starts, or until they are
               moved to another version ("{name} runs upgrade")

Each unserved version also gets a warning on stderr (not with --json),
with the command that moves its runs. With --steps, each version's DAG follows the table: its
input type, its steps (name, kind, parents, output type, what a sleep, a
wait, a child step or a map step does, "retired" for a step kept only for
the record of moved runs) and whether it has an on-failure handler.

With --json, one JSON object, the steps included, the one GET
/api/v1/workflows of "{name} serve" answers: the workflows, each holding
its versions:
  {"workflows": [{"name", "kind", "version", "registered", "steps", "on_failure",
                  "child_only", "unserved",
                  "versions": [{"workflow", "version", "registered",
                                "newest", "accepts", "legacy_of", "in_flight", "ready",
                                "workers", "accepted_by", "recorded_at",
                                "unserved", "input", "on_failure",
                                "steps"}, ...]}, ...]}
where a step is {"name", "kind", "parents", "output", "sleep", "sleep_s",
"signal", "child", "map_over", "retired"} ("sleep" a Go duration and
"sleep_s" seconds, for sleeps only; "retired" only when true), with RFC
3339 times, "recorded_at" null when no run recorded the version, and a
version's "input" empty and "steps" null when its DAG is unknown here (a
version only a worker lists). The schema is checked, never migrated.

Exit status: 0 done (whether or not versions are unserved), 1 failed
(database errors, or this program's workflows fail to register), 2 bad
flags.

Flags:
`

func (c *cli) workflowsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := c.flagSet("workflows", workflowsUsage, stderr)
	db := c.dbFlags(fs)
	workflow := fs.String("workflow", "", "only the versions of this workflow")
	steps := fs.Bool("steps", false, "also print each version's DAG: its steps with their kinds, parents and output types")
	asJSON := fs.Bool("json", false, "print one JSON object (the steps included)")
	if code := c.parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, c.name+" workflows: "+format+"\n", a...)
		return exitUsage
	}
	bad := checkValues(opt(dag.NameRule, "--workflow", *workflow))
	switch {
	case db.URL() == "":
		return usageErr(missingURL)
	case bad != nil:
		return usageErr("%v", bad)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s workflows: %v\n", c.name, err)
		return 1
	}
	op, err := c.openRegistered(ctx, db, "workflows", stderr)
	if err != nil {
		return fail(err)
	}
	defer op.close()
	vs, err := op.e.Versions(ctx, *workflow)
	if err != nil {
		return fail(err)
	}
	if *asJSON {
		b, err := json.Marshal(durablejson.NewWorkflowList(op.e.Workflows(), vs, *workflow))
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	if len(vs) == 0 {
		if *workflow != "" {
			fmt.Fprintf(stdout, "no versions of workflow %s: this program does not register it, no run recorded it and no live worker serves it\n", dag.Quote(*workflow))
		} else {
			fmt.Fprintln(stdout, "no workflows: this program registers none, no run recorded one and no live worker serves one")
		}
		return 0
	}
	printVersions(stdout, vs)
	if *steps {
		for i := range vs {
			fmt.Fprintln(stdout)
			printDAG(stdout, &vs[i])
		}
	}
	for i := range vs {
		if x := &vs[i]; x.Unserved() {
			fmt.Fprintf(stderr, "warning: %s\n", unservedWarning(c.name, x.Workflow, x.Version, x.InFlight, durablejson.UpgradeTo(vs, x.Workflow, x.Version)))
		}
	}
	return 0
}

// openRegistered is openOperator with the program's workflows
// (Config.Workflows) registered on the engine: it knows their versions,
// the newest of them, and their shapes (to move runs to them).
func (c *cli) openRegistered(ctx context.Context, db *cliflag.DB, name string, stderr io.Writer) (*operator, error) {
	op, err := c.openOperator(ctx, db, name, stderr)
	if err != nil {
		return nil, err
	}
	if err := op.e.Register(c.cfg.Workflows...); err != nil {
		op.close()
		return nil, fmt.Errorf("registering this program's workflows: %w", err)
	}
	return op, nil
}

// maxListedWorkers is how many worker IDs a cell of the versions table
// names; the others are counted.
const maxListedWorkers = 2

// capped joins the first n of s, then counts the others; "-" when s is
// empty.
func capped(s []string, n int) string {
	if len(s) == 0 {
		return "-"
	}
	out := strings.Join(s[:min(len(s), n)], ",")
	if len(s) > n {
		out += fmt.Sprintf(" (+%d)", len(s)-n)
	}
	return out
}

func printVersions(w io.Writer, vs []durable.VersionInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tKIND\tVERSION\tREGISTERED\tIN FLIGHT\tREADY\tWORKERS\tACCEPTED BY\tRECORDED\tSTATUS")
	for i := range vs {
		x := &vs[i]
		registered := "-"
		switch {
		case x.Newest:
			registered = "newest"
		case x.Registered:
			registered = "yes"
		case x.LegacyOf != "":
			registered = "legacy"
		}
		recorded := "-"
		if !x.RecordedAt.IsZero() {
			recorded = x.RecordedAt.Local().Format(listTime)
		}
		status := "-"
		if x.Unserved() {
			status = "UNSERVED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", x.Workflow, versionKind(x), versionCell(x.Version), registered,
			x.InFlight, x.Ready, capped(x.Workers, maxListedWorkers), capped(x.AcceptedBy, maxListedWorkers), recorded, status)
	}
	tw.Flush()
}

// versionKind says whether a version is a durable function's or a
// workflow's DAG ("-" when its DAG is unknown here).
func versionKind(x *durable.VersionInfo) string {
	switch {
	case x.Steps == nil:
		return "-"
	case len(x.Steps) == 1 && x.Steps[0].Kind == durabletype.KindFunc:
		return durablejson.KindFunction
	}
	return durablejson.KindWorkflow
}

// printDAG prints the DAG of a version.
func printDAG(w io.Writer, x *durable.VersionInfo) {
	title := x.Workflow + " " + versionCell(x.Version)
	switch {
	case x.Newest:
		title += " (newest registered here)"
	case x.Registered:
		title += " (registered here)"
	}
	if x.Steps == nil {
		fmt.Fprintf(w, "%s: DAG unknown here (this program does not register it and no run recorded it)\n", title)
		return
	}
	input := x.Input
	if input == "" {
		input = "(type not recorded)"
	}
	if versionKind(x) == durablejson.KindFunction {
		title += ", a function"
	}
	fmt.Fprintf(w, "%s: input %s\n", title, input)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tKIND\tPARENTS\tOUTPUT\tDETAIL")
	for _, s := range x.Steps {
		parents, output := "-", s.Output
		if len(s.Parents) > 0 {
			parents = strings.Join(s.Parents, ",")
		}
		if output == "" {
			output = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, parents, output, stepDetail(s))
	}
	tw.Flush()
	if x.OnFailure {
		fmt.Fprintln(w, "  on failure: a handler runs when a run fails")
	}
}

// stepDetail says what a step of a DAG does besides running code, and
// whether it is retired.
func stepDetail(s durable.StepInfo) string {
	var parts []string
	switch s.Kind {
	case durabletype.KindSleep:
		parts = append(parts, "sleeps "+s.Sleep.String())
	case durabletype.KindEvent:
		if s.Signal != "" {
			parts = append(parts, "waits for signal "+dag.Quote(s.Signal))
		} else {
			parts = append(parts, "waits for an event")
		}
	case durabletype.KindChild:
		parts = append(parts, "starts workflow "+dag.Quote(s.Child))
	case durabletype.KindMap:
		if s.MapOver == "" {
			parts = append(parts, "maps over the run's input")
		} else {
			parts = append(parts, "maps over "+dag.Quote(s.MapOver))
		}
	case durabletype.KindFunc:
		parts = append(parts, "the function's body: runs show lists its calls")
	}
	if s.Retired {
		parts = append(parts, "retired (kept for the record of moved runs)")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// unservedWarning says that n runs of a version wait for a worker, and
// what to do about it; to is the version to suggest moving them to ("" if
// none is known).
func unservedWarning(prog, workflow, version string, n int, to string) string {
	if version == "" {
		return fmt.Sprintf("workflow %s has %s in flight, started before versions, that no live worker serves: they wait until a worker of the workflow starts",
			dag.Quote(workflow), plural(n, "run"))
	}
	return fmt.Sprintf("version %s of workflow %s has %s in flight that no live worker serves or accepts: they wait until a worker of that version starts; or move them: %s",
		dag.Quote(version), dag.Quote(workflow), plural(n, "run"), upgradeCommand(prog, workflow, version, to))
}

// upgradeCommand is the command line that moves the runs of a version to
// version to ("VERSION" when it is not known).
func upgradeCommand(prog, workflow, from, to string) string {
	if to == "" {
		to = "VERSION"
	}
	return fmt.Sprintf("%s runs upgrade --workflow %s --from %s --to %s", shellQuote(prog), shellQuote(workflow), from, to)
}

// printUnservedRun prints the warning of "runs show" about a run whose
// version no live worker serves or accepts, and the ways out.
func printUnservedRun(tw io.Writer, v *runView) {
	res := v.res
	if res.Version == "" {
		fmt.Fprintf(tw, "warning\tno live worker serves workflow %s: its steps wait until one starts (see %s workers)\n",
			dag.Quote(res.Workflow), v.prog)
		return
	}
	fmt.Fprintf(tw, "warning\tno live worker serves or accepts version %s of workflow %s: its steps wait until one starts (see %s workflows)\n",
		dag.Quote(res.Version), dag.Quote(res.Workflow), v.prog)
	fmt.Fprintf(tw, "fix\tstart a worker of version %s, or move the run: %s --run %s\n",
		dag.Quote(res.Version), upgradeCommand(v.prog, res.Workflow, res.Version, v.upgradeTo), res.ID)
}
