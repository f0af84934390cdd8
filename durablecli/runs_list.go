package durablecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// listTime is how the run list prints times: to the second, local time.
const listTime = "2006-01-02 15:04:05"

func (c *cli) runsList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newRunsAction("list", runsListUsage, stderr)
	var ff filterFlags
	ff.register(a.fs)
	limit := a.fs.Int("limit", 50, "most runs on a page, 1 to 1000")
	cursor := a.fs.String("cursor", "", "continue a listing: the cursor its previous page printed (with the same filter flags)")
	parent := a.fs.String("parent", "", "only the child runs of this run (a run ID)")
	asJSON := a.fs.Bool("json", false, `print one JSON object: {"runs": [...], "next": CURSOR}`)
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	f, err := ff.parse()
	if err != nil {
		return a.usageErr("%v", err)
	}
	if *parent != "" {
		if f.filter.TopLevel {
			return a.usageErr("--parent lists child runs, --top-level leaves them out: give one")
		}
		if f.filter.Parent, err = uuid.Parse(*parent); err != nil {
			return a.usageErr("--parent %q is not a run ID: %v", *parent, err)
		}
		f.given = true
	}
	if *limit < 1 || *limit > 1000 {
		return a.usageErr("--limit must be between 1 and 1000, got %d", *limit)
	}
	var cur *listCursor
	if *cursor != "" {
		if cur, err = parseListCursor(*cursor, c.name); err != nil {
			return a.usageErr("--cursor: %v", err)
		}
	}

	op, err := a.open(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer op.close()
	filter, times, err := f.resolve(ctx, op, cur)
	if err != nil {
		return a.fail(err)
	}
	opts := durable.ListOptions{RunFilter: filter, Limit: *limit}
	if cur != nil {
		opts.Cursor = cur.engine
	}
	page, err := op.e.ListRuns(ctx, opts)
	if err != nil {
		if errors.Is(err, durable.ErrInvalidCursor) {
			err = fmt.Errorf("--cursor: %w", err)
		}
		return a.fail(err)
	}
	next := ""
	if page.Next != "" {
		next = (&listCursor{engine: page.Next, times: times}).String()
	}

	if *asJSON {
		var unserved func(workflow, version string) bool
		if durablejson.InFlight(page.Runs) {
			// One listing of the workers for the page, not one per run.
			ws, err := op.e.Workers(ctx)
			if err != nil && !errors.Is(err, durable.ErrWorkersUnsupported) {
				return a.fail(err)
			}
			if err == nil {
				unserved = durablejson.Unserved(ws)
			}
		}
		return a.printJSON(stdout, durablejson.NewRunList(page.Runs, next, unserved))
	}
	printRunList(stdout, page.Runs)
	if next != "" {
		fmt.Fprintf(stdout, "next page: %s\n", continueCommand(c.name, a.fs, next))
	}
	return 0
}

// printRunList prints runs as a table; when child runs are among them, a
// PARENT column names the parent run and step of each.
func printRunList(w io.Writer, runs []durabletype.RunSummary) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs match")
		return
	}
	children := slices.ContainsFunc(runs, func(r durabletype.RunSummary) bool { return r.ParentID != uuid.Nil })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if children {
		fmt.Fprintf(tw, "ID\tWORKFLOW\tVERSION\tTENANT\tSTATUS\tCREATED\tFINISHED\tPARENT (STEP)\tFAILURE\n")
	} else {
		fmt.Fprintf(tw, "ID\tWORKFLOW\tVERSION\tTENANT\tSTATUS\tCREATED\tFINISHED\tFAILURE\n")
	}
	for _, r := range runs {
		finished := "-"
		if !r.FinishedAt.IsZero() {
			finished = r.FinishedAt.Local().Format(listTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t", r.ID, r.Workflow, versionCell(r.Version), r.Tenant, r.Status,
			r.CreatedAt.Local().Format(listTime), finished)
		if children {
			parent := "-"
			if r.ParentID != uuid.Nil {
				parent = fmt.Sprintf("%s (%s)", r.ParentID, dag.DisplayName(r.ParentStep))
			}
			fmt.Fprintf(tw, "%s\t", parent)
		}
		fmt.Fprintf(tw, "%s\n", failure(r))
	}
	tw.Flush()
}

// versionCell is how a table shows a run's version: "-" for a run
// recorded before versions.
func versionCell(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

// failure describes why a run failed, or why it was cancelled, on one line
// of at most failureColumn characters.
func failure(r durabletype.RunSummary) string {
	var s string
	switch {
	case r.FailedStep != "":
		s = fmt.Sprintf("step %q: %s", r.FailedStep, oneLine(r.Error, failureColumn))
	case r.Error != "":
		s = oneLine(r.Error, failureColumn)
	default:
		return "-"
	}
	return oneLine(s, failureColumn)
}

// continueCommand is the command line that prints the next page: the flags
// given, but --database-url (which may hold a password) and the cursor,
// then the new cursor.
func continueCommand(prog string, fs *flag.FlagSet, next string) string {
	parts := []string{shellQuote(prog), "runs", "list"}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "database-url", "cursor":
			return
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			parts = append(parts, "--"+f.Name+"="+f.Value.String())
			return
		}
		parts = append(parts, "--"+f.Name, shellQuote(f.Value.String()))
	})
	parts = append(parts, "--cursor", next)
	return strings.Join(parts, " ")
}
