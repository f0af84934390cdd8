package durablecli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

const schedulesUsage = `Usage: {name} schedules <create|list|pause|resume|delete> [flags]

  create  create a schedule: a workflow of this program, a tenant, an input
          and a cron expression in a time zone
  list    list schedules by tenant and name, with their next slot
  pause   stop a schedule firing (NAME, with --tenant)
  resume  resume a paused schedule from its next slot after now; the slots
          that passed while it was paused are skipped (NAME, with --tenant)
  delete  delete a schedule; the runs it started are kept (NAME, with
          --tenant)

The leader among the "{name} worker" processes fires each slot once, as a
run of the workflow. When no worker ran at a slot's time, only the latest
missed slot fires, once, as soon as a leader runs (see docs/semantics.md).

Every action needs --database-url (or $DURABLE_DATABASE_URL); the schema is
checked, never migrated. Run "{name} schedules <action> -h" for its flags.

Exit status: 0 done, 1 failed (schedule not found or exists already,
database errors), 2 bad flags, expression, time zone or input.
`

const schedulesCreateUsage = `Usage: {name} schedules create NAME --cron EXPR --workflow NAME --database-url URL [flags]

Creates the schedule NAME of --tenant. --cron is a cron expression: five
fields (minute hour day-of-month month day-of-week), six with seconds first
("*/10 * * * * *"), or @hourly, @daily, @weekly, @monthly, @yearly. It is
read in --tz, an IANA time zone (default UTC). --input is every run's
input, as JSON of the workflow's input type (default: the workflow's
default input, as for "{name} trigger"; required for a workflow without
one). A tenant's schedule names are unique: creating one that exists
fails (delete it first).

Prints the schedule as "list" does (--json: one object).

Flags:
`

const schedulesListUsage = `Usage: {name} schedules list --database-url URL [--tenant T] [--json]

Lists schedules by tenant and name: tenant, name, workflow, expression, time
zone, state (active, paused, or broken with its error), next slot and last
slot fired (RFC 3339, UTC), and where it comes from: "code" for a schedule
a workflow declares (Workflow.DeclareSchedule; every worker start makes it
as declared), "api" for one created with "schedules create" or the API.

With --json, one JSON object: {"schedules": [{"id", "tenant", "name",
"workflow", "cron", "time_zone", "input", "paused", "next_at", "last_slot",
"last_run_id", "error", "created_at", "declared"}, ...]}, times null when
unset.

Flags:
`

const schedulesActUsage = `Usage: {name} schedules %s NAME --tenant T --database-url URL

%s

Flags:
`

func (c *cli) schedulesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	act := func(name, what string) command {
		return func(ctx context.Context, a []string, o, e io.Writer) int {
			return c.schedulesAct(ctx, name, what, a, o, e)
		}
	}
	return c.dispatch(ctx, "schedules", schedulesUsage, map[string]command{
		"create": c.schedulesCreate,
		"list":   c.schedulesList,
		"pause":  act("pause", "Pauses the schedule: it fires nothing until resumed."),
		"resume": act("resume", "Resumes the schedule from its first slot after now; slots passed while\nit was paused are skipped."),
		"delete": act("delete", "Deletes the schedule; the runs it started are kept."),
	}, args, stdout, stderr)
}

func (c *cli) newSchedulesAction(name, usage string, stderr io.Writer) *runsAction {
	return c.newCommand("schedules "+name, usage, stderr)
}

// scheduleFail reports an error: 2 for an invalid schedule, 1 otherwise.
func scheduleFail(a *runsAction, err error) int {
	fmt.Fprintf(a.stderr, "%s %s: %v\n", a.c.name, a.fs.Name(), err)
	if errors.Is(err, durabletype.ErrInvalidSchedule) || errors.Is(err, durabletype.ErrInvalidTenant) || invalidValue(err) {
		return exitUsage
	}
	return 1
}

func (c *cli) schedulesCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newSchedulesAction("create", c.withWorkflows(schedulesCreateUsage, true), stderr)
	var spec durable.ScheduleSpec
	var input string
	var asJSON bool
	a.fs.StringVar(&spec.Tenant, "tenant", "default", "tenant the schedule and its runs belong to")
	a.fs.StringVar(&spec.Workflow, "workflow", "", "workflow to run"+c.workflowList(": "))
	a.fs.StringVar(&spec.Cron, "cron", "", "cron expression, e.g. \"*/5 * * * *\"")
	a.fs.StringVar(&spec.TimeZone, "tz", "UTC", "IANA time zone of the expression, e.g. Europe/Paris")
	a.fs.StringVar(&input, "input", "", "every run's input, as JSON of the workflow's input type (default: the workflow's default input)")
	a.fs.BoolVar(&spec.Paused, "paused", false, "create the schedule paused")
	a.fs.BoolVar(&asJSON, "json", false, "print JSON")
	wf := c.workflowFlags("schedules create", a.fs)
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) == 0:
		return a.usageErr("the schedule's NAME is required")
	case spec.Workflow == "":
		return a.usageErr("--workflow is required")
	case spec.Cron == "":
		return a.usageErr("--cron is required")
	}
	spec.Name = pos[0]
	if code := a.check(req(dag.ScheduleNameRule, "NAME", spec.Name), req(dag.TenantRule, "--tenant", spec.Tenant),
		req(dag.NameRule, "--workflow", spec.Workflow)); code >= 0 {
		return code
	}

	// The workflow and the input are checked before connecting.
	pool, err := a.db.NewPool(2)
	if err != nil {
		return a.fail(err)
	}
	defer pool.Close()
	set, le := c.workflows(ctx, wf, pool, a.db.Schema)
	if le != nil {
		return le.report(stderr, c.name+" "+a.fs.Name())
	}
	e, err := c.client(pool, a.db.Schema, set, "schedules", stderr)
	if err != nil {
		return a.fail(err)
	}
	if !registered(e, spec.Workflow) {
		return a.usageErr("--workflow: %s", set.unknownWorkflow(spec.Workflow))
	}
	given := false
	a.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "input" })
	if spec.Input, _, err = set.input(spec.Workflow, input, given); err != nil {
		return a.usageErr("%v", err)
	}
	if err := a.db.Ping(ctx, pool); err != nil {
		return a.fail(err)
	}
	if err := e.Check(ctx); err != nil {
		return a.fail(c.explainSchemaError(err, a.db.Schema))
	}
	sc, err := e.CreateSchedule(ctx, spec)
	if err != nil {
		return scheduleFail(a, err)
	}
	if asJSON {
		return writeJSON(a, stdout, scheduleJSON(sc))
	}
	printSchedules(stdout, []*durabletype.Schedule{sc})
	return 0
}

func (c *cli) schedulesList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newSchedulesAction("list", schedulesListUsage, stderr)
	var tenant string
	var asJSON bool
	a.fs.StringVar(&tenant, "tenant", "", "list this tenant's schedules only")
	a.fs.BoolVar(&asJSON, "json", false, "print JSON")
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	if code := a.check(opt(dag.TenantRule, "--tenant", tenant)); code >= 0 {
		return code
	}
	op, err := c.openOperator(ctx, a.db, "schedules", stderr)
	if err != nil {
		return a.fail(err)
	}
	defer op.close()
	var all []*durabletype.Schedule
	var after *durabletype.ScheduleKey
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
		after = &durabletype.ScheduleKey{Tenant: last.Tenant, Name: last.Name}
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

func (c *cli) schedulesAct(ctx context.Context, name, what string, args []string, stdout, stderr io.Writer) int {
	a := c.newSchedulesAction(name, fmt.Sprintf(schedulesActUsage, name, what), stderr)
	var tenant string
	a.fs.StringVar(&tenant, "tenant", "default", "tenant of the schedule")
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return code
	}
	if len(pos) == 0 {
		return a.usageErr("the schedule's NAME is required")
	}
	if code := a.check(req(dag.ScheduleNameRule, "NAME", pos[0]), req(dag.TenantRule, "--tenant", tenant)); code >= 0 {
		return code
	}
	op, err := c.openOperator(ctx, a.db, "schedules", stderr)
	if err != nil {
		return a.fail(err)
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

func scheduleJSON(sc *durabletype.Schedule) map[string]any {
	m := map[string]any{
		"id": sc.ID.String(), "tenant": sc.Tenant, "name": sc.Name, "workflow": sc.Workflow,
		"cron": sc.Cron, "time_zone": sc.TimeZone, "paused": sc.Paused,
		"next_at": rfc3339(sc.NextAt), "last_slot": rfc3339(sc.LastSlot), "error": sc.Error,
		"created_at": rfc3339(sc.CreatedAt), "last_run_id": nil, "declared": sc.Declared,
	}
	if json.Valid(sc.Input) {
		m["input"] = json.RawMessage(sc.Input)
	}
	if !sc.LastSlot.IsZero() {
		m["last_run_id"] = sc.LastRunID.String()
	}
	return m
}

func printSchedules(w io.Writer, all []*durabletype.Schedule) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tNAME\tWORKFLOW\tCRON\tTZ\tSTATE\tNEXT\tLAST\tFROM")
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
		from := "api"
		if sc.Declared {
			from = "code"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sc.Tenant, sc.Name, sc.Workflow, sc.Cron, tz, state,
			dash(sc.NextAt), dash(sc.LastSlot), from)
	}
	tw.Flush()
}
