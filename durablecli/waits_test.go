package durablecli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
)

// stepIn polls a run until its step is in state, and returns the run.
func stepIn(t *testing.T, e *durable.Engine, id uuid.UUID, step string, state durabletype.TaskState) *durable.RunResult {
	t.Helper()
	var res *durable.RunResult
	require.Eventually(t, func() bool {
		var err error
		res, err = e.Get(context.Background(), id)
		require.NoError(t, err)
		s, ok := res.Step(step)
		require.True(t, ok, "run %s has no step %s", id, step)
		return s.State == state
	}, 30*time.Second, 20*time.Millisecond, "step %s of run %s never %s", step, id, state)
	return res
}

// table returns the lines of the table that follows the line starting with
// title in out, up to the next blank line: its header, then its rows.
func table(t *testing.T, out, title string) []string {
	t.Helper()
	lines := section(t, out, title)
	require.Greater(t, len(lines), 1, "no table under %q in:\n%s", title, out)
	return lines[1:]
}

// showJSON runs "runs show --json" and decodes its object.
func showJSON(t *testing.T, p *testPG, id uuid.UUID, args ...string) map[string]any {
	t.Helper()
	code, out, errOut := runCLI(t, p.Flags(append([]string{"runs", "show", "--json", id.String()}, args...)...)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 1, strings.Count(out, "\n"), "one line:\n%s", out)
	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &js), out)
	return js
}

// jsonStep returns the step named name of a "runs show --json" object.
func jsonStep(t *testing.T, js map[string]any, name string) map[string]any {
	t.Helper()
	for _, s := range js["steps"].([]any) {
		if m := s.(map[string]any); m["name"] == name {
			return m
		}
	}
	require.Failf(t, "no step", "%s in %v", name, js)
	return nil
}

// childRows parses a run list that has the PARENT (STEP) column.
func childRows(t *testing.T, out string) ([][]string, string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, "ID WORKFLOW VERSION TENANT STATUS CREATED FINISHED PARENT (STEP) FAILURE", strings.Join(strings.Fields(lines[0]), " "), out)
	next := ""
	if cmd, ok := strings.CutPrefix(lines[len(lines)-1], "next page: "); ok {
		next, lines = cmd, lines[:len(lines)-1]
	}
	requireAligned(t, lines, "WORKFLOW", "VERSION", "TENANT", "STATUS", "CREATED", "FINISHED", "PARENT (STEP)", "FAILURE")
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, fields(l))
	}
	return rows, next
}

func TestRunsShowParentAndChildren(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	p.StartWorker(t)
	client := p.Client(t)
	ctx := context.Background()

	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "bench-parent", "--input", "3", "--wait", "--timeout", "60s")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	res, err := client.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	kids := make([]uuid.UUID, parentChildren)
	for k := range kids {
		s, _ := res.Step(fmt.Sprintf("child-%d", k))
		require.NotEqual(t, uuid.Nil, s.ChildRunID)
		kids[k] = s.ChildRunID
	}

	// The parent: what each child step waited for, and its child runs in
	// the order of their steps.
	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "parent ")
	waits := table(t, out, "waits (events, signals, child runs, map items):")
	require.Len(t, waits, 1+parentChildren)
	requireAligned(t, waits, "STATE", "WAITS FOR")
	for k, kid := range kids {
		require.Equal(t, []string{fmt.Sprintf("child-%d", k), "COMPLETED", "child run " + kid.String() + " (COMPLETED)"}, fields(waits[1+k]))
	}
	children := table(t, out, "child runs (10 runs: 10 COMPLETED):")
	require.Len(t, children, 1+parentChildren)
	requireAligned(t, children, "STEP", "WORKFLOW", "STATUS", "FINISHED", "FAILURE")
	for k, kid := range kids {
		f := fields(children[1+k])
		require.Equal(t, []string{kid.String(), fmt.Sprintf("child-%d", k), "bench-child", "COMPLETED"}, f[:4])
		require.Regexp(t, `^\+\d+\.\d{3}s$`, f[4])
		require.Equal(t, "-", f[5])
	}
	code, withOutputs, _ := runCLI(t, p.Flags("runs", "show", id.String(), "--outputs")...)
	require.Equal(t, 0, code)
	require.Contains(t, withOutputs, "\nchild-3:\n  33\n", "a child step's output is its child's result")
	require.True(t, strings.HasPrefix(withOutputs, out), "--outputs only adds")

	// A child: its parent and the step that started it.
	code, out, errOut = runCLI(t, p.Flags("runs", "show", kids[3].String())...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "tenant    default\nparent    "+id.String()+" (step child-3)\nstatus    COMPLETED\n")
	require.NotContains(t, out, "child runs")
	require.NotContains(t, out, "waits (")

	// --json.
	js := showJSON(t, p, id)
	require.Nil(t, js["parent"])
	require.NotContains(t, js, "parent_id")
	jsKids := js["children"].([]any)
	require.Len(t, jsKids, parentChildren)
	for k, kid := range kids {
		c := jsKids[k].(map[string]any)
		require.Equal(t, kid.String(), c["id"])
		require.Equal(t, "COMPLETED", c["status"])
		require.Equal(t, id.String(), c["parent_id"])
		require.Equal(t, fmt.Sprintf("child-%d", k), c["parent_step"])
		step := jsonStep(t, js, fmt.Sprintf("child-%d", k))
		require.Equal(t, "child", step["kind"])
		require.Equal(t, kid.String(), step["child_run_id"])
		require.NotContains(t, step, "event_key")
		require.NotContains(t, step, "items")
	}
	require.NotContains(t, jsonStep(t, js, "join"), "child_run_id")
	require.NotContains(t, js, "more_children")
	js = showJSON(t, p, kids[3])
	require.Equal(t, map[string]any{"run_id": id.String(), "step": "child-3", "result": "work"}, js["parent"])
	require.Equal(t, id.String(), js["parent_id"])
	require.Equal(t, "child-3", js["parent_step"])
	require.Equal(t, []any{}, js["children"])

	// The list: --parent, and the PARENT column when child runs are listed.
	code, out, errOut = runCLI(t, p.Flags("runs", "list", "--parent", id.String())...)
	require.Equal(t, 0, code, errOut)
	rows, next := childRows(t, out)
	require.Empty(t, next)
	require.Len(t, rows, parentChildren)
	seen := map[string]bool{}
	for _, r := range rows {
		require.Equal(t, "bench-child", r[1])
		require.Regexp(t, `^`+id.String()+` \(child-\d\)$`, r[7])
		seen[r[0]] = true
	}
	for _, kid := range kids {
		require.True(t, seen[kid.String()], "child %s listed", kid)
	}
	code, out, errOut = runCLI(t, p.Flags("runs", "list")...)
	require.Equal(t, 0, code, errOut)
	rows, _ = childRows(t, out)
	require.Len(t, rows, 1+parentChildren)
	for _, r := range rows {
		if r[0] == id.String() {
			require.Equal(t, "-", r[7], "not a child run")
		}
	}
	// --top-level leaves the child runs out; "runs" alone is "runs list".
	for _, args := range [][]string{{"runs", "list", "--top-level"}, {"runs", "--top-level"}} {
		code, out, errOut = runCLI(t, p.Flags(args...)...)
		require.Equal(t, 0, code, errOut)
		top, _ := listRows(t, out)
		require.Equal(t, [][]string{wantRow(t, client, id, "-")}, top, "%v: only the parent", args)
	}
	code, out, errOut = runCLI(t, p.Flags("runs")...)
	require.Equal(t, 0, code, errOut)
	rows, _ = childRows(t, out)
	require.Len(t, rows, 1+parentChildren, `"runs" alone lists runs`)
	code, out, errOut = runCLI(t, p.Flags("runs", "list", "--top-level", "--parent", id.String())...)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "--parent lists child runs, --top-level leaves them out: give one")
	code, out, errOut = runCLI(t, p.Flags("runs", "list", "--workflow", "bench-parent")...)
	require.Equal(t, 0, code, errOut)
	plain, _ := listRows(t, out)
	require.Equal(t, [][]string{wantRow(t, client, id, "-")}, plain, "no child runs listed: no PARENT column")
	code, out, errOut = runCLI(t, p.Flags("runs", "list", "--parent", uuid.NewString())...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "no runs match\n", out)

	// Pages of the children: the next page's command keeps --parent.
	args := p.Flags("runs", "list", "--parent", id.String(), "--limit", "4")
	var paged []string
	for page := 1; ; page++ {
		require.Less(t, page, 5)
		code, out, errOut := runCLI(t, args...)
		require.Equal(t, 0, code, errOut)
		rows, next := childRows(t, out)
		paged = append(paged, rowIDs(rows)...)
		if next == "" {
			break
		}
		require.Contains(t, next, "--parent "+id.String()+" ")
		args = append(strings.Fields(next)[1:], "--database-url", p.URL)
	}
	want := make([]string, len(kids))
	for i, kid := range kids {
		want[i] = kid.String()
	}
	require.ElementsMatch(t, want, paged)

	code, out, errOut = runCLI(t, p.Flags("runs", "list", "--parent", id.String(), "--json")...)
	require.Equal(t, 0, code, errOut)
	var page struct {
		Runs []map[string]any `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Runs, parentChildren)
	for _, r := range page.Runs {
		require.Equal(t, id.String(), r["parent_id"])
		require.Regexp(t, `^child-\d$`, r["parent_step"])
	}
	code, out, errOut = runCLI(t, p.Flags("runs", "list", "--workflow", "bench-parent", "--json")...)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "parent_", "a run that is not a child has no parent fields")
}

func TestEventsSend(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	p.StartWorker(t)
	client := p.Client(t)
	ctx := context.Background()

	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "bench-wait", "--input", "7")...)
	require.Equal(t, 0, code, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	stepIn(t, client, id, "wait", durabletype.TaskWaiting)

	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^wait +- +WAITING +\d+ +\+\d+\.\d{3}s +- +- +- +-$`, stepRow(t, section(t, out, "STEP "), "wait"))
	require.Equal(t, []string{"STEP", "STATE", "WAITS FOR"}, fields(table(t, out, "waits (")[0]))
	require.Equal(t, []string{"wait", "WAITING", `event "bench-7"`}, fields(table(t, out, "waits (")[1]))
	js := showJSON(t, p, id)
	require.Equal(t, "bench-7", jsonStep(t, js, "wait")["event_key"])
	require.Equal(t, "event", jsonStep(t, js, "wait")["kind"])
	require.Equal(t, "WAITING", jsonStep(t, js, "wait")["state"])
	require.NotContains(t, jsonStep(t, js, "wait"), "signal")

	// Another tenant's event, another key: nobody waits for them.
	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", "bench-7", "--tenant", "other", "--payload", "1")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, `event "bench-7" of tenant "other": delivered to 0 waiting steps`+"\n", out)
	require.Equal(t, `durable events send: warning: no step of tenant "other" was waiting for event "bench-7"; it is kept for steps that look back (durable.WithLookback)`+"\n"+
		`durable events send: hint: check the key and the tenant: "durable runs show RUN_ID" says what a waiting run's steps wait for`+"\n", errOut)
	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", "bench-8", "--payload", "1", "--json")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, `{"delivered":0}`+"\n", out)
	require.Contains(t, errOut, `warning: no step of tenant "default" was waiting for event "bench-8"`)
	require.Contains(t, errOut, `hint: without --tenant the event goes to tenant "default"`, "the tenant was not given")
	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", "bench-8", "--require-delivery")...)
	require.Equal(t, exitUndelivered, code, "--require-delivery: none delivered is an error; stderr:\n%s", errOut)
	require.Equal(t, `event "bench-8" of tenant "default": delivered to 0 waiting steps`+"\n", out, "sent all the same")
	require.Contains(t, errOut, "warning: no step of tenant")
	res, err := client.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.TaskWaiting, res.Steps[0].State, "still waiting")

	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", "bench-7", "--payload", " 42 ", "--require-delivery")...)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	require.Equal(t, `event "bench-7" of tenant "default": delivered to 1 waiting step`+"\n", out)
	res = settled(t, client, id)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	require.Equal(t, "42", string(res.Steps[0].Output), "the payload, as given")

	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", "bench-7", "--json", "--payload", "43")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, `{"delivered":0}`+"\n", out, "delivered once")

	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String(), "--events")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"wait", "COMPLETED", `event "bench-7"`}, fields(table(t, out, "waits (")[1]))
	require.Regexp(t, `(?m)^\+\d+\.\d{3}s +wait +WAITING +1 +event "bench-7"$`, out)

	// chaos waits for "chaos-N" and looks back an hour: an event sent
	// before the run lets it complete.
	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", chaosKey(5), "--payload", `"ok"`)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "delivered to 0 waiting steps")
	code, out, errOut = runCLI(t, p.Flags("trigger", "--workflow", "chaos", "--input", `{"n":5}`, "--wait", "--timeout", "60s")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	chaos := clitest.ParseIDs(t, out, 1)[0]
	code, out, errOut = runCLI(t, p.Flags("runs", "show", chaos.String())...)
	require.Equal(t, 0, code, errOut)
	waits := table(t, out, "waits (")
	require.Len(t, waits, 4)
	require.Equal(t, []string{"approve", "COMPLETED", `event "chaos-5"`}, fields(waits[1]))
	require.Regexp(t, `^sub +COMPLETED +child run [0-9a-f-]{36} \(COMPLETED\)$`, waits[2])
	require.Equal(t, []string{"fan", "COMPLETED", "4 items: 4 COMPLETED"}, fields(waits[3]))
	require.Len(t, table(t, out, "child runs (1 run: 1 COMPLETED):"), 2)
}

func TestEventsSendUsage(t *testing.T) {
	t.Parallel()
	// Flags are checked before connecting, so no database is needed.
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"events"}, "Usage: durable events send"},
		{[]string{"events", "receive"}, `durable events: unknown action "receive"`},
		{append([]string{"events", "send"}, db...), "durable events send: --key is required\n"},
		{append([]string{"events", "send", "--key", "a\x01b"}, db...), `durable events send: --key "a\x01b": want 1 to 255 bytes`},
		{append([]string{"events", "send", "--key", strings.Repeat("k", 256)}, db...), `want 1 to 255 bytes`},
		{append([]string{"events", "send", "--key", "k", "--tenant", ""}, db...), `--tenant "": want 1 to 200 bytes`},
		{append([]string{"events", "send", "--key", "k", "--payload", "{"}, db...), `durable events send: --payload "{" is not valid JSON`},
		{append([]string{"events", "send", "--key", "k", "--payload", "yes"}, db...), `--payload "yes" is not valid JSON`},
		{append([]string{"events", "send", "--key", "k", "--payload", ""}, db...), `--payload "" is not valid JSON`},
		{append([]string{"events", "send", "--key", "k", "extra"}, db...), `durable events send: unexpected argument "extra"`},
		{append([]string{"events", "send", "--key", "k", "--nope"}, db...), "flag provided but not defined: -nope"},
		{[]string{"events", "send", "--key", "k", "--database-url="}, "--database-url (or $DURABLE_DATABASE_URL) is required"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		require.Equal(t, exitUsage, code, "%q: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%q", tc.args)
		require.Contains(t, errOut, tc.want, "%q", tc.args)
	}
	code, out, errOut := runCLI(t, "events", "-h")
	require.Equal(t, 0, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "Usage: durable events send")
	code, out, errOut = runCLI(t, "events", "send", "-h")
	require.Equal(t, 0, code)
	require.Empty(t, out)
	require.True(t, strings.HasPrefix(errOut, "Usage: durable events send "), errOut)
	for _, flag := range []string{"-key", "-tenant", "-payload", "-json", "-database-url", "-schema"} {
		require.Regexp(t, `\n  `+flag+`[ \n]`, errOut, "flag %s documented", flag)
	}

	// A database that cannot be reached is an error, not a usage error.
	code, out, errOut = runCLI(t, "events", "send", "--key", "k", "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "durable events send: connecting")
}

func TestSignal(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	wf := durable.NewWorkflow[int]("cli-test-gate")
	gate := durable.WaitForSignal[string](wf, "gate", "go")
	durable.Step(wf, "after", func(ctx durable.Context, _ int) (string, error) {
		v, _ := gate.Output(ctx)
		return "got " + v, nil
	}, durable.After(gate))
	p.StartWorker(t, wf)
	client := p.Client(t)
	ctx := context.Background()
	id, err := wf.RunNoWait(ctx, client, "ada", 1)
	require.NoError(t, err)
	stepIn(t, client, id, "gate", durabletype.TaskWaiting)

	code, out, errOut := runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"gate", "WAITING", `signal "go"`}, fields(table(t, out, "waits (")[1]))
	require.Len(t, table(t, out, "waits ("), 2, "only the steps that wait")
	js := showJSON(t, p, id)
	require.Equal(t, "go", jsonStep(t, js, "gate")["signal"])
	require.NotContains(t, jsonStep(t, js, "gate"), "event_key")

	// Another tenant's run is not found.
	code, out, errOut = runCLI(t, p.Flags("signal", id.String(), "go", "--tenant", "bob")...)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "durable signal: run "+id.String()+` of tenant "bob" not found in schema `+p.Schema+"\n", errOut)
	res, err := client.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.TaskWaiting, res.Steps[0].State, "still waiting")

	code, out, errOut = runCLI(t, p.Flags("signal", "--tenant", "ada", id.String(), "go", "--payload", `"yes"`)...)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	require.Equal(t, `signal "go" sent to run `+id.String()+"\n", out)
	res = settled(t, client, id)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	after, _ := res.Step("after")
	require.Equal(t, `"got yes"`, string(after.Output))

	// A settled run, an unknown one: exit status 1, and why.
	code, out, errOut = runCLI(t, p.Flags("signal", id.String(), "go")...)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "durable signal: run "+id.String()+" has already settled: signals go only to runs in flight\n", errOut)
	missing := uuid.New()
	code, out, errOut = runCLI(t, p.Flags("signal", missing.String(), "go")...)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "durable signal: run "+missing.String()+" not found in schema "+p.Schema+"\n", errOut)

	// A signal sent before its step waits (the run starts in an hour) is
	// accepted: it is kept with the run.
	id, err = wf.RunNoWait(ctx, client, "ada", 2, durable.WithStartAfter(time.Hour))
	require.NoError(t, err)
	code, _, errOut = runCLI(t, p.Flags("signal", id.String(), "go", "--payload", `"early"`)...)
	require.Equal(t, 0, code, errOut)
	code, out, _ = runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code)
	require.Equal(t, []string{"gate", "QUEUED", `signal "go"`}, fields(table(t, out, "waits (")[1]))
	require.Equal(t, "go", jsonStep(t, showJSON(t, p, id), "gate")["signal"], "known from the run's shape before it waits")
}

func TestSignalUsage(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	id := uuid.NewString()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{db, "durable signal: a RUN_ID and a signal NAME are required\n"},
		{append([]string{id}, db...), "durable signal: a RUN_ID and a signal NAME are required\n"},
		{append([]string{id, "go", "more"}, db...), `durable signal: unexpected argument "more"`},
		{append([]string{"not-a-uuid", "go"}, db...), `durable signal: "not-a-uuid" is not a run ID`},
		{append([]string{id, "g\x01o"}, db...), `durable signal: signal NAME "g\x01o": want 1 to 255 bytes`},
		{append([]string{id, "go", "--payload", "{"}, db...), `durable signal: --payload "{" is not valid JSON`},
		{append([]string{id, "go", "--tenant", "a\tb"}, db...), `--tenant "a\tb": want 1 to 200 bytes`},
		{append([]string{id, "go", "--nope"}, db...), "flag provided but not defined: -nope"},
		{[]string{id, "go", "--database-url="}, "--database-url (or $DURABLE_DATABASE_URL) is required"},
	} {
		code, out, errOut := runCLI(t, append([]string{"signal"}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%q: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%q", tc.args)
		require.Contains(t, errOut, tc.want, "%q", tc.args)
	}
	code, out, errOut := runCLI(t, "signal", "-h")
	require.Equal(t, 0, code)
	require.Empty(t, out)
	require.True(t, strings.HasPrefix(errOut, "Usage: durable signal RUN_ID NAME "), errOut)
	for _, flag := range []string{"-tenant", "-payload", "-database-url", "-schema"} {
		require.Regexp(t, `\n  `+flag+`[ \n]`, errOut, "flag %s documented", flag)
	}
	code, out, _ = runCLI(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "\n  events    send an event")
	require.Contains(t, out, "\n  signal    send a signal")
}

func TestRunsShowMap(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	wf := durable.NewWorkflow[int]("cli-test-map")
	list := durable.Step(wf, "list", func(_ durable.Context, n int) ([]int, error) {
		out := make([]int, n)
		for k := range out {
			out[k] = k
		}
		return out, nil
	})
	durable.Map(wf, "fan", list, func(_ durable.Context, x int) (int, error) {
		if x == 2 {
			return 0, durable.Terminal(errors.New("bad item 2\nsecond line"))
		}
		return 10 * x, nil
	})
	p.StartWorker(t, wf)
	client := p.Client(t)
	ctx := context.Background()

	// bench-map: 25 items, all completed.
	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "bench-map", "--input", "25", "--wait", "--timeout", "60s")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String(), "--outputs")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"items", "COMPLETED", "25 items: 25 COMPLETED"}, fields(table(t, out, "waits (")[1]))
	require.NotContains(t, out, "failed items")
	require.NotContains(t, out, "items[0] ", "items are not rows of the step table")
	require.Len(t, section(t, out, "STEP "), 4, "list, items, join")
	outputs := strings.SplitN(out, "\noutputs of the completed steps:\n", 2)[1]
	require.Equal(t, 10, strings.Count(outputs, "\nitems["), "the first 10 items:\n%s", outputs)
	require.Contains(t, outputs, "\nitems[0]:\n  {}\n")
	require.Contains(t, outputs, "\nitems[9]:\n  {}\nitems: … 15 more completed items of 25 (--json prints every item's output)\n")
	require.True(t, strings.HasSuffix(outputs, "join:\n  25\n"), outputs)
	js := showJSON(t, p, id)
	items := jsonStep(t, js, "items")
	require.Equal(t, "map", items["kind"])
	require.Equal(t, map[string]any{"COMPLETED": 25.0}, items["item_counts"])
	require.Len(t, items["items"], 25)
	it := items["items"].([]any)[24].(map[string]any)
	require.Equal(t, 24.0, it["item"])
	require.Equal(t, "items[24]", it["name"])
	require.Equal(t, "COMPLETED", it["state"])
	require.Equal(t, map[string]any{}, it["output"])
	require.NotContains(t, jsonStep(t, js, "list"), "items")
	require.NotContains(t, jsonStep(t, js, "list"), "item_counts")

	// No items: the step completes at once.
	code, out, errOut = runCLI(t, p.Flags("trigger", "--workflow", "bench-map", "--wait", "--timeout", "60s")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	id = clitest.ParseIDs(t, out, 1)[0]
	code, out, _ = runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code)
	require.Equal(t, []string{"items", "COMPLETED", "0 items"}, fields(table(t, out, "waits (")[1]))
	items = jsonStep(t, showJSON(t, p, id), "items")
	require.Equal(t, []any{}, items["items"])
	require.Equal(t, map[string]any{}, items["item_counts"])

	// An item that fails fails the step; the others are cancelled or had
	// completed.
	_, err := wf.Run(ctx, client, "ada", 6)
	var re *durable.RunError
	require.ErrorAs(t, err, &re)
	code, out, errOut = runCLI(t, p.Flags("runs", "show", re.RunID.String(), "--events")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "failure   step \"fan\": item 2: bad item 2 …\n")
	require.Regexp(t, `^fan +FAILED +6 items: (\d+ [A-Z]+, )*1 FAILED`, table(t, out, "waits (")[1])
	failed := table(t, out, "failed items of fan (1 of 6):")
	require.Len(t, failed, 2)
	requireAligned(t, failed, "ATTEMPTS", "FINISHED", "ERROR")
	require.Regexp(t, `^fan\[2\] +1 +\+\d+\.\d{3}s +bad item 2 …$`, failed[1])
	require.Regexp(t, `(?m)^\+\d+\.\d{3}s +fan\[2\] +FAILED +1 +bad item 2 …$`, out, "events name items as people read them")
	require.NotContains(t, out, "~fan")
	js = showJSON(t, p, re.RunID, "--events")
	require.Equal(t, 1.0, jsonStep(t, js, "fan")["item_counts"].(map[string]any)["FAILED"])
	var named bool
	for _, ev := range js["events"].([]any) {
		step := ev.(map[string]any)["step"].(string)
		require.False(t, strings.HasPrefix(step, "~"), step)
		named = named || step == "fan[2]"
	}
	require.True(t, named)
}

// TestRunsShowCaps prints a run with a map step of 10,000 items, 15 of them
// failed, and 25 child runs: counts and the first few, never every item.
func TestRunsShowCaps(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res := &durable.RunResult{ID: uuid.New(), Workflow: "big", Tenant: "t", Status: durabletype.RunRunning, CreatedAt: base}
	fan := durable.StepResult{Name: "fan", Kind: durabletype.KindMap, State: durabletype.TaskWaiting, Attempts: 1, StartedAt: base}
	for k := range 10_000 {
		it := durable.StepResult{Name: fmt.Sprintf("fan[%d]", k), Kind: durabletype.KindItem, Item: k, State: durabletype.TaskCompleted,
			Attempts: 1, StartedAt: base, FinishedAt: base.Add(time.Second), Output: []byte(fmt.Sprint(k))}
		if k%100 == 7 && k < 1500 {
			it.State, it.Error, it.Output = durabletype.TaskFailed, fmt.Sprintf("item %d broke", k), nil
		}
		fan.Items = append(fan.Items, it)
	}
	res.Steps = []durable.StepResult{fan, {Name: "kid", Kind: durabletype.KindChild, State: durabletype.TaskWaiting, Attempts: 25}}
	v := &runView{res: res, prog: "durable"}
	for k := range 25 {
		v.children = append(v.children, durabletype.RunSummary{ID: uuid.New(), Workflow: "small", Tenant: "t",
			Status: durabletype.RunFailed, FailedStep: "x", Error: "no", CreatedAt: base.Add(time.Duration(k) * time.Millisecond),
			ParentID: res.ID, ParentStep: "kid"})
	}
	v.children[24].Status = durabletype.RunRunning
	res.Steps[1].ChildRunID = v.children[24].ID

	var b bytes.Buffer
	printRun(&b, v, showOptions{outputs: true})
	out := b.String()
	require.Less(t, strings.Count(out, "\n"), 100, out)
	require.Equal(t, []string{"fan", "WAITING", "10000 items: 9985 COMPLETED, 15 FAILED"}, fields(table(t, out, "waits (")[1]))
	require.Equal(t, []string{"kid", "WAITING", "child run " + v.children[24].ID.String() + " (RUNNING)"}, fields(table(t, out, "waits (")[2]))
	failed := table(t, out, "failed items of fan (15 of 10000; the first 10):")
	require.Len(t, failed, 12)
	require.Equal(t, "… 5 more failed (--json lists every item)", failed[11])
	failed = failed[:11]
	requireAligned(t, failed, "ATTEMPTS", "FINISHED", "ERROR")
	require.Equal(t, []string{"fan[7]", "1", "+1.000s", "item 7 broke"}, fields(failed[1]))
	require.Equal(t, []string{"fan[907]", "1", "+1.000s", "item 907 broke"}, fields(failed[10]))
	kids := table(t, out, "child runs (25 runs: 1 RUNNING, 24 FAILED):")
	require.Len(t, kids, 1+maxChildRows+1)
	require.Equal(t, "… 5 more: durable runs list --parent "+res.ID.String(), kids[1+maxChildRows])
	requireAligned(t, kids[:1+maxChildRows], "STEP", "WORKFLOW", "STATUS", "FINISHED", "FAILURE")
	require.Equal(t, []string{v.children[0].ID.String(), "kid", "small", "FAILED", "-", `step "x": no`}, fields(kids[1]))
	require.Len(t, regexp.MustCompile(`(?m)^fan\[\d+\]:$`).FindAllString(out, -1), maxItemOutputs, out)
	require.Contains(t, out, "\nfan: … 9975 more completed items of 10000 (--json prints every item's output)\n")

	v.moreChildren = true
	b.Reset()
	printRun(&b, v, showOptions{})
	require.Contains(t, b.String(), "\nchild runs (the first 25 runs: 1 RUNNING, 24 FAILED):\n")
	require.Contains(t, b.String(), "\n… more: durable runs list --parent "+res.ID.String()+"\n")

	// A child step that has not started its child yet.
	b.Reset()
	printRun(&b, &runView{prog: "durable", res: &durable.RunResult{ID: uuid.New(), Workflow: "w", Tenant: "t", Status: durabletype.RunRunning,
		CreatedAt: base, Steps: []durable.StepResult{{Name: "kid", Kind: durabletype.KindChild, State: durabletype.TaskPending}}}}, showOptions{})
	require.Equal(t, []string{"kid", "PENDING", "child run: not started yet"}, fields(table(t, b.String(), "waits (")[1]))
	require.True(t, strings.HasSuffix(b.String(), "\nchild runs: none yet\n"), b.String())

	js, err := json.Marshal(runDetail(v, false))
	require.NoError(t, err)
	var got struct {
		Children     []json.RawMessage `json:"children"`
		MoreChildren bool              `json:"more_children"`
		Steps        []struct {
			ItemCounts map[string]int    `json:"item_counts"`
			Items      []json.RawMessage `json:"items"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(js, &got))
	require.Len(t, got.Children, 25)
	require.True(t, got.MoreChildren)
	require.Len(t, got.Steps[0].Items, 10_000, "--json holds every item")
	require.Equal(t, map[string]int{"COMPLETED": 9985, "FAILED": 15}, got.Steps[0].ItemCounts)
	require.Nil(t, got.Steps[1].Items)
}

// The case: a payload that the waiting step cannot read as its
// type is refused (exit status 3, the run, the step and the shape
// expected on stderr), and the step keeps waiting.
func TestEventsSendRefused(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	type payment struct {
		Reference string `json:"reference"`
		Amount    int    `json:"amount"`
	}
	wf := durable.NewWorkflow[int]("cli-test-payment")
	paid := durable.WaitForEvent[payment](wf, "payment.received", func(ctx durable.Context, n int) (string, error) {
		return fmt.Sprintf("pay-%d", n), nil
	})
	durable.Step(wf, "record", func(ctx durable.Context, _ int) (string, error) {
		v, _ := paid.Output(ctx)
		return v.Reference, nil
	}, durable.After(paid))
	gate := durable.WaitForSignal[bool](wf, "gate", "go")
	p.StartWorker(t, wf)
	client := p.Client(t)
	id, err := wf.RunNoWait(context.Background(), client, "default", 1)
	require.NoError(t, err)
	stepIn(t, client, id, "payment.received", durabletype.TaskWaiting)
	stepIn(t, client, id, "gate", durabletype.TaskWaiting)

	code, out, errOut := runCLI(t, p.Flags("events", "send", "--key", "pay-1", "--payload", `{"reference":5}`)...)
	require.Equal(t, 3, code, errOut)
	require.Equal(t, `event "pay-1" of tenant "default": delivered to 0 waiting steps`+"\n", out)
	require.Equal(t, "durable events send: run "+id.String()+` step "payment.received" refused the payload: `+
		`at .reference: the number 5, expected a string; it expects {"amount": integer, "reference": string}; the step keeps waiting`+"\n", errOut)
	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", "pay-1", "--payload", `"x"`, "--json")...)
	require.Equal(t, 3, code, errOut)
	var js struct {
		Delivered int
		Refused   []durabletype.Refusal
	}
	require.NoError(t, json.Unmarshal([]byte(out), &js), out)
	require.Zero(t, js.Delivered)
	require.Len(t, js.Refused, 1)
	require.Equal(t, id, js.Refused[0].RunID)
	require.Equal(t, "object", js.Refused[0].Expected.Type)
	stepIn(t, client, id, "payment.received", durabletype.TaskWaiting)
	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String(), "--events")...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^\+\d+\.\d{3}s +payment\.received +WAITING +1 +refused the payload of event "pay-1": at \.reference: the number 5, expected a string; still waiting$`, out)

	code, _, errOut = runCLI(t, p.Flags("signal", id.String(), "go", "--payload", `"yes"`)...)
	require.Equal(t, 3, code, errOut)
	require.Equal(t, "durable signal: run "+id.String()+` step "gate" refused the payload: at the top: a string, expected a boolean; it expects boolean; the step keeps waiting`+"\n", errOut)

	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", "pay-1", "--payload", `{"reference":"r-1","amount":2}`)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "delivered to 1 waiting step")
	code, _, errOut = runCLI(t, p.Flags("signal", id.String(), "go", "--payload", `true`)...)
	require.Equal(t, 0, code, errOut)
	res := settled(t, client, id)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	got, err := gate.Result(res)
	require.NoError(t, err)
	require.True(t, got)
}

// TestShowSkippedNeverRan: a skipped step never ran: runs show gives it 0
// attempts, no start and no time taken (its record counts the attempt
// that decided the skip), as the JSON does; a wait skipped on its timeout
// keeps the start of its wait.
func TestShowSkippedNeverRan(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res := &durable.RunResult{ID: uuid.New(), Workflow: "w", Tenant: "t", Status: durabletype.RunCompleted, CreatedAt: base,
		Steps: []durable.StepResult{
			{Name: "ran", State: durabletype.TaskCompleted, Attempts: 2, StartedAt: base.Add(time.Second), FinishedAt: base.Add(3 * time.Second)},
			{Name: "skipped", State: durabletype.TaskSkipped, Attempts: 1, StartedAt: base.Add(4 * time.Second), FinishedAt: base.Add(4 * time.Second)},
			{Name: "timedout", Kind: durabletype.KindEvent, State: durabletype.TaskSkipped, Attempts: 1, StartedAt: base.Add(4 * time.Second), FinishedAt: base.Add(time.Hour)},
		}}
	var b bytes.Buffer
	printRun(&b, &runView{res: res, prog: "durable"}, showOptions{})
	steps := table(t, b.String(), "steps (")
	require.Equal(t, []string{"ran", "-", "COMPLETED", "2", "+1.000s", "+3.000s", "2s", "-", "-"}, fields(steps[1]))
	require.Equal(t, []string{"skipped", "-", "SKIPPED", "0", "-", "+4.000s", "-", "-", "-"}, fields(steps[2]))
	require.Equal(t, "0", fields(steps[3])[3])
	require.Equal(t, "+4.000s", fields(steps[3])[4])

	doc := durablejson.NewRunDetail(&durablejson.RunData{Run: res}, -1)
	require.Equal(t, 2, doc.Steps[0].Attempts)
	require.Zero(t, doc.Steps[1].Attempts)
	require.Nil(t, doc.Steps[1].StartedAt)
	require.NotNil(t, doc.Steps[1].FinishedAt)
	require.Zero(t, doc.Steps[2].Attempts)
	require.NotNil(t, doc.Steps[2].StartedAt)
}
