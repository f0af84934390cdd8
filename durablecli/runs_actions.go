package durablecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// bulkAction is what cancel and replay do, to runs named by ID or to every
// run a filter matches.
type bulkAction struct {
	verb string // "cancelled", "replayed"
	all  string // what --all selects, for its help and errors
	// check lists the values of the action's own flags to check.
	check func() []value
	one   func(ctx context.Context, e *durable.Engine, id uuid.UUID) error
	many  func(ctx context.Context, e *durable.Engine, f durable.RunFilter) (*durable.BulkResult, error)
}

func (c *cli) runsCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newRunsAction("cancel", runsCancelUsage, stderr)
	reason := a.fs.String("reason", "", "why the runs are cancelled: recorded as their error and in their events (at most 1000 bytes)")
	return runBulk(ctx, a, args, stdout, bulkAction{
		check: func() []value { return []value{opt(dag.ReasonRule, "--reason", *reason)} },
		verb:  "cancelled",
		all:   "every run in flight",
		one: func(ctx context.Context, e *durable.Engine, id uuid.UUID) error {
			return e.Cancel(ctx, id, *reason)
		},
		many: func(ctx context.Context, e *durable.Engine, f durable.RunFilter) (*durable.BulkResult, error) {
			return e.CancelRuns(ctx, f, *reason)
		},
	})
}

func (c *cli) runsReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newRunsAction("replay", runsReplayUsage, stderr)
	from := a.fs.String("from-step", "", "run this step and its descendants again even if they completed")
	return runBulk(ctx, a, args, stdout, bulkAction{
		check: func() []value { return []value{opt(dag.NameRule, "--from-step", *from)} },
		verb:  "replayed",
		all:   "every FAILED and CANCELLED run",
		one: func(ctx context.Context, e *durable.Engine, id uuid.UUID) error {
			err := e.Replay(ctx, id, durable.ReplayOptions{FromStep: *from})
			if errors.Is(err, durabletype.ErrStepNotFound) {
				return fmt.Errorf("run %s has no step %q", id, *from)
			}
			return err
		},
		many: func(ctx context.Context, e *durable.Engine, f durable.RunFilter) (*durable.BulkResult, error) {
			return e.ReplayRuns(ctx, f, durable.ReplayOptions{FromStep: *from})
		},
	})
}

// runBulk parses the arguments of cancel or replay (run IDs, or filter
// flags, or --all) and applies the action.
func runBulk(ctx context.Context, a *runsAction, args []string, stdout io.Writer, act bulkAction) int {
	var ff filterFlags
	ff.register(a.fs)
	all := a.fs.Bool("all", false, "with no run ID and no filter flag: act on "+act.all)
	pos, code := a.parse(args, -1)
	if code >= 0 {
		return code
	}
	f, err := ff.parse()
	if err != nil {
		return a.usageErr("%v", err)
	}
	switch {
	case len(pos) > 0 && (f.given || *all):
		return a.usageErr("give run IDs, or filter flags, not both")
	case f.given && *all:
		return a.usageErr("--all selects %s: it takes no filter flags", act.all)
	case len(pos) == 0 && !f.given && !*all:
		return a.usageErr("give run IDs, or filter flags (--status, --workflow, --version, --tenant, --since, --until, --finished-since, --finished-until), or --all for %s", act.all)
	}
	ids, code := a.parseIDs(pos)
	if code >= 0 {
		return code
	}
	if code := a.check(act.check()...); code >= 0 {
		return code
	}

	op, err := a.open(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer op.close()
	if len(ids) > 0 {
		failed := 0
		for _, id := range ids {
			if err := act.one(ctx, op.e, id); err != nil {
				fmt.Fprintf(a.stderr, "%s %s: %v\n", a.c.name, a.fs.Name(), a.c.explainRunError(err, id, op.schema))
				failed++
				continue
			}
			fmt.Fprintf(stdout, "%s %s\n", id, act.verb)
		}
		if failed > 0 {
			if len(ids) > 1 {
				fmt.Fprintf(a.stderr, "%s %s: %d of %d runs could not be %s\n", a.c.name, a.fs.Name(), failed, len(ids), act.verb)
			}
			return 1
		}
		return 0
	}
	filter, _, err := f.resolve(ctx, op, nil)
	if err != nil {
		return a.fail(err)
	}
	res, err := act.many(ctx, op.e, filter)
	if res != nil && (err == nil || res.Done > 0) {
		fmt.Fprintf(stdout, "%s %s (%d skipped)\n", act.verb, plural(res.Done, "run"), res.Skipped)
	}
	if err != nil {
		return a.fail(err)
	}
	return 0
}

func (c *cli) runsPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newRunsAction("prune", runsPruneUsage, stderr)
	olderThan := a.fs.Duration("older-than", 0, "delete runs that settled more than this long ago, e.g. 720h (required)")
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	given := false
	a.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "older-than" })
	switch {
	case !given:
		return a.usageErr("--older-than is required, e.g. --older-than 720h")
	case *olderThan < 0:
		return a.usageErr("--older-than must not be negative, got %s", *olderThan)
	}
	op, err := a.open(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer op.close()
	n, err := op.e.Prune(ctx, *olderThan)
	if err != nil {
		if n > 0 {
			fmt.Fprintf(stdout, "deleted %s before the error\n", plural(n, "run"))
		}
		return a.fail(err)
	}
	fmt.Fprintf(stdout, "deleted %s that settled more than %s ago\n", plural(n, "run"), *olderThan)
	return 0
}
