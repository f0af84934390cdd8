package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/internal/demo"
	"github.com/effectivelabs/durable/internal/workloads"
	"github.com/effectivelabs/durable/store"
)

const schedulesUsage = `Usage: durable schedules <create|list|pause|resume|delete> [flags]

  create  create a schedule: a built-in workflow, a tenant, an input and a
          cron expression in a time zone
  list    list schedules by tenant and name, with their next slot
  pause   stop a schedule firing (NAME, with --tenant)
  resume  resume a paused schedule from its next slot after now; the slots
          that passed while it was paused are skipped (NAME, with --tenant)
  delete  delete a schedule; the runs it started are kept (NAME, with
          --tenant)

The leader among the "durable worker" processes fires each slot once, as a
run of the workflow. When no worker ran at a slot's time, only the latest
missed slot fires, once, as soon as a leader runs (see docs/semantics.md).

Every action needs --database-url (or $DURABLE_DATABASE_URL); the schema is
checked, never migrated. Run "durable schedules <action> -h" for its flags.

Exit status: 0 done, 1 failed (schedule not found or exists already,
database errors), 2 bad flags, expression, time zone or input.
`

const schedulesCreateUsage = `Usage: durable schedules create NAME --cron EXPR --workflow NAME --database-url URL [flags]

Creates the schedule NAME of --tenant. --cron is a cron expression: five
fields (minute hour day-of-month month day-of-week), six with seconds first
("*/10 * * * * *"), or @hourly, @daily, @weekly, @monthly, @yearly. It is
read in --tz, an IANA time zone (default UTC). --input is every run's input,
as JSON of the workflow's input type (default: a valid input, as for
"durable trigger"). A tenant's schedule names are unique: creating one that
exists fails (delete it first).

Prints the schedule as "list" does (--json: one object).

Flags:
`

const schedulesListUsage = `Usage: durable schedules list --database-url URL [--tenant T] [--json]

Lists schedules by tenant and name: tenant, name, workflow, expression, time
zone, state (active, paused, or broken with its error), next slot and last
slot fired (RFC 3339, UTC).

With --json, one JSON object: {"schedules": [{"id", "tenant", "name",
"workflow", "cron", "time_zone", "input", "paused", "next_at", "last_slot",
"last_run_id", "error", "created_at"}, ...]}, times null when unset.

Flags:
`

const schedulesActUsage = `Usage: durable schedules %s NAME --tenant T --database-url URL

%s

Flags:
`

func schedulesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	actions := map[string]func(context.Context, []string, io.Writer, io.Writer) int{
		"create": schedulesCreate,
		"list":   schedulesList,
		"pause": func(ctx context.Context, a []string, o, e io.Writer) int {
			return schedulesAct(ctx, "pause", "Pauses the schedule: it fires nothing until resumed.", a, o, e)
		},
		"resume": func(ctx context.Context, a []string, o, e io.Writer) int {
			return schedulesAct(ctx, "resume", "Resumes the schedule from its first slot after now; slots passed while\nit was paused are skipped.", a, o, e)
		},
		"delete": func(ctx context.Context, a []string, o, e io.Writer) int {
			return schedulesAct(ctx, "delete", "Deletes the schedule; the runs it started are kept.", a, o, e)
		},
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, schedulesUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stderr, schedulesUsage)
		return 0
	}
	act, ok := actions[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "durable schedules: unknown action %q\n\n%s", args[0], schedulesUsage)
		return exitUsage
	}
	return act(ctx, args[1:], stdout, stderr)
}

func newSchedulesAction(name, usage string, stderr io.Writer) *runsAction {
	a := newRunsAction(name, usage, stderr)
	a.fs.Init("schedules "+name, a.fs.ErrorHandling())
	return a
}

// scheduleFail reports an error: 2 for an invalid schedule, 1 otherwise.
func scheduleFail(a *runsAction, err error) int {
	fmt.Fprintf(a.stderr, "durable %s: %v\n", a.fs.Name(), err)
	if errors.Is(err, durable.ErrInvalidSchedule) || errors.Is(err, durable.ErrInvalidTenant) {
		return exitUsage
	}
	return 1
}

// builtinDefinitions returns the built-in workflows (those "durable worker"
// serves) and the JSON of each one's default input.
func builtinDefinitions() (map[string]durable.Definition, map[string]any) {
	set := workloads.New(workloads.Options{FraudWindow: 2 * time.Second})
	defs := map[string]durable.Definition{
		demo.WorkflowName: set.Demo.Workflow,
		workloads.Noop:    set.Noop,
		workloads.DAG:     set.DAG,
		workloads.Chain:   set.Chain,
		workloads.Keyed:   set.Keyed,
		workloads.Map:     set.Map,
		workloads.Wait:    set.Wait,
		workloads.Parent:  set.Parent,
		workloads.Chaos:   set.Chaos,
	}
	inputs := map[string]any{
		demo.WorkflowName: demo.Order{ID: "cli-1", Customer: "cli", Cents: 4200, Items: []string{"keyboard"}},
		workloads.Noop:    0, workloads.DAG: 0, workloads.Chain: 0,
		workloads.Keyed: 0, workloads.Map: 0, workloads.Wait: 0, workloads.Parent: 0,
		workloads.Chaos: workloads.ChaosInput{},
	}
	return defs, inputs
}

func schedulesCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := newSchedulesAction("create", schedulesCreateUsage, stderr)
	var spec durable.ScheduleSpec
	var input string
	var asJSON bool
	a.fs.StringVar(&spec.Tenant, "tenant", "default", "tenant the schedule and its runs belong to")
	a.fs.StringVar(&spec.Workflow, "workflow", "", "workflow to run: "+strings.Join(builtinWorkflows(), ", "))
	a.fs.StringVar(&spec.Cron, "cron", "", "cron expression, e.g. \"*/5 * * * *\"")
	a.fs.StringVar(&spec.TimeZone, "tz", "UTC", "IANA time zone of the expression, e.g. Europe/Paris")
	a.fs.StringVar(&input, "input", "", "every run's input, as JSON of the workflow's input type (default: a valid input)")
	a.fs.BoolVar(&spec.Paused, "paused", false, "create the schedule paused")
	a.fs.BoolVar(&asJSON, "json", false, "print JSON")
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return code
	}
	if len(pos) == 0 {
		return a.usageErr("the schedule's NAME is required")
	}
	spec.Name = pos[0]
	defs, inputs := builtinDefinitions()
	def, ok := defs[spec.Workflow]
	switch {
	case !ok:
		return a.usageErr("--workflow %q: want one of %s", spec.Workflow, strings.Join(builtinWorkflows(), ", "))
	case spec.Cron == "":
		return a.usageErr("--cron is required")
	case !dag.ValidTenant(spec.Tenant):
		return a.usageErr("--tenant %q: want 1 to %d bytes of UTF-8 without control characters", spec.Tenant, dag.MaxTenantLen)
	}
	if input == "" {
		b, err := json.Marshal(inputs[spec.Workflow])
		if err != nil {
			return a.fail(err)
		}
		spec.Input = b
	} else {
		if !json.Valid([]byte(input)) {
			return a.usageErr("--input is not valid JSON")
		}
		spec.Input = []byte(input)
	}
	op, err := openOperator(ctx, &a.db, "schedules", stderr)
	if err != nil {
		return a.fail(explainSchemaError(err, a.db.schema))
	}
	defer op.close()
	if err := op.e.Register(def); err != nil {
		return a.fail(err)
	}
	sc, err := op.e.CreateSchedule(ctx, spec)
	if err != nil {
		return scheduleFail(a, err)
	}
	if asJSON {
		return writeJSON(a, stdout, scheduleJSON(sc))
	}
	printSchedules(stdout, []*durable.Schedule{sc})
	return 0
}

func schedulesList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := newSchedulesAction("list", schedulesListUsage, stderr)
	var tenant string
	var asJSON bool
	a.fs.StringVar(&tenant, "tenant", "", "list this tenant's schedules only")
	a.fs.BoolVar(&asJSON, "json", false, "print JSON")
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	op, err := openOperator(ctx, &a.db, "schedules", stderr)
	if err != nil {
		return a.fail(explainSchemaError(err, a.db.schema))
	}
	defer op.close()
	var all []*durable.Schedule
	var after *store.ScheduleKey
	for {
		page, err := op.e.ListSchedules(ctx, durable.ScheduleListOptions{Tenant: tenant, After: after, Limit: 1000})
		if err != nil {
			return a.fail(err)
		}
		all = append(all, page.Schedules...)
		if !page.More || len(page.Schedules) == 0 {
			break
		}
		last := page.Schedules[len(page.Schedules)-1]
		after = &store.ScheduleKey{Tenant: last.Tenant, Name: last.Name}
	}
	if asJSON {
		out := struct {
			Schedules []map[string]any `json:"schedules"`
		}{Schedules: []map[string]any{}}
		for _, sc := range all {
			out.Schedules = append(out.Schedules, scheduleJSON(sc))
		}
		return writeJSON(a, stdout, out)
	}
	printSchedules(stdout, all)
	return 0
}

func schedulesAct(ctx context.Context, name, what string, args []string, stdout, stderr io.Writer) int {
	a := newSchedulesAction(name, fmt.Sprintf(schedulesActUsage, name, what), stderr)
	var tenant string
	a.fs.StringVar(&tenant, "tenant", "default", "tenant of the schedule")
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return code
	}
	if len(pos) == 0 {
		return a.usageErr("the schedule's NAME is required")
	}
	op, err := openOperator(ctx, &a.db, "schedules", stderr)
	if err != nil {
		return a.fail(explainSchemaError(err, a.db.schema))
	}
	defer op.close()
	switch name {
	case "pause":
		_, err = op.e.PauseSchedule(ctx, tenant, pos[0])
	case "resume":
		_, err = op.e.ResumeSchedule(ctx, tenant, pos[0])
	case "delete":
		err = op.e.DeleteSchedule(ctx, tenant, pos[0])
	}
	if err != nil {
		return scheduleFail(a, err)
	}
	done := map[string]string{"pause": "paused", "resume": "resumed", "delete": "deleted"}[name]
	fmt.Fprintf(stdout, "%s/%s %s\n", tenant, pos[0], done)
	return 0
}

func writeJSON(a *runsAction, w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return a.fail(err)
	}
	return 0
}

func rfc3339(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func scheduleJSON(sc *durable.Schedule) map[string]any {
	m := map[string]any{
		"id": sc.ID.String(), "tenant": sc.Tenant, "name": sc.Name, "workflow": sc.Workflow,
		"cron": sc.Cron, "time_zone": sc.TimeZone, "paused": sc.Paused,
		"next_at": rfc3339(sc.NextAt), "last_slot": rfc3339(sc.LastSlot), "error": sc.Error,
		"created_at": rfc3339(sc.CreatedAt), "last_run_id": nil,
	}
	if json.Valid(sc.Input) {
		m["input"] = json.RawMessage(sc.Input)
	}
	if !sc.LastSlot.IsZero() {
		m["last_run_id"] = sc.LastRunID.String()
	}
	return m
}

func printSchedules(w io.Writer, all []*durable.Schedule) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tNAME\tWORKFLOW\tCRON\tTZ\tSTATE\tNEXT\tLAST")
	dash := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, sc := range all {
		state := "active"
		switch {
		case sc.Error != "":
			state = "broken: " + sc.Error
		case sc.Paused:
			state = "paused"
		}
		tz := sc.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sc.Tenant, sc.Name, sc.Workflow, sc.Cron, tz, state, dash(sc.NextAt), dash(sc.LastSlot))
	}
	tw.Flush()
}
