package durablecli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
)

// section returns the lines of out from the line starting with header to
// the next blank line.
func section(t *testing.T, out, header string) []string {
	t.Helper()
	var lines []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, header):
			in = true
		case in && l == "":
			return lines
		}
		if in {
			lines = append(lines, l)
		}
	}
	require.True(t, in, "no %q in:\n%s", header, out)
	return lines
}

// requireAligned checks that every row of a table starts its columns where
// the header's columns start.
func requireAligned(t *testing.T, table []string, columns ...string) {
	t.Helper()
	header := table[0]
	for _, col := range columns {
		at := strings.Index(header, col)
		require.GreaterOrEqual(t, at, 0, "column %s in %q", col, header)
		for _, row := range table[1:] {
			require.Greater(t, len(row), at, "row %q", row)
			require.NotEqual(t, byte(' '), row[at], "column %s of row %q", col, row)
			require.Equal(t, byte(' '), row[at-1], "column %s of row %q", col, row)
		}
	}
}

// stepRow returns the row of the step table for a step.
func stepRow(t *testing.T, table []string, step string) string {
	t.Helper()
	for _, row := range table[1:] {
		if strings.HasPrefix(row, step+" ") {
			return row
		}
	}
	require.Failf(t, "no step row", "step %s in:\n%s", step, strings.Join(table, "\n"))
	return ""
}

func TestRunsShow(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	p.StartWorker(t)
	flow := newFixtures(50 * time.Millisecond).Demo
	ctx := context.Background()
	res, err := flow.Workflow.Run(ctx, p.Client(t), "ada", order{ID: "A-1", Customer: "ada", Cents: 100, Items: []string{"pen"}})
	require.NoError(t, err)
	id := res.ID.String()

	code, out, errOut := runCLI(t, p.Flags("runs", "show", id)...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Empty(t, errOut)
	for _, want := range []string{
		"run       " + id + "\n",
		"workflow  order-processing\n",
		"tenant    ada\n",
		"status    COMPLETED\n",
		"duration  ",
		"steps (times relative to the run's creation):",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "failure")
	require.NotContains(t, out, "events (")
	steps := section(t, out, "STEP ")
	require.Len(t, steps, 1+len(res.Steps))
	requireAligned(t, steps, "PARENTS", "STATE", "ATTEMPTS", "STARTED", "FINISHED", "TOOK", "DUE", "ERROR")
	require.Regexp(t, `^charge +validate +COMPLETED +2 +\+\d+\.\d{3}s +\+\d+\.\d{3}s +\d+(\.\d+)?m?s +- +-$`, stepRow(t, steps, "charge"),
		"a completed step has no error; its retry shows in the events")
	require.Regexp(t, `^reject +validate +SKIPPED +0 +- +\+\d+\.\d{3}s +- `, stepRow(t, steps, "reject"),
		"its own condition fired on a worker: it never ran (the events show the skip)")
	require.Regexp(t, `^fraud-window +charge +COMPLETED +0 +\+\d+\.\d{3}s +\+\d+\.\d{3}s `, stepRow(t, steps, "fraud-window"))

	// Flags may come before the run ID too.
	code, out, errOut = runCLI(t, append(p.Flags("runs", "show", "--events"), id)...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	evs, err := p.Client(t).Events(ctx, res.ID)
	require.NoError(t, err)
	require.Contains(t, out, "events (")
	events := section(t, out, "AT ")
	require.Len(t, events, 1+len(evs))
	requireAligned(t, events, "STEP", "TYPE", "ATTEMPT", "DETAIL")
	joined := strings.Join(events, "\n")
	require.Regexp(t, `(?m)^\+0\.\d{3}s +validate +QUEUED +0 +-$`, joined)
	require.Regexp(t, `(?m)^\+\d+\.\d{3}s +charge +RETRYING +1 +next attempt at \+\d+\.\d{3}s after: payment gateway timeout$`, joined)
	require.Regexp(t, `(?m)^\+\d+\.\d{3}s +fraud-window +SLEEPING +0 +until \+\d+\.\d{3}s$`, joined)
	require.Regexp(t, `(?m)^\+\d+\.\d{3}s +fraud-window +WOKEN +0 +-$`, joined)
	require.Regexp(t, `(?m)^\+\d+\.\d{3}s +reject +SKIPPED +1 +skip condition on "validate" fired$`, joined)
}

func TestRunsShowInFlightAndFailed(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	boom := durable.NewWorkflow[int]("cli-test-boom")
	durable.Step(boom, "explode", func(durable.Context, int) (int, error) {
		return 0, durable.Terminal(errors.New("kaboom: " + strings.Repeat("x", 200) + "\nsecond line"))
	})
	late := durable.NewWorkflow[int]("cli-test-late")
	durable.Step(late, "dawdle", func(ctx durable.Context, _ int) (int, error) {
		<-ctx.Done()
		return 0, context.Cause(ctx)
	})
	p.StartWorker(t, boom, late)
	ctx := context.Background()
	client := p.Client(t)

	// A run past its deadline failed as a whole: no step is named.
	_, err := late.Run(ctx, client, "t", 1, durable.WithRunTimeout(200*time.Millisecond))
	var re *durable.RunError
	require.ErrorAs(t, err, &re)
	require.Empty(t, re.Step)
	code, out, errOut := runCLI(t, p.Flags("runs", "show", re.RunID.String())...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Contains(t, out, "failure   run deadline exceeded\n")
	require.NotContains(t, out, `step ""`)

	// A run that failed: its failure and the step's error, on one line.
	_, err = boom.Run(ctx, client, "t", 1)
	require.ErrorAs(t, err, &re)
	code, out, errOut = runCLI(t, p.Flags("runs", "show", re.RunID.String())...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Contains(t, out, "status    FAILED\n")
	require.Regexp(t, `(?m)^failure   step "explode": kaboom: x+…$`, out)
	row := stepRow(t, section(t, out, "STEP "), "explode")
	require.Regexp(t, ` FAILED +1 .* kaboom: x+…$`, row)
	require.NotContains(t, out, "second line")

	// A run in its durable sleep: not settled, and when the sleep is due.
	flow := newFixtures(time.Hour).Demo
	id, err := flow.Workflow.RunNoWait(ctx, client, "ada", order{ID: "A-2", Customer: "ada", Cents: 100, Items: []string{"pen"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		res, err := client.Get(ctx, id)
		require.NoError(t, err)
		s, _ := res.Step("fraud-window")
		return s.State == durabletype.TaskSleeping
	}, 30*time.Second, 20*time.Millisecond)
	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Contains(t, out, "status    RUNNING\n")
	require.Contains(t, out, "finished  - (not settled)\n")
	require.Regexp(t, `^fraud-window +charge +SLEEPING +0 +\+\d+\.\d{3}s +- +- +\+1h0m\d+(\.\d+)?s +-$`, stepRow(t, section(t, out, "STEP "), "fraud-window"))
	require.Regexp(t, `^finalize +ship,reject +PENDING +0 +- +- +- +- +-$`, stepRow(t, section(t, out, "STEP "), "finalize"))
}

func TestRunsShowErrors(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	missing := uuid.New().String()

	code, out, errOut := runCLI(t, p.Flags("runs", "show", missing)...)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "durable runs show: run "+missing+" not found in schema "+p.Schema+"\n", errOut)

	code, _, errOut = runCLI(t, "runs", "show", missing, "--database-url", p.URL, "--schema", "durable_test_no_such_schema")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "schema durable_test_no_such_schema has no durable tables")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs"}, "durable runs list: --database-url (or $DURABLE_DATABASE_URL) is required"}, // "runs" is "runs list"
		{[]string{"runs", "frob"}, `unknown action "frob"`},
		{p.Flags("runs", "show"), "a RUN_ID is required"},
		{p.Flags("runs", "show", missing, "other"), `unexpected argument "other"`},
		{p.Flags("runs", "show", "not-a-uuid"), `"not-a-uuid" is not a run ID`},
		{[]string{"runs", "show", missing, "--database-url="}, "--database-url (or $DURABLE_DATABASE_URL) is required"},
		{p.Flags("runs", "show", missing, "--nope"), "flag provided but not defined: -nope"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	code, _, errOut = runCLI(t, "runs", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable runs <list|show|cancel|replay|upgrade|prune>")
	code, _, errOut = runCLI(t, "runs", "show", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable runs show RUN_ID")
	require.Contains(t, errOut, "-outputs")
}

// fields splits a table row into its cells: columns are separated by two
// spaces or more, cells hold at most one space in a row.
func fields(row string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimRight(row, " "), -1)
}

// listRows returns the cells of the rows of a run list, and the command
// line of the next page, if any.
func listRows(t *testing.T, out string) ([][]string, string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, "ID WORKFLOW VERSION TENANT STATUS CREATED FINISHED FAILURE", strings.Join(strings.Fields(lines[0]), " "), out)
	requireAligned(t, lines[:len(lines)-1], "WORKFLOW", "VERSION", "TENANT", "STATUS", "CREATED", "FINISHED", "FAILURE")
	var rows [][]string
	next := ""
	for _, l := range lines[1:] {
		if cmd, ok := strings.CutPrefix(l, "next page: "); ok {
			next = cmd
			continue
		}
		require.Empty(t, next, "the next page's command comes last:\n%s", out)
		rows = append(rows, fields(l))
	}
	return rows, next
}

// rowIDs returns the IDs of a list's rows.
func rowIDs(rows [][]string) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r[0]
	}
	return ids
}

// wantRow is how the run list shows a run.
func wantRow(t *testing.T, e *durable.Engine, id uuid.UUID, failure string) []string {
	t.Helper()
	res, err := e.Get(context.Background(), id)
	require.NoError(t, err)
	finished := "-"
	if res.Done() {
		finished = res.FinishedAt.Local().Format(listTime)
	}
	return []string{id.String(), res.Workflow, versionCell(res.Version), res.Tenant, string(res.Status), res.CreatedAt.Local().Format(listTime), finished, failure}
}

// fixable is a test workflow whose second step fails for good while broken
// is set; first counts its executions.
type fixable struct {
	wf     *durable.Workflow[int]
	broken atomic.Bool
	first  atomic.Int32
}

func newFixable() *fixable {
	f := &fixable{wf: durable.NewWorkflow[int]("cli-test-fixable")}
	first := durable.Step(f.wf, "first", func(_ durable.Context, n int) (int, error) {
		f.first.Add(1)
		return n * 10, nil
	})
	durable.Step(f.wf, "second", func(ctx durable.Context, n int) (string, error) {
		if f.broken.Load() {
			return "", durable.Terminal(errors.New("upstream is down"))
		}
		v, _ := first.Output(ctx)
		return fmt.Sprintf("got %d", v), nil
	}, durable.After(first))
	return f
}

// settled waits for a run to settle and returns it.
func settled(t *testing.T, e *durable.Engine, id uuid.UUID) *durable.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := e.Wait(ctx, id)
	var re *durable.RunError
	if !errors.As(err, &re) {
		require.NoError(t, err)
	}
	return res
}

// sleeping starts an order-processing run that sleeps for an hour in its
// fraud window, and waits until it does: a run in flight.
func sleeping(t *testing.T, e *durable.Engine, tenant string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	flow := newFixtures(time.Hour).Demo
	id, err := flow.Workflow.RunNoWait(ctx, e, tenant, order{ID: "S-1", Customer: tenant, Cents: 100, Items: []string{"pen"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		res, err := e.Get(ctx, id)
		require.NoError(t, err)
		s, _ := res.Step("fraud-window")
		prepared, _ := res.Step("prepare-shipment")
		// Both of charge's successors: the run rests until the window
		// ends (nothing ready or running).
		return s.State == durabletype.TaskSleeping && prepared.State == durabletype.TaskCompleted
	}, 30*time.Second, 20*time.Millisecond)
	return id
}

func TestRunsList(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	fx := newFixable()
	fx.broken.Store(true)
	p.StartWorker(t, fx.wf)
	ctx := context.Background()
	client := p.Client(t)
	orders := newFixtures(10 * time.Millisecond).Demo.Workflow

	// Oldest first: two orders of ada, two failing runs of bob, a run in
	// flight of ada.
	var ids []uuid.UUID
	for i := range 2 {
		id, err := orders.RunNoWait(ctx, client, "ada", order{ID: fmt.Sprint("A-", i), Customer: "ada", Cents: 100, Items: []string{"pen"}})
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, settled(t, client, id).Status)
		ids = append(ids, id)
	}
	for i := range 2 {
		id, err := fx.wf.RunNoWait(ctx, client, "bob", i)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunFailed, settled(t, client, id).Status)
		ids = append(ids, id)
	}
	ids = append(ids, sleeping(t, client, "ada"))
	const failed = `step "second": upstream is down`
	want := [][]string{
		wantRow(t, client, ids[4], "-"),
		wantRow(t, client, ids[3], failed),
		wantRow(t, client, ids[2], failed),
		wantRow(t, client, ids[1], "-"),
		wantRow(t, client, ids[0], "-"),
	}
	require.Equal(t, "-", want[0][6], "in flight: not finished")

	code, out, errOut := runCLI(t, p.Flags("runs", "list")...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Empty(t, errOut)
	rows, next := listRows(t, out)
	require.Equal(t, want, rows, "newest first:\n%s", out)
	require.Empty(t, next, "one page")

	// Filters.
	created := func(i int) string {
		res, err := client.Get(ctx, ids[i])
		require.NoError(t, err)
		return res.CreatedAt.Format(time.RFC3339Nano)
	}
	for _, tc := range []struct {
		args []string
		want [][]string
	}{
		{[]string{"--status", "failed"}, want[1:3]},
		{[]string{"--status", "Completed, RUNNING"}, [][]string{want[0], want[3], want[4]}},
		{[]string{"--workflow", "order-processing", "--tenant", "ada"}, [][]string{want[0], want[3], want[4]}},
		{[]string{"--tenant", "bob"}, want[1:3]},
		{[]string{"--tenant", "nobody"}, nil},
		{[]string{"--since", created(2)}, want[:3]},
		{[]string{"--until", created(2)}, want[3:]},
		{[]string{"--since", created(1), "--until", created(3)}, want[2:4]},
		{[]string{"--since", "1h"}, want},
		{[]string{"--until", "1h"}, nil},
		{[]string{"--finished-since", "1h"}, want[1:]},
		{[]string{"--finished-until", "0s", "--status", "failed,completed"}, want[1:]},
	} {
		code, out, errOut := runCLI(t, p.Flags(append([]string{"runs", "list"}, tc.args...)...)...)
		require.Equal(t, 0, code, "%v: stderr:\n%s", tc.args, errOut)
		if tc.want == nil {
			require.Equal(t, "no runs match\n", out, "%v", tc.args)
			continue
		}
		rows, next := listRows(t, out)
		require.Equal(t, tc.want, rows, "%v:\n%s", tc.args, out)
		require.Empty(t, next)
	}

	// Pages: the last line is the command that continues, with a cursor
	// that keeps the time "--since 1h" meant on the first page.
	args := p.Flags("runs", "list", "--limit", "2", "--since", "1h", "--status", "failed,completed,running")
	var got []string
	for page := 1; ; page++ {
		code, out, errOut := runCLI(t, args...)
		require.Equal(t, 0, code, "page %d: stderr:\n%s", page, errOut)
		rows, next := listRows(t, out)
		got = append(got, rowIDs(rows)...)
		if page < 3 {
			require.Len(t, rows, 2, "page %d", page)
			require.Regexp(t, `^durable runs list --limit 2 --schema `+p.Schema+` --since 1h --status failed,completed,running --cursor [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`, next)
		} else {
			require.Len(t, rows, 1)
			require.Empty(t, next, "the last page")
			break
		}
		args = append(strings.Fields(next)[1:], "--database-url", p.URL)
	}
	require.Equal(t, rowIDs(want), got, "every run once, newest first")

	// A cursor continues only its own listing.
	code, out, _ = runCLI(t, p.Flags("runs", "list", "--limit", "2")...)
	require.Equal(t, 0, code)
	_, next = listRows(t, out)
	require.Regexp(t, `^durable runs list --limit 2 --schema `+p.Schema+` --cursor [A-Za-z0-9_-]+$`, next, "no time given as a duration: the engine's cursor")
	cursor := strings.Fields(next)[len(strings.Fields(next))-1]
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cursor", cursor, "--status", "failed"}, "durable runs list: --cursor: durable: invalid cursor: made for another filter or scope\n"},
		{[]string{"--cursor", cursor, "--since", "1h"}, "durable runs list: --cursor continues another listing: give it with the filter flags of the listing that printed it\n"},
		{[]string{"--cursor", "garbage!"}, "durable runs list: --cursor: durable: invalid cursor: illegal base64 data at input byte 7\n"},
		{[]string{"--cursor", "abc.%%"}, "durable runs list: --cursor: durable: invalid cursor: not a cursor printed by \"durable runs list\"\n"},
	} {
		code, out, errOut := runCLI(t, p.Flags(append([]string{"runs", "list", "--limit", "2"}, tc.args...)...)...)
		require.Equal(t, exitUsage, code, "%v", tc.args)
		require.Empty(t, out)
		require.Equal(t, tc.want, errOut, "%v", tc.args)
	}
	code, out, errOut = runCLI(t, p.Flags("runs", "list", "--limit", "2", "--cursor", cursor)...)
	require.Equal(t, 0, code, errOut)
	rows, _ = listRows(t, out)
	require.Equal(t, want[2:4], rows)

	// --json: every page as one object, RFC 3339 times in UTC.
	type runJS struct {
		ID         string  `json:"id"`
		Workflow   string  `json:"workflow"`
		Version    string  `json:"version"`
		Tenant     string  `json:"tenant"`
		Status     string  `json:"status"`
		FailedStep string  `json:"failed_step"`
		Error      string  `json:"error"`
		CreatedAt  string  `json:"created_at"`
		FinishedAt *string `json:"finished_at"`
	}
	var listed []runJS
	args = p.Flags("runs", "list", "--limit", "3", "--json", "--since", "1h")
	for {
		code, out, errOut := runCLI(t, args...)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, 1, strings.Count(out, "\n"), "one line:\n%s", out)
		var page struct {
			Runs []runJS `json:"runs"`
			Next *string `json:"next"`
			// NextCursor is the same, as the API spells it (absent on
			// the last page).
			NextCursor *string `json:"next_cursor"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&page), out)
		require.NotNil(t, page.Next, "next is always there")
		if *page.Next != "" {
			require.Equal(t, page.Next, page.NextCursor)
		} else {
			require.Nil(t, page.NextCursor)
		}
		listed = append(listed, page.Runs...)
		if *page.Next == "" {
			break
		}
		args = p.Flags("runs", "list", "--limit", "3", "--json", "--since", "1h", "--cursor", *page.Next)
	}
	require.Len(t, listed, 5)
	for i, r := range listed {
		res, err := client.Get(ctx, ids[4-i])
		require.NoError(t, err)
		require.Equal(t, res.ID.String(), r.ID)
		require.Equal(t, res.Workflow, r.Workflow)
		require.NotEmpty(t, r.Version)
		require.Equal(t, res.Version, r.Version)
		require.Equal(t, res.Tenant, r.Tenant)
		require.Equal(t, string(res.Status), r.Status)
		require.Equal(t, res.CreatedAt.UTC().Format(time.RFC3339Nano), r.CreatedAt)
		if res.Done() {
			require.Equal(t, res.FinishedAt.UTC().Format(time.RFC3339Nano), *r.FinishedAt)
		} else {
			require.Nil(t, r.FinishedAt)
		}
	}
	require.Equal(t, "second", listed[1].FailedStep)
	require.Equal(t, "upstream is down", listed[1].Error)
	require.Empty(t, listed[0].FailedStep)
	require.Empty(t, listed[0].Error)
	code, out, _ = runCLI(t, p.Flags("runs", "list", "--json", "--tenant", "nobody")...)
	require.Equal(t, 0, code)
	require.Equal(t, `{"runs":[],"next":""}`+"\n", out)
}

func TestRunsListUsageErrors(t *testing.T) {
	t.Parallel()
	// Flags are checked before connecting, so no database is needed.
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "done"}, `durable runs list: --status "done": unknown status "done": want running, completed, failed, cancelled, in_flight, settled, unsuccessful, comma-separated`},
		{[]string{"--status", "failed,"}, `unknown status ""`},
		{[]string{"--since", "yesterday"}, `durable runs list: --since "yesterday": want an RFC 3339 time (2026-11-24T09:00:00Z) or a duration ago (24h, 90m)`},
		{[]string{"--until", "-5m"}, `--until "-5m": a duration means that long ago and must not be negative`},
		{[]string{"--finished-since", "2026-13-01T00:00:00Z"}, `--finished-since "2026-13-01T00:00:00Z": want an RFC 3339 time`},
		{[]string{"--tenant", "a\tb"}, `--tenant "a\tb" holds the control character U+0009: use 1-200 bytes`},
		{[]string{"--version", "v 2"}, `durable runs list: --version "v 2" holds ' ': use 1-64 bytes of letters, digits and _-.+`},
		{[]string{"--limit", "0"}, "--limit must be between 1 and 1000, got 0"},
		{[]string{"--limit", "1001"}, "--limit must be between 1 and 1000, got 1001"},
		{[]string{"--limit", "many"}, `invalid value "many" for flag -limit`},
		{[]string{"stray"}, `durable runs list: unexpected argument "stray"`},
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
		{[]string{"--database-url="}, "--database-url (or $DURABLE_DATABASE_URL) is required"},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"runs", "list"}, db...), tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	code, _, errOut := runCLI(t, "runs", "list", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable runs list --database-url URL [flags]")
	require.Contains(t, errOut, "-finished-since")
}

func TestRunsListTimeRange(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "2026-11-24T10:00:00Z", "--until", "2026-11-24T09:00:00+00:00"}, "durable runs list: durable: invalid filter: --until (2026-11-24T09:00:00Z) is before --since (2026-11-24T10:00:00Z)\n"},
		{[]string{"--finished-since", "1h", "--finished-until", "2h"}, "is before --finished-since"},
	} {
		code, out, errOut := runCLI(t, p.Flags(append([]string{"runs", "list"}, tc.args...)...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.want)
	}
	// A schema without durable's tables.
	code, out, errOut := runCLI(t, "runs", "list", "--database-url", p.URL, "--schema", "durable_test_no_such_schema")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "durable runs list: schema durable_test_no_such_schema has no durable tables (wrong --schema, or run \"durable migrate up\")\n", errOut)
}

func TestRunsShowInputParentsOutputs(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	p.StartWorker(t)
	flow := newFixtures(10 * time.Millisecond).Demo
	ctx := context.Background()
	res, err := flow.Workflow.Run(ctx, p.Client(t), "ada", order{ID: "A-7", Customer: "ada", Cents: 250, Items: []string{"pen", "ink"}})
	require.NoError(t, err)
	id := res.ID.String()

	code, out, errOut := runCLI(t, p.Flags("runs", "show", id, "--outputs")...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Contains(t, out, `
input:
  {
    "id": "A-7",
    "customer": "ada",
    "cents": 250,
    "items": [
      "pen",
      "ink"
    ]
  }

steps (times relative to the run's creation):
`)
	steps := section(t, out, "STEP ")
	parents := map[string]string{}
	for _, row := range steps[1:] {
		f := fields(row)
		parents[f[0]] = f[1]
	}
	require.Equal(t, map[string]string{
		"validate": "-", "charge": "validate", "reject": "validate", "fraud-window": "charge",
		"prepare-shipment": "charge", "ship": "fraud-window,prepare-shipment", "finalize": "ship,reject",
	}, parents)
	require.True(t, strings.HasSuffix(out, `
outputs of the completed steps:
validate:
  {
    "valid": true
  }
charge:
  {
    "charge_id": "ch_A-7",
    "cents": 250
  }
prepare-shipment:
  {
    "carrier": "ACME",
    "tracking": "TRK-A-7"
  }
ship:
  "shipped by ACME, tracking TRK-A-7"
finalize:
  "done: shipped by ACME, tracking TRK-A-7"
`), "the sleep has no output, skipped steps none:\n%s", out)

	code, plain, _ := runCLI(t, p.Flags("runs", "show", id)...)
	require.Equal(t, 0, code)
	require.NotContains(t, plain, "outputs of")
	before, _, _ := strings.Cut(out, "\noutputs of")
	require.Equal(t, plain, before, "--outputs only adds")

	// --json: everything, outputs included; events with --events.
	code, out, errOut = runCLI(t, p.Flags("runs", "show", "--json", id)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 1, strings.Count(out, "\n"))
	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	require.Equal(t, id, js["id"])
	require.Equal(t, "order-processing", js["workflow"])
	require.Equal(t, "ada", js["tenant"])
	require.Equal(t, "COMPLETED", js["status"])
	require.Equal(t, res.CreatedAt.UTC().Format(time.RFC3339Nano), js["created_at"])
	require.Equal(t, res.FinishedAt.UTC().Format(time.RFC3339Nano), js["finished_at"])
	require.Equal(t, map[string]any{"id": "A-7", "customer": "ada", "cents": 250.0, "items": []any{"pen", "ink"}}, js["input"])
	require.NotContains(t, js, "input_base64")
	require.NotContains(t, js, "events")
	jsSteps := js["steps"].([]any)
	require.Len(t, jsSteps, 7)
	step := func(name string) map[string]any {
		for _, s := range jsSteps {
			if m := s.(map[string]any); m["name"] == name {
				return m
			}
		}
		require.Failf(t, "no step", "%s in %s", name, out)
		return nil
	}
	require.Equal(t, []any{}, step("validate")["parents"])
	require.Equal(t, []any{"fraud-window", "prepare-shipment"}, step("ship")["parents"])
	require.Equal(t, map[string]any{"charge_id": "ch_A-7", "cents": 250.0}, step("charge")["output"])
	require.Equal(t, 2.0, step("charge")["attempts"])
	require.Equal(t, "step", step("charge")["kind"])
	require.Equal(t, "sleep", step("fraud-window")["kind"])
	require.Equal(t, "SKIPPED", step("reject")["state"])
	require.NotContains(t, step("reject"), "output")
	require.Nil(t, step("reject")["due_at"])
	require.Nil(t, step("prepare-shipment")["due_at"])

	code, out, errOut = runCLI(t, p.Flags("runs", "show", "--json", "--events", id)...)
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	evs, err := p.Client(t).Events(ctx, res.ID)
	require.NoError(t, err)
	jsEvents := js["events"].([]any)
	require.Len(t, jsEvents, len(evs))
	first := jsEvents[0].(map[string]any)
	require.Equal(t, map[string]any{
		"id": float64(evs[0].ID), "at": evs[0].At.UTC().Format(time.RFC3339Nano), "step": "validate", "type": "QUEUED", "attempt": 0.0, "detail": "", "due_at": nil,
	}, first)
}

// rawCodec encodes inputs and outputs as their Go syntax: not JSON.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return fmt.Appendf(nil, "%#v", v), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	in, ok := v.(*chaosInput)
	if !ok {
		return fmt.Errorf("rawCodec cannot decode into %T", v)
	}
	_, err := fmt.Sscanf(string(b), "durablecli.chaosInput{N:%d}", &in.N)
	return err
}

func TestRunsShowNotJSON(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	e, err := durable.New(p.Store, durable.Config{Logger: clitest.QuietLogger(), Codec: rawCodec{}})
	require.NoError(t, err)
	id, err := newFixtures(0).Chaos.RunNoWait(context.Background(), e, "t", chaosInput{N: 7})
	require.NoError(t, err)
	input := `durablecli.chaosInput{N:7}`
	b64 := base64.StdEncoding.EncodeToString([]byte(input))

	code, out, errOut := runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf("\ninput (%d bytes, not JSON; base64):\n  %s\n", len(input), b64))
	code, out, errOut = runCLI(t, p.Flags("runs", "show", "--json", id.String())...)
	require.Equal(t, 0, code, errOut)
	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	require.Equal(t, b64, js["input_base64"])
	require.NotContains(t, js, "input")
}

func TestRunsCancel(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	p.StartWorker(t)
	client := p.Client(t)
	ctx := context.Background()
	a1, a2, b1 := sleeping(t, client, "ada"), sleeping(t, client, "ada"), sleeping(t, client, "bob")
	done, err := newFixtures(0).Noop.Run(ctx, client, "ada", 0)
	require.NoError(t, err)
	missing := uuid.New()
	status := func(id uuid.UUID) durabletype.RunStatus {
		res, err := client.Get(ctx, id)
		require.NoError(t, err)
		return res.Status
	}

	// Bad command lines change nothing.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "durable runs cancel: give run IDs, or filter flags (--status, --workflow, --version, --tenant, --since, --until, --finished-since, --finished-until, --top-level, --idempotency-key, --input-contains), or --all for every run in flight\n"},
		{[]string{a1.String(), "not-a-uuid"}, `durable runs cancel: "not-a-uuid" is not a run ID: invalid UUID length: 10` + "\n"},
		{[]string{a1.String(), "--tenant", "ada"}, "durable runs cancel: give run IDs, or filter flags, not both\n"},
		{[]string{a1.String(), "--all"}, "durable runs cancel: give run IDs, or filter flags, not both\n"},
		{[]string{"--all", "--tenant", "ada"}, "durable runs cancel: --all selects every run in flight: it takes no filter flags\n"},
		{[]string{"--status", "stopped"}, `durable runs cancel: --status "stopped": unknown status "stopped": want running, completed, failed, cancelled, in_flight, settled, unsuccessful, comma-separated` + "\n"},
		{[]string{"--since", "soon"}, `durable runs cancel: --since "soon": want an RFC 3339 time`},
	} {
		code, out, errOut := runCLI(t, p.Flags(append([]string{"runs", "cancel"}, tc.args...)...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.True(t, strings.HasPrefix(errOut, tc.want), "%v: %s", tc.args, errOut)
	}
	require.Equal(t, durabletype.RunRunning, status(a1))

	// By ID.
	code, out, errOut := runCLI(t, p.Flags("runs", "cancel", a1.String(), "--reason", "customer withdrew")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, a1.String()+" cancelled\n", out)
	require.Empty(t, errOut)
	res, err := client.Get(ctx, a1)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCancelled, res.Status)
	require.ErrorIs(t, res.Err, durable.ErrRunCancelled)
	require.Contains(t, res.Err.Error(), "customer withdrew")
	code, out, _ = runCLI(t, p.Flags("runs", "show", a1.String())...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "status    CANCELLED\n")
	require.Contains(t, out, "reason    customer withdrew\n")
	require.Regexp(t, `(?m)^fraud-window +charge +CANCELLED `, out)

	// Named runs that cannot be cancelled: each says why, the others are
	// cancelled, and the exit status is 1.
	code, out, errOut = runCLI(t, p.Flags("runs", "cancel", a1.String(), missing.String(), a2.String(), done.ID.String())...)
	require.Equal(t, 1, code)
	require.Equal(t, a2.String()+" cancelled\n", out)
	require.Equal(t, "durable runs cancel: run "+a1.String()+" has already settled: only runs in flight can be cancelled\n"+
		"durable runs cancel: run "+missing.String()+" not found in schema "+p.Schema+"\n"+
		"durable runs cancel: run "+done.ID.String()+" has already settled: only runs in flight can be cancelled\n"+
		"durable runs cancel: 3 of 4 runs could not be cancelled\n", errOut)
	require.Equal(t, durabletype.RunCancelled, status(a2))
	require.Equal(t, durabletype.RunCompleted, status(done.ID))

	// By filter.
	code, out, errOut = runCLI(t, p.Flags("runs", "cancel", "--workflow", "bench-noop")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "cancelled 0 runs (0 skipped)\n", out, "RUNNING runs unless --status says otherwise")
	code, out, errOut = runCLI(t, p.Flags("runs", "cancel", "--workflow", "bench-noop", "--status", "completed,running")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "cancelled 0 runs (1 skipped)\n", out, "a completed run has settled")
	code, out, errOut = runCLI(t, p.Flags("runs", "cancel", "--tenant", "bob", "--since", "1h", "--reason", "bulk")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "cancelled 1 run (0 skipped)\n", out)
	res, err = client.Get(ctx, b1)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCancelled, res.Status)
	require.Contains(t, res.Err.Error(), "bulk")

	// --all: every RUNNING run; a dry run first, which changes nothing.
	c1, c2 := sleeping(t, client, "carl"), sleeping(t, client, "dora")
	code, out, errOut = runCLI(t, p.Flags("runs", "cancel", "--all", "--dry-run")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, c2.String()+" would be cancelled\n"+c1.String()+" would be cancelled\n"+
		"would cancel 2 runs (0 skipped); dry run: nothing changed\n", out)
	require.Equal(t, durabletype.RunRunning, status(c1))
	code, out, errOut = runCLI(t, p.Flags("runs", "cancel", "--all")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "cancelled 2 runs (0 skipped)\n", out)
	require.Equal(t, durabletype.RunCancelled, status(c1))
	require.Equal(t, durabletype.RunCancelled, status(c2))

	// The list shows why.
	code, out, _ = runCLI(t, p.Flags("runs", "list", "--status", "cancelled", "--tenant", "ada")...)
	require.Equal(t, 0, code)
	rows, _ := listRows(t, out)
	require.Equal(t, [][]string{wantRow(t, client, a2, "-"), wantRow(t, client, a1, "customer withdrew")}, rows)
	require.Equal(t, "CANCELLED", rows[0][4])
}

func TestRunsReplay(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	fx := newFixable()
	fx.broken.Store(true)
	p.StartWorker(t, fx.wf)
	client := p.Client(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for i := range 3 {
		id, err := fx.wf.RunNoWait(ctx, client, "ada", i+1)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunFailed, settled(t, client, id).Status)
		ids = append(ids, id)
	}
	require.Equal(t, int32(3), fx.first.Load())
	inFlight := sleeping(t, client, "ada")

	// Guards and bad command lines.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "durable runs replay: give run IDs, or filter flags (--status, --workflow, --version, --tenant, --since, --until, --finished-since, --finished-until, --top-level, --idempotency-key, --input-contains), or --all for every FAILED run (and CANCELLED one with --include-cancelled)\n"},
		{[]string{"--all", "--status", "failed"}, "durable runs replay: --all selects every FAILED run (and CANCELLED one with --include-cancelled): it takes no filter flags\n"},
		{[]string{"x" + ids[0].String()}, `is not a run ID`},
	} {
		code, out, errOut := runCLI(t, p.Flags(append([]string{"runs", "replay"}, tc.args...)...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}

	code, out, errOut := runCLI(t, append(p.Flags("runs", "replay", ids[0].String()), "--from-step")...)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "flag needs an argument: -from-step")

	// Still broken: replayed, and failed again.
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", ids[0].String())...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids[0].String()+" replayed\n", out)
	require.Equal(t, durabletype.RunFailed, settled(t, client, ids[0]).Status)
	require.Equal(t, int32(3), fx.first.Load(), "a completed step does not run again")

	// Fixed: replayed runs complete, keeping what completed.
	fx.broken.Store(false)
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", ids[0].String())...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids[0].String()+" replayed\n", out)
	res := settled(t, client, ids[0])
	require.Equal(t, durabletype.RunCompleted, res.Status)
	second, _ := res.Step("second")
	require.Equal(t, `"got 10"`, string(second.Output))
	require.Equal(t, int32(3), fx.first.Load())

	// Runs that cannot be replayed: each says why; exit status 1.
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", ids[0].String(), inFlight.String())...)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "durable runs replay: run "+ids[0].String()+" completed: nothing to replay (--from-step runs a step and its descendants again)\n"+
		"durable runs replay: run "+inFlight.String()+" has not settled: only settled runs can be replayed\n"+
		"durable runs replay: 2 of 2 runs could not be replayed\n", errOut)
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", ids[0].String(), "--from-step", "nope")...)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "durable runs replay: run "+ids[0].String()+" has no step \"nope\"\n", errOut)

	// --from-step runs a completed step again, and what follows it.
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", "--from-step", "first", ids[0].String())...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids[0].String()+" replayed\n", out)
	require.Equal(t, durabletype.RunCompleted, settled(t, client, ids[0]).Status)
	require.Equal(t, int32(4), fx.first.Load())
	evs, err := client.Events(ctx, ids[0])
	require.NoError(t, err)
	var replayed []string
	for _, ev := range evs {
		if ev.Type == durabletype.EventReplayed {
			replayed = append(replayed, ev.Step+": "+ev.Detail)
		}
	}
	require.Equal(t, []string{"second: replay", "second: replay", "first: replay from step first", "second: replay from step first"}, replayed)
	code, out, _ = runCLI(t, p.Flags("runs", "show", "--events", ids[0].String())...)
	require.Equal(t, 0, code)
	require.Regexp(t, `(?m)^\+\d+\.\d{3}s +first +REPLAYED +\d +replay from step first$`, out)

	// By filter: the FAILED runs matching it; a dry run first, which
	// changes nothing.
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", "--workflow", "cli-test-fixable", "--dry-run")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids[2].String()+" would be replayed\n"+ids[1].String()+" would be replayed\n"+
		"would replay 2 runs (0 skipped); dry run: nothing changed\n", out)
	require.Equal(t, durabletype.RunFailed, settled(t, client, ids[1]).Status)
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", "--dry-run", ids[0].String(), ids[1].String(), inFlight.String())...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids[0].String()+" would be skipped (COMPLETED)\n"+ids[1].String()+" would be replayed\n"+
		inFlight.String()+" would be skipped (RUNNING)\n"+"would replay 1 run (2 skipped); dry run: nothing changed\n", out)
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", "--workflow", "cli-test-fixable")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "replayed 2 runs (0 skipped)\n", out)
	for _, id := range ids[1:] {
		require.Equal(t, durabletype.RunCompleted, settled(t, client, id).Status)
	}
	require.Equal(t, int32(4), fx.first.Load())
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", "--status", "completed,running", "--from-step", "second", "--tenant", "ada")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "replayed 3 runs (1 skipped)\n", out, "the run in flight has not settled: skipped")
	for _, id := range ids {
		require.Equal(t, durabletype.RunCompleted, settled(t, client, id).Status)
	}

	// --all: every FAILED run; a CANCELLED one only with
	// --include-cancelled (or a status that names it).
	code, out, errOut = runCLI(t, p.Flags("runs", "cancel", inFlight.String())...)
	require.Equal(t, 0, code, errOut)
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", "--all")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "replayed 0 runs (0 skipped)\n", out, "what an operator cancelled stays cancelled")
	require.Equal(t, durabletype.RunCancelled, settled(t, client, inFlight).Status)
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", "--all", "--include-cancelled", "--dry-run")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, inFlight.String()+" would be replayed\nwould replay 1 run (0 skipped); dry run: nothing changed\n", out)
	code, out, errOut = runCLI(t, p.Flags("runs", "replay", "--all", "--include-cancelled")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "replayed 1 run (0 skipped)\n", out)
	res, err = client.Get(ctx, inFlight)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunRunning, res.Status)
}

func TestRunsPrune(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	p.StartWorker(t)
	client := p.Client(t)
	ctx := context.Background()
	noop := newFixtures(0).Noop
	var done []uuid.UUID
	for range 3 {
		res, err := noop.Run(ctx, client, "ada", 0)
		require.NoError(t, err)
		done = append(done, res.ID)
	}
	inFlight := sleeping(t, client, "ada")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "durable runs prune: --older-than is required, e.g. --older-than 720h\n"},
		{[]string{"--older-than", "-1h"}, "durable runs prune: --older-than must not be negative, got -1h0m0s\n"},
		{[]string{"--older-than", "a month"}, `invalid value "a month" for flag -older-than`},
		{[]string{"--older-than", "1h", "now"}, `durable runs prune: unexpected argument "now"`},
	} {
		code, out, errOut := runCLI(t, p.Flags(append([]string{"runs", "prune"}, tc.args...)...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}

	code, out, errOut := runCLI(t, p.Flags("runs", "prune", "--older-than", "720h")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "deleted 0 runs that settled more than 720h0m0s ago\n", out)
	code, out, errOut = runCLI(t, p.Flags("runs", "prune", "--older-than", "0s")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "deleted 3 runs that settled more than 0s ago\n", out)
	for _, id := range done {
		_, err := client.Get(ctx, id)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	}
	code, out, _ = runCLI(t, p.Flags("runs", "list")...)
	require.Equal(t, 0, code)
	rows, _ := listRows(t, out)
	require.Equal(t, []string{inFlight.String()}, rowIDs(rows), "a run in flight is never deleted")
}

func TestRunsHelp(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"list", "show", "cancel", "replay", "prune"} {
		code, out, errOut := runCLI(t, "runs", action, "-h")
		require.Equal(t, 0, code, action)
		require.Empty(t, out)
		require.True(t, strings.HasPrefix(errOut, "Usage: durable runs "+action+" "), "%s:\n%s", action, errOut)
		require.Contains(t, errOut, "-database-url", action)
	}
	code, out, _ := runCLI(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "  stats     queue depths and run counts by workflow, version and tenant;\n            --storage: the tables' dead rows and sizes, and what needs a\n")
	require.Contains(t, out, "  runs      operate runs: list")
}
