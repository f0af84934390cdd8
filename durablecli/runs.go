package durablecli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
)

const runsUsage = `Usage: {name} runs <list|show|cancel|replay|upgrade|prune> [flags]
       {name} runs [list flags]     (the same as "{name} runs list")

  list     list runs, newest first, by status, workflow, version, tenant,
           time and parent run
  show     print a run: its version, its input, its steps with their
           parents, what they wait for, its parent and child runs, its
           failure; on request each step's output and the event log
  cancel   cancel runs that have not settled, by ID or by filter
  replay   run settled runs again, keeping what completed, by ID or by
           filter
  upgrade  move the runs in flight of a version of a workflow to another
           version (--workflow, --from, --to; --dry-run first)
  prune    delete the runs that settled more than --older-than ago

Every action needs --database-url (or $DURABLE_DATABASE_URL); the schema is
checked, never migrated. Run "{name} runs <action> -h" for its flags.

Exit status: 0 done, 1 failed (a named run not found or refused, database
errors), 2 bad flags or arguments.
`

const runsShowUsage = `Usage: {name} runs show RUN_ID --database-url URL [flags]

Prints a run (workflow, version, tenant, its parent run and step if a step
of another run started it, status, times, the failure or the reason it was
cancelled), its input (indented when it is JSON, else base64), and a table
of its steps: their parents, state, attempts, when each started and
finished, when a sleep, a retry backoff or the timeout of a wait is due,
and the latest error.

Then, if it has steps that wait, what each waits (or waited) for: the
event key, the signal name, the child run, or a map step's items counted
by state, with the first failed items and their errors; and its child runs
(the first 20: ID, step, workflow, status, failure; "{name} runs list
--parent RUN_ID" lists every one). With --outputs, the output of every
completed step too (of a map step, its first 10 completed items); with
--events, the run's event log. Times in the tables are relative to the
run's creation. An input or output larger than 64 KiB is left out, its
size said, unless --full.

The run is pinned to its version of the workflow: only workers that
registered that version (or accept it) run its steps. A run that has not
settled and whose version no live worker serves or accepts gets a warning
line (its steps wait until such a worker starts; see "{name} workflows")
and a fix line: start a worker of that version, or move the run with
"{name} runs upgrade", to a version live workers serve when there is one.
A step whose STATE is marked "(retired)" was kept only for the run's
record when the run moved to a version that does not run it: it never runs
again.

A durable function's run has one step, its body ("main"), then a table of
the calls it made, in order: their number, name, kind (step, sleep, event,
child, patch), state, attempts, when each started and finished, and what
a sleep, a wait, a child run or a step waiting for its retry waits for,
and until when.

With --json, one JSON object holding all of it, the outputs and every item
of a map step included, the one GET /api/v1/runs/{id} of "{name} serve"
answers: the input and each output as JSON when it is valid JSON
("input", "output"), else as base64 ("input_base64", "output_base64"),
or, when larger than 64 KiB (without --full), left out, its size in bytes
in "input_omitted" or "output_omitted"; times in RFC 3339, null when they
did not happen; "error" ({"step", "message"}, null for a run that did
not fail and was not cancelled) and "failed_step" (its step); "parent"
({"run_id", "step", "result"}, null for a run that is not a child) with
"parent_id" and "parent_step"; "children" (as "{name} runs list --json"
prints runs, up to 1000; "more_children" when there are more); per step
"event_key", "signal", "child_run_id" when set, "retired" (only when
true), and for a map step "item_counts" (by state) and "items" (each a
step with its "item" number); "events" with --events (each with its
"id", as GET /api/v1/runs/{id}/events lists them); "version" ("" for a
run started before versions); "unserved": true with the warning, and
"upgrade_to", the version the fix line suggests, if any; "kind"
("function" or "workflow") and, for a function, "calls" (each with its
"number", "name", "kind", "state", "attempts", "error", "due_at",
"started_at", "finished_at", "event_key", "signal", "child_run_id" and
output).

Flags:
`

const runsListUsage = `Usage: {name} runs list --database-url URL [flags]

Lists runs newest first, --limit at a time: ID, workflow, the version of
the workflow the run is pinned to ("-" for a run started before versions),
tenant, status, when each was created and when it settled (local time), and
the step that failed it with its error, or the reason it was cancelled.
When child runs are listed (runs a step started with durable.Child), a
PARENT (STEP) column names each one's parent run and the step that started
it ("-" for the others). A run is listed when it matches every filter
given; --version V lists the runs pinned to version V ("{name} workflows"
lists the versions). --since, --until, --finished-since and
--finished-until take an RFC 3339 time or a duration meaning that long ago,
on the database's clock; --parent RUN_ID lists the child runs of that run,
and --top-level leaves child runs out (only the runs a trigger, a schedule
or the API started). "{name} runs" with no action is "{name} runs list".

To find runs by your own keys: --idempotency-key K lists the runs triggered
with that key (exactly; one per workflow and tenant; indexed, so fast
however many runs are kept), and --input-contains JSON those whose input
contains that JSON value, as PostgreSQL's jsonb @> says:
'{"customer":"c-42"}' keeps every input whose "customer" is "c-42",
whatever else it holds; '{"lines":[{"sku":"x"}]}' one whose "lines" hold
an object with "sku" "x". The input filter is not indexed: it is checked on
the runs the other flags select, newest first, until the page is full, so
pair it with --workflow, --tenant or --since on a large store. A value
that is not JSON, or is larger than 16 KiB, is a usage error (exit 2).
runs cancel and runs replay take both flags too.

When more runs match, the last line is the command for the next page: the
same flags (--database-url left out) and --cursor. A cursor continues only
the listing it came from; with it, "--since 24h" keeps the time it meant on
the first page.

With --json, one JSON object, the one GET /api/v1/runs of "{name} serve"
answers:
  {"runs": [{"id", "workflow", "version", "tenant", "status", "failed_step",
             "error", "created_at", "finished_at", "parent_id",
             "parent_step", "unserved"}, ...],
   "next": "CURSOR", "next_cursor": "CURSOR"}
with RFC 3339 times, "version" empty for a run started before versions,
"finished_at" null until the run settles, "parent_id" and "parent_step"
only for child runs, "unserved": true only for a run in flight whose
version no live worker serves or accepts, "next" empty on the last page
and "next_cursor" the same, absent on the last page.

Flags:
`

const runsCancelUsage = `Usage: {name} runs cancel RUN_ID... --database-url URL [--reason R]
       {name} runs cancel <filter flags>|--all --database-url URL [--reason R]

Cancels runs that have not settled: each becomes CANCELLED with the reason
as its error, its waiting steps never run, its running steps have their
contexts cancelled, and its on-failure handler does not run.

With run IDs, prints "<id> cancelled" for each, and on stderr why each
other could not be (not found, already settled); exits 1 if any could not.

With filter flags instead, cancels every run they match (the runs in flight
unless --status names others), in batches of 100, and prints "cancelled N
runs (M skipped)"; the skipped runs had settled. A filter flag or --all is
required, so that a forgotten filter does not cancel everything: --all
cancels every run in flight. The filter flags are those of "{name} runs
list" (--top-level among them); their durations ago are taken on the
database's clock.

With --dry-run, nothing changes: prints "<id> would be cancelled" for each
run the command would cancel, "<id> would be skipped (STATUS)" for each it
would skip, and "would cancel N runs (M skipped)".

Flags:
`

const runsReplayUsage = `Usage: {name} runs replay RUN_ID... --database-url URL [--from-step S]
       {name} runs replay <filter flags>|--all --database-url URL [--from-step S]

Runs settled runs again: failed and cancelled steps and everything
downstream of them start afresh, while completed steps keep their outputs
and do not run again. With --from-step, that step and its descendants run
again even if they completed, which also replays a COMPLETED run; for a
durable function, --from-step names a call: its first call of that name
and every later call are made again. Workers
("{name} worker") execute the replayed runs.

With run IDs, prints "<id> replayed" for each, and on stderr why each other
could not be (not found, not settled, completed and no --from-step, no such
step); exits 1 if any could not.

With filter flags instead, replays every run they match (FAILED runs
unless --status names others), in batches of 100, and prints "replayed N
runs (M skipped)"; the skipped runs had not settled, or had nothing to
replay. A filter flag or --all is required: --all replays every FAILED run.
CANCELLED runs, which someone stopped on purpose, are replayed only with
--include-cancelled or when --status names them (CANCELLED, unsuccessful).
The filter flags are those of "{name} runs list" (--top-level among them);
their durations ago are taken on the database's clock.

With --dry-run, nothing changes: prints "<id> would be replayed" for each
run the command would replay, "<id> would be skipped (STATUS)" for each it
would skip (not settled, or completed without --from-step), and "would
replay N runs (M skipped)".

Flags:
`

const runsPruneUsage = `Usage: {name} runs prune --older-than D --database-url URL

Deletes the runs that settled more than --older-than ago (on the database's
clock), with their steps and events, in batches of 500, and prints how many
it deleted. Runs that have not settled are never deleted, however old.
Workers do the same by themselves, for runs older than their --retention.

Flags:
`

// errorColumn is the widest error shown in the step table; failureColumn
// the widest failure in the run list.
const (
	errorColumn   = 80
	failureColumn = 60
)

func (c *cli) runsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (strings.HasPrefix(args[0], "-") && !slices.Contains([]string{"-h", "-help", "--help"}, args[0])) {
		// "runs" alone, or followed by flags, is "runs list".
		return c.runsList(ctx, args, stdout, stderr)
	}
	return c.dispatch(ctx, "runs", runsUsage, map[string]command{
		"list":    c.runsList,
		"show":    c.runsShow,
		"cancel":  c.runsCancel,
		"replay":  c.runsReplay,
		"upgrade": c.runsUpgrade,
		"prune":   c.runsPrune,
	}, args, stdout, stderr)
}

// dispatch runs the action of a command with actions ("runs list").
func (c *cli) dispatch(ctx context.Context, name, usage string, actions map[string]command, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, c.text(usage))
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stderr, c.text(usage))
		return 0
	}
	act, ok := actions[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s %s: unknown action %q\n\n%s", c.name, name, args[0], c.text(usage))
		return exitUsage
	}
	return act(ctx, args[1:], stdout, stderr)
}

// runsAction is the frame of one "durable runs" action: its flags and how
// it reports problems.
type runsAction struct {
	c      *cli
	fs     *flag.FlagSet
	db     *cliflag.DB
	stderr io.Writer
}

func (c *cli) newRunsAction(name, usage string, stderr io.Writer) *runsAction {
	return c.newCommand("runs "+name, usage, stderr)
}

// newCommand is the frame of a command with flags and positional
// arguments, as for "runs" actions, under its own name.
func (c *cli) newCommand(name, usage string, stderr io.Writer) *runsAction {
	a := &runsAction{c: c, fs: c.flagSet(name, usage, stderr), stderr: stderr}
	a.db = c.dbFlags(a.fs)
	return a
}

// parse parses the flags, which may come before, between or after the
// positional arguments, and returns at most maxPos of these; the code is -1
// to continue, or the exit code.
func (a *runsAction) parse(args []string, maxPos int) ([]string, int) {
	pos, code := parseInterspersed(a.fs, args, a.stderr)
	switch {
	case code >= 0:
		return nil, code
	case maxPos >= 0 && len(pos) > maxPos:
		return nil, a.usageErr("unexpected argument %q", pos[maxPos])
	case a.db.URL() == "":
		return nil, a.usageErr(missingURL)
	}
	return pos, -1
}

func (a *runsAction) usageErr(format string, args ...any) int {
	fmt.Fprintf(a.stderr, "%s %s: "+format+"\n", append([]any{a.c.name, a.fs.Name()}, args...)...)
	return exitUsage
}

// fail reports an error: exit status 2 for a filter or cursor the engine
// refused, 1 otherwise.
func (a *runsAction) fail(err error) int {
	fmt.Fprintf(a.stderr, "%s %s: %v\n", a.c.name, a.fs.Name(), err)
	if badFilter(err) {
		return exitUsage
	}
	return 1
}

// open connects for the action.
func (a *runsAction) open(ctx context.Context) (*operator, error) {
	return a.c.openOperator(ctx, a.db, strings.ReplaceAll(a.fs.Name(), " ", "-"), a.stderr)
}

// parseIDs parses run IDs.
func (a *runsAction) parseIDs(args []string) ([]uuid.UUID, int) {
	ids := make([]uuid.UUID, len(args))
	for i, s := range args {
		id, err := uuid.Parse(s)
		if err != nil {
			return nil, a.usageErr("%q is not a run ID: %v", s, err)
		}
		ids[i] = id
	}
	return ids, -1
}

func (c *cli) runsShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newRunsAction("show", runsShowUsage, stderr)
	events := a.fs.Bool("events", false, "also print the run's event log")
	outputs := a.fs.Bool("outputs", false, "also print the output of every completed step")
	asJSON := a.fs.Bool("json", false, "print one JSON object, outputs included")
	full := a.fs.Bool("full", false, "print inputs and outputs however large (by default those over 64 KiB are left out, their size said)")
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return code
	}
	if len(pos) == 0 {
		return a.usageErr("a RUN_ID is required")
	}
	ids, code := a.parseIDs(pos)
	if code >= 0 {
		return code
	}
	id := ids[0]

	op, err := a.open(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer op.close()
	res, err := op.e.Get(ctx, id)
	if err != nil {
		return a.fail(c.explainRunError(err, id, op.schema))
	}
	d, err := durablejson.ReadRun(ctx, op.e, op.e, res)
	if err != nil {
		return a.fail(err)
	}
	v := &runView{res: res, prog: c.name, full: *full, children: d.Children, moreChildren: d.MoreChildren,
		unserved: d.Unserved, upgradeTo: d.UpgradeTo}
	if *events {
		if v.events, err = op.e.Events(ctx, id); err != nil {
			return a.fail(c.explainRunError(err, id, op.schema))
		}
	}
	if *asJSON {
		return a.printJSON(stdout, runDetail(v, *events))
	}
	printRun(stdout, v, showOptions{events: *events, outputs: *outputs})
	return 0
}

// printJSON prints v as one line of JSON.
func (a *runsAction) printJSON(w io.Writer, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return a.fail(err)
	}
	fmt.Fprintf(w, "%s\n", b)
	return 0
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments, and returns the positional ones; the code is -1 to
// continue, or the exit code.
func parseInterspersed(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, int) {
	fs.SetOutput(stderr)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0
			}
			return nil, exitUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, -1
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// explainRunError turns the errors about one run that an operator can act
// on into plain messages.
func (c *cli) explainRunError(err error, id uuid.UUID, schema string) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, durabletype.ErrRunNotFound):
		return fmt.Errorf("run %s not found in schema %s", id, schema)
	case errors.Is(err, durabletype.ErrRunSettled):
		return fmt.Errorf("run %s has already settled: only runs in flight can be cancelled", id)
	case errors.Is(err, durabletype.ErrRunNotSettled):
		return fmt.Errorf("run %s has not settled: only settled runs can be replayed", id)
	case errors.Is(err, durabletype.ErrNothingToReplay):
		return fmt.Errorf("run %s completed: nothing to replay (--from-step runs a step and its descendants again)", id)
	case errors.Is(err, durabletype.ErrStepNotFound):
		return fmt.Errorf("run %s has no such step", id)
	case errors.Is(err, durabletype.ErrUnknownShape):
		return fmt.Errorf("run %s was started by a newer release of durable, whose shape this one cannot read (use that release): %w", id, err)
	case errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000"):
		return fmt.Errorf("schema %s has no durable tables (wrong --schema, or run \"%s migrate up\"): %w", schema, c.name, err)
	}
	return err
}

// showOptions are what "runs show" prints besides the run and its steps.
type showOptions struct {
	events  bool
	outputs bool
}

// printRun prints a run, its input and steps, what its steps wait for, its
// child runs and, on request, the steps' outputs and the event log.
func printRun(w io.Writer, v *runView, opts showOptions) {
	res, evs := v.res, v.events
	rel := func(t time.Time) string { return offset(t, res.CreatedAt) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", res.ID)
	fmt.Fprintf(tw, "workflow\t%s\n", res.Workflow)
	if res.Version != "" {
		fmt.Fprintf(tw, "version\t%s\n", res.Version)
	} else {
		fmt.Fprintf(tw, "version\t- (started before versions)\n")
	}
	fmt.Fprintf(tw, "tenant\t%s\n", res.Tenant)
	if res.Parent != nil {
		fmt.Fprintf(tw, "parent\t%s (step %s)\n", res.Parent.RunID, dag.DisplayName(res.Parent.Step))
	}
	fmt.Fprintf(tw, "status\t%s\n", res.Status)
	if v.unserved {
		printUnservedRun(tw, v)
	}
	fmt.Fprintf(tw, "created\t%s\n", timestamp(res.CreatedAt))
	if res.IdempotencyKey != "" {
		fmt.Fprintf(tw, "idempotency key\t%s\n", dag.Quote(res.IdempotencyKey))
	}
	if res.Priority != durable.PriorityNormal {
		fmt.Fprintf(tw, "priority\t%d\n", res.Priority)
	}
	if !res.Deadline.IsZero() {
		fmt.Fprintf(tw, "deadline\t%s\n", timestamp(res.Deadline))
	}
	if res.Done() {
		fmt.Fprintf(tw, "finished\t%s\n", timestamp(res.FinishedAt))
		fmt.Fprintf(tw, "duration\t%s\n", res.FinishedAt.Sub(res.CreatedAt).Round(time.Millisecond))
	} else {
		fmt.Fprintf(tw, "finished\t- (not settled)\n")
	}
	var re *durable.RunError
	if errors.As(res.Err, &re) {
		if re.Status == durabletype.RunCancelled {
			reason := oneLine(re.Message, 200)
			if reason == "" {
				reason = "- (none given)"
			}
			fmt.Fprintf(tw, "reason\t%s\n", reason)
		} else {
			fmt.Fprintf(tw, "failure\t%s\n", failureText(re))
		}
	}
	tw.Flush()

	fmt.Fprintln(w)
	printValue(w, "input", res.Input, v.maxValue())

	fmt.Fprintf(w, "\nsteps (times relative to the run's creation):\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "STEP\tPARENTS\tSTATE\tATTEMPTS\tSTARTED\tFINISHED\tTOOK\tDUE\tERROR\n")
	retired := false
	steps, calls := durablejson.SplitCalls(res)
	for _, s := range steps {
		parents := "-"
		if len(s.Parents) > 0 {
			parents = strings.Join(s.Parents, ",")
		}
		attempts, started := durablejson.Attempts(&s) // a skipped step never ran
		took := "-"
		if !started.IsZero() && !s.FinishedAt.IsZero() {
			took = s.FinishedAt.Sub(started).Round(time.Millisecond).String()
		}
		due := "-"
		if durablejson.Waiting(&s) {
			due = rel(s.DueAt)
		}
		errText := "-"
		if s.Error != "" {
			errText = oneLine(s.Error, errorColumn)
		}
		state := string(s.State)
		if s.Retired {
			state += " (retired)"
			retired = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			s.Name, parents, state, attempts, rel(started), rel(s.FinishedAt), took, due, errText)
	}
	tw.Flush()
	if retired {
		fmt.Fprintf(w, "(retired: kept for the run's record when it moved to version %s, which does not run them; they never run again)\n",
			versionCell(res.Version))
	}
	if calls != nil {
		printCalls(w, v, calls)
	}
	printWaits(w, v)
	printFailedItems(w, res)
	printChildren(w, v)

	if opts.outputs {
		fmt.Fprintf(w, "\noutputs of the completed steps:\n")
		n := 0
		for _, s := range res.Steps {
			if s.Kind == durabletype.KindMap {
				n += printItemOutputs(w, s, v.maxValue())
				continue
			}
			if s.State == durabletype.TaskCompleted && len(s.Output) > 0 {
				printValue(w, s.Name, s.Output, v.maxValue())
				n++
			}
		}
		if n == 0 {
			fmt.Fprintln(w, "(none)")
		}
	}
	if !opts.events {
		return
	}

	fmt.Fprintf(w, "\nevents (%d):\n", len(evs))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "AT\tSTEP\tTYPE\tATTEMPT\tDETAIL\n")
	for _, ev := range evs {
		detail := oneLine(ev.Detail, 120)
		switch ev.Type {
		case durabletype.EventSleeping:
			detail = "until " + rel(ev.DueAt)
		case durabletype.EventRetrying:
			detail = "next attempt at " + rel(ev.DueAt) + " after: " + detail
		case durabletype.EventWaiting:
			if !ev.DueAt.IsZero() {
				detail += ", times out at " + rel(ev.DueAt)
			}
		}
		if detail == "" {
			detail = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", rel(ev.At), dag.DisplayName(ev.Step), ev.Type, ev.Attempt, detail)
	}
	tw.Flush()
}

// printValue prints an encoded input or output under a label: indented
// JSON when it is JSON, else base64.
func printValue(w io.Writer, label string, b []byte, max int) {
	switch {
	case len(b) == 0:
		fmt.Fprintf(w, "%s: (none)\n", label)
	case max >= 0 && len(b) > max:
		fmt.Fprintf(w, "%s: (%d bytes, left out: over %d KiB; --full prints it)\n", label, len(b), max>>10)
	case json.Valid(b):
		var buf bytes.Buffer
		_ = json.Indent(&buf, b, "  ", "  ") // valid JSON: cannot fail
		fmt.Fprintf(w, "%s:\n  %s\n", label, buf.Bytes())
	default:
		fmt.Fprintf(w, "%s (%d bytes, not JSON; base64):\n  %s\n", label, len(b), base64.StdEncoding.EncodeToString(b))
	}
}

// offset formats t relative to base, "-" for a zero t.
func offset(t, base time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(base)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	if d < time.Minute {
		return fmt.Sprintf("%s%.3fs", sign, d.Seconds())
	}
	return sign + d.Round(time.Millisecond).String()
}

// timestamp formats an absolute time in the local zone.
func timestamp(t time.Time) string {
	return t.Local().Format("2006-01-02 15:04:05.000 MST")
}

// maxShownValue is the largest input or output "runs show" prints without
// --full.
const maxShownValue = 64 << 10

// runDetail is what "runs show --json" prints (events: with --events).
func runDetail(v *runView, events bool) *durablejson.RunDetail {
	d := &durablejson.RunData{Run: v.res, Children: v.children, MoreChildren: v.moreChildren, Unserved: v.unserved, UpgradeTo: v.upgradeTo}
	if events {
		d.Events = v.events
	}
	return durablejson.NewRunDetail(d, v.maxValue())
}
