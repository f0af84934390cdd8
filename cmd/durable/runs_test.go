package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/demo"
	"github.com/effectivelabs/durable/internal/workloads"
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
	p := newPGEnv(t, true)
	p.startWorker(t)
	flow := workloads.New(workloads.Options{FraudWindow: 50 * time.Millisecond}).Demo
	ctx := context.Background()
	res, err := flow.Workflow.Run(ctx, p.client(t), "ada", demo.Order{ID: "A-1", Customer: "ada", Cents: 100, Items: []string{"pen"}})
	require.NoError(t, err)
	id := res.ID.String()

	code, out, errOut := runCLI(t, p.flags("runs", "show", id)...)
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
	requireAligned(t, steps, "STATE", "ATTEMPTS", "STARTED", "FINISHED", "TOOK", "DUE", "ERROR")
	require.Regexp(t, `^charge +COMPLETED +2 +\+\d+\.\d{3}s +\+\d+\.\d{3}s +\d+(\.\d+)?m?s +- +-$`, stepRow(t, steps, "charge"),
		"a completed step has no error; its retry shows in the events")
	require.Regexp(t, `^reject +SKIPPED +1 `, stepRow(t, steps, "reject"), "its own condition fired on a worker")
	require.Regexp(t, `^fraud-window +COMPLETED +0 +\+\d+\.\d{3}s +\+\d+\.\d{3}s `, stepRow(t, steps, "fraud-window"))

	// Flags may come before the run ID too.
	code, out, errOut = runCLI(t, append(p.flags("runs", "show", "--events"), id)...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	evs, err := p.client(t).Events(ctx, res.ID)
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
	p := newPGEnv(t, true)
	boom := durable.NewWorkflow[int]("cli-test-boom")
	durable.Step(boom, "explode", func(durable.Context, int) (int, error) {
		return 0, durable.Terminal(errors.New("kaboom: " + strings.Repeat("x", 200) + "\nsecond line"))
	})
	p.startWorker(t, boom)
	ctx := context.Background()
	client := p.client(t)

	// A run that failed: its failure and the step's error, on one line.
	_, err := boom.Run(ctx, client, "t", 1)
	var re *durable.RunError
	require.ErrorAs(t, err, &re)
	code, out, errOut := runCLI(t, p.flags("runs", "show", re.RunID.String())...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Contains(t, out, "status    FAILED\n")
	require.Regexp(t, `(?m)^failure   step "explode": kaboom: x+…$`, out)
	row := stepRow(t, section(t, out, "STEP "), "explode")
	require.Regexp(t, ` FAILED +1 .* kaboom: x+…$`, row)
	require.NotContains(t, out, "second line")

	// A run in its durable sleep: not settled, and when the sleep is due.
	flow := workloads.New(workloads.Options{FraudWindow: time.Hour}).Demo
	id, err := flow.Workflow.RunNoWait(ctx, client, "ada", demo.Order{ID: "A-2", Customer: "ada", Cents: 100, Items: []string{"pen"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		res, err := client.Get(ctx, id)
		require.NoError(t, err)
		s, _ := res.Step("fraud-window")
		return s.State == durable.StepSleeping
	}, 30*time.Second, 20*time.Millisecond)
	code, out, errOut = runCLI(t, p.flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Contains(t, out, "status    RUNNING\n")
	require.Contains(t, out, "finished  - (not settled)\n")
	require.Regexp(t, `^fraud-window +SLEEPING +0 +\+\d+\.\d{3}s +- +- +\+1h0m\d+(\.\d+)?s +-$`, stepRow(t, section(t, out, "STEP "), "fraud-window"))
	require.Regexp(t, `^finalize +PENDING +0 +- +- +- +- +-$`, stepRow(t, section(t, out, "STEP "), "finalize"))
}

func TestRunsShowErrors(t *testing.T) {
	t.Parallel()
	p := newPGEnv(t, true)
	missing := uuid.New().String()

	code, out, errOut := runCLI(t, p.flags("runs", "show", missing)...)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "durable runs show: run "+missing+" not found in schema "+p.schema+"\n", errOut)

	code, _, errOut = runCLI(t, "runs", "show", missing, "--database-url", p.url, "--schema", "durable_test_no_such_schema")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "schema durable_test_no_such_schema has no durable tables")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs"}, "Usage: durable runs show"},
		{[]string{"runs", "list"}, `unknown action "list"`},
		{p.flags("runs", "show"), "a RUN_ID is required"},
		{p.flags("runs", "show", missing, "other"), `unexpected argument "other"`},
		{p.flags("runs", "show", "not-a-uuid"), `"not-a-uuid" is not a run ID`},
		{[]string{"runs", "show", missing, "--database-url="}, "--database-url (or $DURABLE_DATABASE_URL) is required"},
		{p.flags("runs", "show", missing, "--nope"), "flag provided but not defined: -nope"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	code, _, errOut = runCLI(t, "runs", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable runs show")
}
