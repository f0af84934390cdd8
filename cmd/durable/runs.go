package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/pgstore"
)

const runsUsage = `Usage: durable runs show RUN_ID --database-url URL [flags]

  show    print a run (workflow, tenant, status, times, failure) and a table
          of its steps: state, attempts, when each started and finished, when
          a sleep or a retry backoff is due, and the latest error; with
          --events, the run's event log too

Times in the tables are relative to the run's creation. The schema is only
read, never migrated.

Flags:
`

// errorColumn is the widest error shown in the step table.
const errorColumn = 80

func runsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	var db dbFlags
	db.register(fs, true)
	events := fs.Bool("events", false, "also print the run's event log")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runsUsage)
		fs.PrintDefaults()
	}
	if code := subcommandHelp(fs, args, stderr); code >= 0 {
		return code
	}
	if args[0] != "show" {
		fmt.Fprintf(stderr, "durable runs: unknown action %q\n\n", args[0])
		fs.SetOutput(stderr)
		fs.Usage()
		return exitUsage
	}
	pos, code := parseInterspersed(fs, args[1:], stderr)
	if code >= 0 {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "durable runs show: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case len(pos) == 0:
		return usageErr("a RUN_ID is required")
	case len(pos) > 1:
		return usageErr("unexpected argument %q", pos[1])
	case db.url == "":
		return usageErr("--database-url (or $%s) is required", envDatabaseURL)
	}
	id, err := uuid.Parse(pos[0])
	if err != nil {
		return usageErr("%q is not a run ID: %v", pos[0], err)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "durable runs show: %v\n", err)
		return 1
	}

	pool, err := db.open(ctx, 2)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, &pgstore.Config{Schema: db.schema})
	if err != nil {
		return fail(err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := durable.New(s, durable.Config{Logger: logger, WorkerID: "durable-runs"})
	if err != nil {
		return fail(err)
	}
	res, err := e.Get(ctx, id)
	if err != nil {
		return fail(explainReadError(err, id, db.schema))
	}
	var evs []durable.Event
	if *events {
		if evs, err = e.Events(ctx, id); err != nil {
			return fail(explainReadError(err, id, db.schema))
		}
	}
	printRun(stdout, res, evs, *events)
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

// explainReadError turns the errors an operator can act on into plain
// messages.
func explainReadError(err error, id uuid.UUID, schema string) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, durable.ErrRunNotFound):
		return fmt.Errorf("run %s not found in schema %s", id, schema)
	case errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000"):
		return fmt.Errorf("schema %s has no durable tables (wrong --schema, or run \"durable migrate up\"): %w", schema, err)
	}
	return err
}

// printRun prints a run, its steps and, with events, its event log.
func printRun(w io.Writer, res *durable.RunResult, evs []durable.Event, events bool) {
	rel := func(t time.Time) string { return offset(t, res.CreatedAt) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", res.ID)
	fmt.Fprintf(tw, "workflow\t%s\n", res.Workflow)
	fmt.Fprintf(tw, "tenant\t%s\n", res.Tenant)
	fmt.Fprintf(tw, "status\t%s\n", res.Status)
	fmt.Fprintf(tw, "created\t%s\n", timestamp(res.CreatedAt))
	if res.Done() {
		fmt.Fprintf(tw, "finished\t%s\n", timestamp(res.FinishedAt))
		fmt.Fprintf(tw, "duration\t%s\n", res.FinishedAt.Sub(res.CreatedAt).Round(time.Millisecond))
	} else {
		fmt.Fprintf(tw, "finished\t- (not settled)\n")
	}
	var re *durable.RunError
	if errors.As(res.Err, &re) {
		fmt.Fprintf(tw, "failure\tstep %q: %s\n", re.Step, oneLine(re.Message, 200))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nsteps (times relative to the run's creation):\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "STEP\tSTATE\tATTEMPTS\tSTARTED\tFINISHED\tTOOK\tDUE\tERROR\n")
	for _, s := range res.Steps {
		took := "-"
		if !s.StartedAt.IsZero() && !s.FinishedAt.IsZero() {
			took = s.FinishedAt.Sub(s.StartedAt).Round(time.Millisecond).String()
		}
		due := "-"
		if !s.DueAt.IsZero() && (s.State == durable.StepSleeping || s.State == durable.StepQueued) {
			due = rel(s.DueAt)
		}
		errText := "-"
		if s.Error != "" {
			errText = oneLine(s.Error, errorColumn)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			s.Name, s.State, s.Attempts, rel(s.StartedAt), rel(s.FinishedAt), took, due, errText)
	}
	tw.Flush()
	if !events {
		return
	}

	fmt.Fprintf(w, "\nevents (%d):\n", len(evs))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "AT\tSTEP\tTYPE\tATTEMPT\tDETAIL\n")
	for _, ev := range evs {
		detail := oneLine(ev.Detail, 120)
		switch ev.Type {
		case durable.EventSleeping:
			detail = "until " + rel(ev.DueAt)
		case durable.EventRetrying:
			detail = "next attempt at " + rel(ev.DueAt) + " after: " + detail
		}
		if detail == "" {
			detail = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", rel(ev.At), ev.Step, ev.Type, ev.Attempt, detail)
	}
	tw.Flush()
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
