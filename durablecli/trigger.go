package durablecli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
)

const triggerUsage = `Usage: {name} trigger --database-url URL --workflow NAME [flags]

Starts --count runs of a workflow of this program (those "{name} worker"
serves, listed below) and prints their IDs, one a line. Every run gets the
same input: --input, encoded as the workflow's input type (JSON by
default), or the workflow's default input when it has one. The input is
decoded into the workflow's input type before any run starts: an input
that does not decode, has a field the type does not have (with JSON: a
misspelt field is refused, not dropped; --allow-unknown-fields lets such
fields through, ignored), or is larger than the limit (1 MiB encoded by
default, Config.MaxInputSize), is a usage error. The runs of a workflow with a
default input are started in one transaction; those of others one by one.

The input can come from a file: --input-file PATH reads it from PATH ("-"
reads the standard input), for inputs too large for the command line.
--jsonl PATH starts one run per line of PATH ("-": the standard input):
each line that is not blank is the JSON input of one run. Every line is
checked first, in one pass (its JSON, the workflow's input type and its
fields, its size, --key-field); if any is wrong, each such line is
reported by number ("line 7: ...") and nothing starts (exit 2). The runs then start in one transaction, all or none, and
their IDs are printed in line order. With --key-field F, each run's
idempotency key is the top-level field F of its input (a string or a
number), so that running the same file again starts only the lines not
started before (the others are reported "duplicate" on stderr, with their
line number). --priority, --start-after and --run-timeout apply to every
line; --count and --idempotency-key do not go with --jsonl.

With --wait it then waits for each run to settle and prints a line per run,
"<id> <STATUS> in <duration>", with the failure of a failed run; it exits 1
if any run did not complete (failed, or still running after --timeout).

--idempotency-key makes the trigger idempotent: a run of the workflow and
tenant started with that key before (and still kept) is not started again;
its ID is printed and "duplicate" said on stderr (with --count above 1, one
run is started and the others are its duplicates). --priority (0-3),
--start-after and --run-timeout set the run's priority, delayed start and
deadline (see docs/semantics.md, "Flow control").

This command only starts runs: "{name} worker" processes execute them. The
schema is migrated up first if needed (durable's migrations, then this
program's own). When the runs' version of the
workflow (this program's definition) is one that no live worker serves
while live workers serve another version of it, a warning says so on
stderr: the runs wait until a worker of their version starts, or until they
are moved to another version ("{name} runs upgrade"). Deploy this program
with the workers' definition (see docs/operating.md, "Deploys").

Exit status: 0 started (and, with --wait, completed), 1 failed (could not
connect, a run did not complete), 2 bad flags, unknown workflow or input.

Flags:
`

// maxTriggerCount bounds --count.
const maxTriggerCount = 100_000

// triggerOptions are the flags of "trigger".
type triggerOptions struct {
	db         *cliflag.DB
	workflow   string
	tenant     string
	count      int
	input      string
	inputFile  string
	jsonl      string
	keyField   string
	wait       bool
	timeout    time.Duration
	key        string
	priority   int
	startAfter time.Duration
	runTimeout time.Duration
	unknown    bool
}

func (c *cli) triggerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := c.flagSet("trigger", c.withWorkflows(triggerUsage, true), stderr)
	var o triggerOptions
	o.db = c.dbFlags(fs)
	fs.StringVar(&o.workflow, "workflow", "", "workflow to run"+c.workflowList(": "))
	fs.StringVar(&o.tenant, "tenant", "default", "tenant the runs belong to")
	fs.IntVar(&o.count, "count", 1, "number of runs to start")
	fs.StringVar(&o.input, "input", "", "input of every run, as JSON of the workflow's input type (default: the workflow's default input)")
	fs.StringVar(&o.inputFile, "input-file", "", `read the input of every run from this file ("-": the standard input), instead of --input`)
	fs.StringVar(&o.jsonl, "jsonl", "", `start one run per line of this file ("-": the standard input), each line the JSON input of its run, all in one transaction`)
	fs.StringVar(&o.keyField, "key-field", "", "with --jsonl, each run's idempotency key is this top-level field of its input (a string or a number)")
	fs.BoolVar(&o.unknown, "allow-unknown-fields", false, "let the inputs hold fields the workflow's input type does not have (ignored; by default refused, as a misspelt field)")
	fs.BoolVar(&o.wait, "wait", false, "wait for the runs to settle and print their statuses")
	fs.DurationVar(&o.timeout, "timeout", 0, "with --wait, how long to wait at most (0: no limit)")
	fs.StringVar(&o.key, "idempotency-key", "", "start no run if one of this workflow and tenant was started with this key (1-255 bytes)")
	fs.IntVar(&o.priority, "priority", 0, "the runs' priority within their tenant, 0 (default) to 3")
	fs.DurationVar(&o.startAfter, "start-after", 0, "start the runs this long from now (a durable timer)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 0, "fail the runs that have not settled this long from now (0: no deadline)")
	wf := c.workflowFlags("trigger", fs)
	if code := c.parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	prefix := c.name + " trigger"
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, prefix+": "+format+"\n", a...)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		if invalidValue(err) {
			return exitUsage
		}
		return 1
	}
	bad := checkValues(opt(dag.NameRule, "--workflow", o.workflow), req(dag.TenantRule, "--tenant", o.tenant),
		opt(dag.IdempotencyKeyRule, "--idempotency-key", o.key))
	switch {
	case o.db.URL() == "":
		return usageErr(missingURL)
	case o.count < 1 || o.count > maxTriggerCount:
		return usageErr("--count must be between 1 and %d, got %d", maxTriggerCount, o.count)
	case bad != nil:
		return usageErr("%v", bad)
	case o.timeout < 0:
		return usageErr("--timeout must not be negative, got %s", o.timeout)
	case o.timeout > 0 && !o.wait:
		return usageErr("--timeout applies only with --wait")
	case o.priority < int(durable.PriorityNormal) || o.priority > int(durable.PriorityUrgent):
		return usageErr("--priority must be between %d and %d, got %d", durable.PriorityNormal, durable.PriorityUrgent, o.priority)
	case o.startAfter < 0:
		return usageErr("--start-after must not be negative, got %s", o.startAfter)
	case o.runTimeout < 0:
		return usageErr("--run-timeout must not be negative, got %s", o.runTimeout)
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "input" })
	sources := 0
	for _, b := range []bool{given, o.inputFile != "", o.jsonl != ""} {
		if b {
			sources++
		}
	}
	switch {
	case sources > 1:
		return usageErr("give one of --input, --input-file and --jsonl")
	case o.jsonl != "" && o.count != 1:
		return usageErr("--count applies to --input: with --jsonl, each line is one run")
	case o.jsonl != "" && o.key != "":
		return usageErr("--idempotency-key gives every run the same key: with --jsonl, use --key-field")
	case o.keyField != "" && o.jsonl == "":
		return usageErr("--key-field applies only with --jsonl")
	}
	if o.inputFile != "" {
		b, err := c.readFile("--input-file", o.inputFile)
		if err != nil {
			return usageErr("%v", err)
		}
		o.input, given = string(bytes.TrimSpace(b)), true
	}
	var opts []durable.TriggerOption
	if o.key != "" {
		opts = append(opts, durable.WithIdempotencyKey(o.key))
	}
	if o.priority != 0 {
		opts = append(opts, durable.WithPriority(durable.Priority(o.priority)))
	}
	if o.startAfter > 0 {
		opts = append(opts, durable.WithStartAfter(o.startAfter))
	}
	if o.runTimeout > 0 {
		opts = append(opts, durable.WithRunTimeout(o.runTimeout))
	}
	if o.unknown {
		opts = append(opts, durable.WithUnknownFields())
	}

	// The workflows and the input are checked before connecting.
	pool, err := o.db.NewPool(4)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	set, le := c.workflows(ctx, wf, pool, o.db.Schema)
	if le != nil {
		return le.report(stderr, prefix)
	}
	set.unknownFields = o.unknown
	e, err := c.client(pool, o.db.Schema, set, "trigger", stderr)
	if err != nil {
		return fail(err)
	}
	switch {
	case o.workflow == "" && len(set.names()) == 0:
		return usageErr("--workflow is required, but this program serves no workflow")
	case o.workflow == "":
		return usageErr("--workflow is required: one of %s", strings.Join(set.names(), ", "))
	case !registered(e, o.workflow):
		return usageErr("%s", set.unknownWorkflow(o.workflow))
	}
	if o.jsonl != "" {
		return c.triggerLines(ctx, e, pool, set, &o, opts, prefix, stdout, stderr)
	}
	input, start, err := set.input(o.workflow, o.input, given)
	if err != nil {
		return usageErr("%v", err)
	}
	if start == nil {
		start = byName(o.workflow, input)
	}

	if err := o.db.Ping(ctx, pool); err != nil {
		return fail(err)
	}
	if err := o.db.Migrate(ctx, pool); err != nil {
		return fail(err)
	}
	started, err := start(ctx, e, o.tenant, o.count, opts)
	for _, st := range started { // those started before an error too
		fmt.Fprintln(stdout, st.RunID)
	}
	if err != nil {
		if errors.Is(err, durable.ErrInvalidInput) || errors.Is(err, durable.ErrPayloadTooLarge) {
			return usageErr("--input for %s: %v", o.workflow, err)
		}
		return fail(err)
	}
	warnStale(stderr, prefix, started)
	var ids []uuid.UUID // each run once, for --wait
	seen := make(map[uuid.UUID]bool, len(started))
	for _, st := range started {
		if st.Duplicate {
			fmt.Fprintf(stderr, "%s: %s: duplicate (idempotency key %q)\n", prefix, st.RunID, o.key)
		}
		if !seen[st.RunID] {
			seen[st.RunID] = true
			ids = append(ids, st.RunID)
		}
	}
	if !o.wait {
		return 0
	}
	return waitRuns(ctx, e, ids, o.timeout, stdout, stderr, prefix)
}

// waitRuns waits for each run in turn and prints its final status; it
// returns 1 if any run did not complete.
func waitRuns(ctx context.Context, e *durable.Engine, ids []uuid.UUID, timeout time.Duration, stdout, stderr io.Writer, prefix string) int {
	waitCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var notDone []uuid.UUID
	for _, id := range ids {
		res, err := e.Wait(waitCtx, id)
		if err != nil && waitCtx.Err() != nil && ctx.Err() == nil {
			// Timed out: report where the run is now.
			res, err = e.Get(ctx, id)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
			return 1
		}
		fmt.Fprintln(stdout, statusLine(res, timeout))
		if res.Status != durabletype.RunCompleted {
			notDone = append(notDone, id)
		}
	}
	if len(notDone) > 0 {
		fmt.Fprintf(stderr, "%s: %d of %d runs did not complete\n", prefix, len(notDone), len(ids))
		return 1
	}
	return 0
}

// statusLine describes a run for "trigger --wait".
func statusLine(res *durable.RunResult, timeout time.Duration) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s", res.ID, res.Status)
	if !res.Done() {
		fmt.Fprintf(&b, " (not settled after --timeout %s", timeout)
		var active []string
		for _, s := range res.Steps {
			if !s.State.Terminal() {
				active = append(active, s.Name+" "+string(s.State))
			}
		}
		if len(active) > 0 {
			fmt.Fprintf(&b, "; %s", strings.Join(active, ", "))
		}
		b.WriteString(")")
		return b.String()
	}
	fmt.Fprintf(&b, " in %s", res.FinishedAt.Sub(res.CreatedAt).Round(time.Millisecond))
	var re *durable.RunError
	if errors.As(res.Err, &re) {
		if f := failureText(re); f != "" {
			b.WriteString(": " + f)
		}
	}
	return b.String()
}

// failureText describes a run's failure on one line: the failed step and
// its message, or the message alone for a run that failed as a whole (its
// deadline passed) or was cancelled (its reason, if one was given).
func failureText(re *durable.RunError) string {
	msg := oneLine(re.Message, 200)
	if re.Step == "" {
		return msg
	}
	return fmt.Sprintf("step %q: %s", re.Step, msg)
}

// oneLine returns the first line of s, cut to at most n runes.
func oneLine(s string, n int) string {
	first, _, more := strings.Cut(strings.TrimSpace(s), "\n")
	first = strings.TrimSpace(first)
	if r := []rune(first); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if more {
		return first + " …"
	}
	return first
}

// triggerLines is "trigger --jsonl": every line is read and checked (its
// JSON, the workflow's input type, its key with --key-field) before
// anything starts; any line that is wrong is reported with its number and
// nothing starts (exit 2). The runs then start in one transaction
// (Engine.StartManyByName): all or none.
func (c *cli) triggerLines(ctx context.Context, e *durable.Engine, pool *pgxpool.Pool, set *workflows, o *triggerOptions, opts []durable.TriggerOption,
	prefix string, stdout, stderr io.Writer) int {
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, prefix+": "+format+"\n", a...)
		return exitUsage
	}
	b, err := c.readFile("--jsonl", o.jsonl)
	if err != nil {
		return usageErr("%v", err)
	}
	lines, errs := parseJSONLines(b, o.keyField, func(in []byte) error {
		_, _, err := set.input(o.workflow, string(in), true)
		if err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "--input for "+o.workflow+": "))
		}
		// The engine's rule, which starting the line applies: the input
		// type (of a workflow without a default input too), its fields,
		// the size limit.
		return e.CheckByName(o.workflow, o.tenant, in, opts...)
	})
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintf(stderr, "%s: --jsonl %s: %v\n", prefix, o.jsonl, err)
		}
		if len(errs) == maxLineErrors {
			fmt.Fprintf(stderr, "%s: --jsonl %s: stopped after %d lines with errors\n", prefix, o.jsonl, maxLineErrors)
		}
		return usageErr("nothing started: fix the lines above")
	}
	switch {
	case len(lines) == 0:
		return usageErr("--jsonl %s: %v", o.jsonl, errNoLines)
	case len(lines) > maxTriggerCount:
		return usageErr("--jsonl %s: %d runs, at most %d at once: split it", o.jsonl, len(lines), maxTriggerCount)
	}
	triggers := make([]durable.TriggerByName, len(lines))
	for i, l := range lines {
		triggers[i] = durable.TriggerByName{Tenant: o.tenant, Input: l.input, Options: opts}
		if l.key != "" {
			triggers[i].Options = append(slices.Clone(opts), durable.WithIdempotencyKey(l.key))
		}
	}
	if err := o.db.Ping(ctx, pool); err != nil {
		return c.triggerFail(stderr, prefix, err)
	}
	if err := o.db.Migrate(ctx, pool); err != nil {
		return c.triggerFail(stderr, prefix, err)
	}
	started, err := e.StartManyByName(ctx, o.workflow, triggers)
	var te *durable.TriggerError
	if errors.As(err, &te) {
		return usageErr("--jsonl %s: line %d: %v (nothing started)", o.jsonl, lines[te.Index].line, te.Err)
	}
	if err != nil {
		return c.triggerFail(stderr, prefix, err)
	}
	warnStale(stderr, prefix, started)
	var ids []uuid.UUID
	seen := make(map[uuid.UUID]bool, len(started))
	for i, st := range started {
		fmt.Fprintln(stdout, st.RunID)
		if st.Duplicate {
			fmt.Fprintf(stderr, "%s: line %d: %s: duplicate (idempotency key %q)\n", prefix, lines[i].line, st.RunID, lines[i].key)
		}
		if !seen[st.RunID] {
			seen[st.RunID] = true
			ids = append(ids, st.RunID)
		}
	}
	if !o.wait {
		return 0
	}
	return waitRuns(ctx, e, ids, o.timeout, stdout, stderr, prefix)
}

// triggerFail reports an error of "trigger": exit 2 for a value that
// breaks its rule, 1 otherwise.
func (c *cli) triggerFail(stderr io.Writer, prefix string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
	if invalidValue(err) {
		return exitUsage
	}
	return 1
}

// warnStale prints, once, the warning of the runs started (Started.Warning):
// their version is one no live worker serves.
func warnStale(stderr io.Writer, prefix string, started []durable.Started) {
	for _, st := range started {
		if st.Warning != "" {
			fmt.Fprintf(stderr, "%s: warning: %s\n", prefix, st.Warning)
			return
		}
	}
}

// startWarningLog is the message with which an engine logs what
// Started.Warning says; "trigger" prints the warning itself, once
// (warnStale), and drops the log record (dropMessage).
const startWarningLog = "durable: starting runs of a version that no live worker serves"

// dropMessage is a slog handler that drops the records of one message.
type dropMessage struct {
	slog.Handler
	msg string
}

// Handle drops a record of the message, passes the others on.
func (h dropMessage) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps dropping the message.
func (h dropMessage) WithAttrs(attrs []slog.Attr) slog.Handler {
	return dropMessage{Handler: h.Handler.WithAttrs(attrs), msg: h.msg}
}

// WithGroup keeps dropping the message.
func (h dropMessage) WithGroup(name string) slog.Handler {
	return dropMessage{Handler: h.Handler.WithGroup(name), msg: h.msg}
}
