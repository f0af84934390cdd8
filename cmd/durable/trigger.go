package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/internal/demo"
	"github.com/effectivelabs/durable/internal/workloads"
)

const triggerUsage = `Usage: durable trigger --database-url URL --workflow NAME [flags]

Starts --count runs of a built-in workflow (those "durable worker" serves:
order-processing, bench-noop, bench-dag, bench-chain, bench-keyed,
bench-map, bench-wait, bench-parent, chaos) in one transaction, and prints
their IDs, one a line. Every run gets the same input: --input, as JSON of
the workflow's input type, or a default (a valid order for
order-processing, {"n":0} for chaos, 0 for the bench-* workflows). The
input of bench-map is its number of items; bench-wait N waits for the event
"bench-N" and chaos {"n":N} for "chaos-N" (see "durable events send");
bench-parent starts 10 child runs of bench-child.

With --wait it then waits for each run to settle and prints a line per run,
"<id> <STATUS> in <duration>", with the failure of a failed run; it exits 1
if any run did not complete (failed, or still running after --timeout).

--idempotency-key makes the trigger idempotent: a run of the workflow and
tenant started with that key before (and still kept) is not started again;
its ID is printed and "duplicate" said on stderr (with --count above 1, one
run is started and the others are its duplicates). --priority (0-3),
--start-after and --run-timeout set the run's priority, delayed start and
deadline (see docs/semantics.md, "Flow control").

This command only starts runs: "durable worker" processes execute them. The
schema is migrated up first if needed.

Flags:
`

// maxTriggerCount bounds --count: the runs are created in one transaction.
const maxTriggerCount = 100_000

// triggerOptions are the flags of `durable trigger`.
type triggerOptions struct {
	db          dbFlags
	workflow    string
	tenant      string
	count       int
	input       string
	wait        bool
	timeout     time.Duration
	fraudWindow time.Duration
	key         string
	priority    int
	startAfter  time.Duration
	runTimeout  time.Duration
}

// starter starts count runs of one workflow with an already decoded input.
type starter func(ctx context.Context, e *durable.Engine, tenant string, count int, opts []durable.TriggerOption) ([]durable.Started, error)

func triggerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trigger", flag.ContinueOnError)
	var o triggerOptions
	o.db.register(fs, true)
	fs.StringVar(&o.workflow, "workflow", "", "workflow to run: "+strings.Join(builtinWorkflows(), ", "))
	fs.StringVar(&o.tenant, "tenant", "default", "tenant the runs belong to")
	fs.IntVar(&o.count, "count", 1, "number of runs to start")
	fs.StringVar(&o.input, "input", "", "input of every run, as JSON of the workflow's input type (default: a valid input)")
	fs.BoolVar(&o.wait, "wait", false, "wait for the runs to settle and print their statuses")
	fs.DurationVar(&o.timeout, "timeout", 0, "with --wait, how long to wait at most (0: no limit)")
	fs.DurationVar(&o.fraudWindow, "fraud-window", 2*time.Second, "order-processing's durable sleep, recorded in the runs started here")
	fs.StringVar(&o.key, "idempotency-key", "", "start no run if one of this workflow and tenant was started with this key (1-255 bytes)")
	fs.IntVar(&o.priority, "priority", 0, "the runs' priority within their tenant, 0 (default) to 3")
	fs.DurationVar(&o.startAfter, "start-after", 0, "start the runs this long from now (a durable timer)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 0, "fail the runs that have not settled this long from now (0: no deadline)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), triggerUsage)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "durable trigger: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case o.db.url == "":
		return usageErr("--database-url (or $%s) is required", envDatabaseURL)
	case o.workflow == "":
		return usageErr("--workflow is required: one of %s", strings.Join(builtinWorkflows(), ", "))
	case o.count < 1 || o.count > maxTriggerCount:
		return usageErr("--count must be between 1 and %d, got %d", maxTriggerCount, o.count)
	case !dag.ValidTenant(o.tenant):
		return usageErr("--tenant %q: want 1 to %d bytes of UTF-8 without control characters", o.tenant, dag.MaxTenantLen)
	case o.timeout < 0:
		return usageErr("--timeout must not be negative, got %s", o.timeout)
	case o.timeout > 0 && !o.wait:
		return usageErr("--timeout applies only with --wait")
	case o.fraudWindow <= 0:
		return usageErr("--fraud-window must be positive, got %s", o.fraudWindow)
	case o.key != "" && !dag.ValidKey(o.key):
		return usageErr("--idempotency-key %q: want 1 to %d bytes of UTF-8 without control characters", o.key, dag.MaxKeyLen)
	case o.priority < int(durable.PriorityNormal) || o.priority > int(durable.PriorityUrgent):
		return usageErr("--priority must be between %d and %d, got %d", durable.PriorityNormal, durable.PriorityUrgent, o.priority)
	case o.startAfter < 0:
		return usageErr("--start-after must not be negative, got %s", o.startAfter)
	case o.runTimeout < 0:
		return usageErr("--run-timeout must not be negative, got %s", o.runTimeout)
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
	start, err := newStarter(workloads.New(workloads.Options{FraudWindow: o.fraudWindow}), o.workflow, o.input)
	if err != nil {
		return usageErr("%v", err)
	}

	s, pool, err := o.db.openStore(ctx, 4, true)
	if err != nil {
		fmt.Fprintf(stderr, "durable trigger: %v\n", err)
		return 1
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Never started: this engine is a client of the workers.
	e, err := durable.New(s, durable.Config{Logger: logger, WorkerID: "durable-trigger"})
	if err != nil {
		fmt.Fprintf(stderr, "durable trigger: %v\n", err)
		return 1
	}
	started, err := start(ctx, e, o.tenant, o.count, opts)
	if err != nil {
		fmt.Fprintf(stderr, "durable trigger: %v\n", err)
		return 1
	}
	var ids []uuid.UUID // each run once, for --wait
	seen := make(map[uuid.UUID]bool, len(started))
	for _, st := range started {
		fmt.Fprintln(stdout, st.RunID)
		if st.Duplicate {
			fmt.Fprintf(stderr, "durable trigger: %s: duplicate (idempotency key %q)\n", st.RunID, o.key)
		}
		if !seen[st.RunID] {
			seen[st.RunID] = true
			ids = append(ids, st.RunID)
		}
	}
	if !o.wait {
		return 0
	}
	return waitRuns(ctx, e, ids, o.timeout, stdout, stderr)
}

// builtinWorkflows lists the workflows `durable trigger` can start.
func builtinWorkflows() []string {
	return []string{demo.WorkflowName, workloads.Noop, workloads.DAG, workloads.Chain, workloads.Keyed,
		workloads.Map, workloads.Wait, workloads.Parent, workloads.Chaos}
}

// newStarter decodes input (JSON; empty for the workflow's default input)
// for the named workflow of set.
func newStarter(set *workloads.Set, name, input string) (starter, error) {
	switch name {
	case demo.WorkflowName:
		def := demo.Order{ID: "cli-1", Customer: "cli", Cents: 4200, Items: []string{"keyboard"}}
		return starterFor(set.Demo.Workflow, input, def)
	case workloads.Noop:
		return starterFor(set.Noop, input, 0)
	case workloads.DAG:
		return starterFor(set.DAG, input, 0)
	case workloads.Chain:
		return starterFor(set.Chain, input, 0)
	case workloads.Keyed:
		return starterFor(set.Keyed, input, 0)
	case workloads.Map:
		return starterFor(set.Map, input, 0)
	case workloads.Wait:
		return starterFor(set.Wait, input, 0)
	case workloads.Parent:
		return starterFor(set.Parent, input, 0)
	case workloads.Chaos:
		return starterFor(set.Chaos, input, workloads.ChaosInput{})
	}
	return nil, fmt.Errorf("unknown workflow %q: want one of %s", name, strings.Join(builtinWorkflows(), ", "))
}

func starterFor[I any](wf *durable.Workflow[I], input string, def I) (starter, error) {
	in := def
	if input != "" {
		if err := decodeStrict(input, &in); err != nil {
			return nil, fmt.Errorf("--input for %s: %w", wf.Name(), err)
		}
	}
	return func(ctx context.Context, e *durable.Engine, tenant string, count int, opts []durable.TriggerOption) ([]durable.Started, error) {
		ts := make([]durable.Trigger[I], count)
		for i := range ts {
			ts[i] = durable.Trigger[I]{Tenant: tenant, Input: in, Options: opts}
		}
		return wf.StartMany(ctx, e, ts)
	}, nil
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data, so that a typo in a field name is an error rather than a
// zero value.
func decodeStrict(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON: unexpected data after the value")
	}
	return nil
}

// waitRuns waits for each run in turn and prints its final status; it
// returns 1 if any run did not complete.
func waitRuns(ctx context.Context, e *durable.Engine, ids []uuid.UUID, timeout time.Duration, stdout, stderr io.Writer) int {
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
			fmt.Fprintf(stderr, "durable trigger: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, statusLine(res, timeout))
		if res.Status != durable.RunCompleted {
			notDone = append(notDone, id)
		}
	}
	if len(notDone) > 0 {
		fmt.Fprintf(stderr, "durable trigger: %d of %d runs did not complete\n", len(notDone), len(ids))
		return 1
	}
	return 0
}

// statusLine describes a run for `durable trigger --wait`.
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
		fmt.Fprintf(&b, ": step %q: %s", re.Step, oneLine(re.Message, 200))
	}
	return b.String()
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
