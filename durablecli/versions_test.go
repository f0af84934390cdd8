package durablecli

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"
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

// Versions and deploys through the command line (docs/semantics.md,
// "Versions and deploys"): "workflows", "runs list --version", "runs
// show", "runs upgrade" and "workers".

// deployWorkflows returns two builds of workflow "cli-deploy": the old one
// (a → b) and the new one (a → b → c). Each step adds one to its parent's
// output (to the input for a).
func deployWorkflows() (old, cur *durable.Workflow[int]) {
	build := func(steps ...string) *durable.Workflow[int] {
		wf := durable.NewWorkflow[int]("cli-deploy")
		var prev *durable.StepRef[int]
		for _, name := range steps {
			if prev == nil {
				prev = durable.Step(wf, name, func(_ durable.Context, n int) (int, error) { return n + 1, nil })
				continue
			}
			parent := prev
			prev = durable.Step(wf, name, func(ctx durable.Context, _ int) (int, error) {
				n, _ := parent.Output(ctx)
				return n + 1, nil
			}, durable.After(parent))
		}
		return wf
	}
	return build("a", "b"), build("a", "b", "c")
}

// versionRows returns the rows of the "workflows" table by version, after
// checking its header and alignment.
func versionRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, "WORKFLOW KIND VERSION REGISTERED IN FLIGHT READY WORKERS ACCEPTED BY RECORDED STATUS",
		strings.Join(strings.Fields(lines[0]), " "), out)
	requireAligned(t, lines, "KIND", "VERSION", "REGISTERED", "IN FLIGHT", "READY", "WORKERS", "ACCEPTED BY", "RECORDED", "STATUS")
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := fields(l)
		require.Len(t, f, 10, "row %q", l)
		require.Contains(t, []string{"workflow", "function", "-"}, f[1], "kind of row %q", l)
		f = slices.Delete(f, 1, 2) // the rows without their kind
		rows[f[1]] = f
	}
	require.Len(t, rows, len(lines)-1, "one row per version:\n%s", out)
	return rows
}

// versionsJSON runs "workflows --json" with cfg and returns the versions of
// its workflows by version.
func versionsJSON(t *testing.T, cfg Config, p *testPG, args ...string) map[string]durablejson.WorkflowVersion {
	t.Helper()
	code, out, errOut := runConfig(cfg, p.Flags(append([]string{"workflows", "--json"}, args...)...)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 1, strings.Count(out, "\n"), "one line:\n%s", out)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var js durablejson.WorkflowList
	require.NoError(t, dec.Decode(&js), out)
	byVersion := map[string]durablejson.WorkflowVersion{}
	for _, w := range js.Workflows {
		for _, v := range w.Versions {
			require.Equal(t, w.Name, v.Workflow, out)
			byVersion[v.Version] = v
		}
	}
	return byVersion
}

// startWorkerCmd runs the "worker" command of cfg until the test ends.
func startWorkerCmd(t *testing.T, cfg Config, p *testPG, id string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	log := clitest.NewLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- Run(ctx, cfg, p.Flags("worker", "--worker-id", id), &stdout, pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, 0, <-done, log.String())
	})
	log.WaitFor(t, cfg.Name+" worker: serving", 30*time.Second)
}

// TestDeployVersions: runs of two builds of one workflow are in flight
// and no worker serves either; "workflows" shows both versions unserved,
// "runs upgrade" refuses to move a run of the new version back to the old
// one (it lacks a step the run has not finished); a worker of the new
// build starts; the old version stays unserved, as "workflows", "workers",
// "runs list --version" and "runs show" say; a dry run, then an upgrade,
// moves its runs to the new version, where they complete.
func TestDeployVersions(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	ctx := context.Background()
	client := p.Client(t)
	old, cur := deployWorkflows()
	vOld, vCur := old.Version(), cur.Version()
	require.NotEqual(t, vOld, vCur)
	// The new build's program: it registers the new definition.
	prog := Config{Name: "durable", Workflows: []durable.Definition{cur}}
	runProg := func(args ...string) (int, string, string) { return runConfig(prog, p.Flags(args...)...) }

	var oldRuns []uuid.UUID
	for i := range 2 {
		id, err := old.RunNoWait(ctx, client, "acme", 10*i)
		require.NoError(t, err)
		oldRuns = append(oldRuns, id)
	}
	curRun, err := cur.RunNoWait(ctx, client, "acme", 100)
	require.NoError(t, err)

	// Both versions unserved; the new one is this program's newest.
	code, out, errOut := runProg("workflows", "--workflow", "cli-deploy")
	require.Equal(t, 0, code, errOut)
	rows := versionRows(t, out)
	require.Len(t, rows, 2, out)
	require.Equal(t, []string{"cli-deploy", vCur, "newest", "1", "1", "-", "-"}, rows[vCur][:7])
	require.Equal(t, []string{"cli-deploy", vOld, "-", "2", "2", "-", "-"}, rows[vOld][:7])
	for _, v := range []string{vCur, vOld} {
		require.Equal(t, "UNSERVED", rows[v][8])
		_, err := time.ParseInLocation(listTime, rows[v][7], time.Local)
		require.NoError(t, err, "recorded: %q", rows[v][7])
	}
	require.True(t, strings.Index(out, vCur) < strings.Index(out, vOld), "newest first:\n%s", out)
	require.Contains(t, errOut, `warning: version "`+vOld+`" of workflow "cli-deploy" has 2 runs in flight that no live worker serves or accepts: `+
		"they wait until a worker of that version starts; or move them: durable runs upgrade --workflow cli-deploy --from "+vOld+" --to "+vCur+"\n")
	require.Contains(t, errOut, `warning: version "`+vCur+`" of workflow "cli-deploy" has 1 run in flight`)

	// "stats" counts the two versions apart.
	code, out, errOut = runProg("stats")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^cli-deploy +`+vCur+` +acme +1 +0 +0 `, out)
	require.Regexp(t, `(?m)^cli-deploy +`+vOld+` +acme +2 +0 +0 `, out)
	require.Regexp(t, `(?m)^cli-deploy +`+vOld+` +acme +RUNNING +in-flight +2$`, out)

	js := versionsJSON(t, prog, p)
	jc, jo := js[vCur], js[vOld]
	require.True(t, jc.Registered && jc.Newest && jc.Unserved)
	require.False(t, jo.Registered || jo.Newest)
	require.True(t, jo.Unserved)
	require.Equal(t, []int{1, 1, 2, 2}, []int{jc.InFlight, jc.Ready, jo.InFlight, jo.Ready})
	require.NotNil(t, jo.RecordedAt)
	require.Equal(t, "int", jc.Input)
	require.Equal(t, []durablejson.WorkflowStep{
		{Name: "a", Kind: "step", Parents: []string{}, Output: "int"},
		{Name: "b", Kind: "step", Parents: []string{"a"}, Output: "int"},
		{Name: "c", Kind: "step", Parents: []string{"b"}, Output: "int"},
	}, jc.Steps)
	require.Len(t, jo.Steps, 2, "the old version's DAG, as its runs recorded it")
	require.Empty(t, jc.Workers)
	require.NotNil(t, jc.Workers, "a list, never null")

	// A program that does not register the workflow (the built-in
	// binary) lists what the store knows.
	code, out, errOut = runCLI(t, p.Flags("workflows", "--steps")...)
	require.Equal(t, 0, code, errOut)
	table, dags, _ := strings.Cut(out, "\n\n")
	rows = versionRows(t, table+"\n")
	require.Equal(t, []string{"cli-deploy", vCur, "-", "1", "1"}, rows[vCur][:5])
	require.Equal(t, []string{"cli-deploy", vOld, "-", "2", "2"}, rows[vOld][:5])
	require.Contains(t, rows, orderFlowVersion(t), "the workflows it registers are listed")
	require.Contains(t, dags, "cli-deploy "+vCur+": input int\n")
	dag := section(t, dags, "cli-deploy "+vCur)
	require.Equal(t, []string{"STEP", "KIND", "PARENTS", "OUTPUT", "DETAIL"}, fields(strings.TrimSpace(dag[1])))
	require.Equal(t, []string{"c", "step", "b", "int", "-"}, fields(strings.TrimSpace(dag[4])))

	// Moving the new version's run back to the old one is refused: it has
	// not finished step c, which the old version lacks.
	code, out, errOut = runProg("runs", "upgrade", "--workflow", "cli-deploy", "--from", vCur, "--to", vOld)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, `durable runs upgrade: run `+curRun.String()+` refused: incompatible: step "c": it is PENDING, and the other version has no such step`+"\n", errOut)
	require.Equal(t, `moved 0 runs of workflow "cli-deploy" from version "`+vCur+`" to "`+vOld+`" (1 refused)`+"\n", out)
	code, out, errOut = runProg("runs", "upgrade", "--workflow", "cli-deploy", "--from", vCur, "--to", vOld, "--dry-run", "--json")
	require.Equal(t, 1, code, errOut)
	var up durablejson.Upgrade
	require.NoError(t, json.Unmarshal([]byte(out), &up), out)
	require.Equal(t, durablejson.Upgrade{Workflow: "cli-deploy", From: vCur, To: vOld, DryRun: true, Moved: []uuid.UUID{},
		Refused: []durablejson.UpgradeRefusal{{RunID: curRun, Code: "incompatible", Reason: "incompatible", Step: "c",
			Error: `incompatible: step "c": it is PENDING, and the other version has no such step`}}}, up)

	// A worker of the new build serves the new version only.
	startWorkerCmd(t, prog, p, "deploy-new")
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := client.Wait(wctx, curRun)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)

	code, out, errOut = runProg("workflows")
	require.Equal(t, 0, code, errOut)
	rows = versionRows(t, out)
	require.Equal(t, []string{"cli-deploy", vCur, "newest", "0", "0", "deploy-new", "-"}, rows[vCur][:7])
	require.Equal(t, "-", rows[vCur][8])
	require.Equal(t, []string{"cli-deploy", vOld, "-", "2", "2", "-", "-"}, rows[vOld][:7])
	require.Equal(t, "UNSERVED", rows[vOld][8])
	require.Contains(t, errOut, `warning: version "`+vOld+`" of workflow "cli-deploy" has 2 runs in flight`)
	require.NotContains(t, errOut, vCur+`" of workflow`)
	js = versionsJSON(t, prog, p, "--workflow", "cli-deploy")
	require.Len(t, js, 2)
	require.Equal(t, []string{"deploy-new"}, js[vCur].Workers)
	require.False(t, js[vCur].Unserved)
	require.True(t, js[vOld].Unserved)

	// "workers": the versions the worker serves, and the unserved one.
	code, out, errOut = runProg("workers", "--json")
	require.Equal(t, 0, code, errOut)
	var ws durablejson.Workers
	require.NoError(t, json.Unmarshal([]byte(out), &ws), out)
	require.Len(t, ws.Workers, 1)
	require.Equal(t, []string{"cli-deploy@" + vCur}, ws.Workers[0].Versions)
	require.Equal(t, []string{"cli-deploy"}, ws.Workers[0].Workflows)
	require.Equal(t, []durablejson.UnservedFlow{{Workflow: "cli-deploy", Version: vOld, Ready: 2}}, ws.Unserved)
	require.Contains(t, out, `"unserved":[{"workflow":"cli-deploy","version":"`+vOld+`","ready":2}]`)
	code, out, errOut = runProg("workers")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^deploy-new .* cli-deploy@`+vCur+` `, out)
	require.Equal(t, "warning: version "+vOld+" of workflow cli-deploy has 2 queued steps, but no live worker serves or accepts it: "+
		"start a worker of that version, or move its runs: durable runs upgrade --workflow cli-deploy --from "+vOld+" --to "+vCur+"\n", errOut)

	// "runs list --version".
	code, out, errOut = runProg("runs", "list", "--version", vOld)
	require.Equal(t, 0, code, errOut)
	listed, _ := listRows(t, out)
	require.ElementsMatch(t, []string{oldRuns[0].String(), oldRuns[1].String()}, rowIDs(listed))
	for _, r := range listed {
		require.Equal(t, vOld, r[2])
	}
	code, out, errOut = runProg("runs", "list", "--workflow", "cli-deploy", "--version", vCur, "--json")
	require.Equal(t, 0, code, errOut)
	var page struct {
		Runs []durablejson.Run `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page), out)
	require.Len(t, page.Runs, 1)
	require.Equal(t, curRun, page.Runs[0].ID)
	require.Equal(t, vCur, page.Runs[0].Version)

	// "runs show" of a run of the old version: the warning names the
	// version, and the fix moves it to the one served.
	code, out, errOut = runProg("runs", "show", oldRuns[0].String())
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "\nversion   "+vOld+"\n")
	require.Contains(t, out, "\nwarning   no live worker serves or accepts version \""+vOld+"\" of workflow \"cli-deploy\": its steps wait until one starts (see durable workflows)\n"+
		"fix       start a worker of version \""+vOld+"\", or move the run: durable runs upgrade --workflow cli-deploy --from "+vOld+" --to "+vCur+" --run "+oldRuns[0].String()+"\n")
	code, out, errOut = runProg("runs", "show", "--json", oldRuns[0].String())
	require.Equal(t, 0, code, errOut)
	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	require.Equal(t, vOld, shown["version"])
	require.Equal(t, true, shown["unserved"])
	require.Equal(t, vCur, shown["upgrade_to"])
	require.NotContains(t, shown["steps"].([]any)[0], "retired", "retired is absent unless set")
	code, out, errOut = runProg("runs", "show", curRun.String())
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "\nversion   "+vCur+"\n")
	require.NotContains(t, out, "warning")

	// A dry run moves nothing.
	code, out, errOut = runProg("runs", "upgrade", "--workflow", "cli-deploy", "--from", vOld, "--to", vCur, "--dry-run")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	require.ElementsMatch(t, []string{oldRuns[0].String() + " would move", oldRuns[1].String() + " would move"}, lines[:2])
	require.Equal(t, `would move 2 runs of workflow "cli-deploy" from version "`+vOld+`" to "`+vCur+`" (0 would be refused)`, lines[2])
	for _, id := range oldRuns {
		res, err := client.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, vOld, res.Version, "a dry run moves nothing")
	}

	// The upgrade: the runs move, and complete on the new build's worker,
	// with the step the new version adds.
	code, out, errOut = runProg("runs", "upgrade", "--workflow", "cli-deploy", "--from", vOld, "--to", vCur)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	require.Contains(t, out, oldRuns[0].String()+" moved\n")
	require.Contains(t, out, oldRuns[1].String()+" moved\n")
	require.Contains(t, out, `moved 2 runs of workflow "cli-deploy" from version "`+vOld+`" to "`+vCur+`" (0 refused)`+"\n")
	for i, id := range oldRuns {
		res, err := client.Wait(wctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "%v", res.Err)
		require.Equal(t, vCur, res.Version)
		c, ok := res.Step("c")
		require.True(t, ok)
		require.Equal(t, strconv.Itoa(10*i+3), string(c.Output))
	}
	js = versionsJSON(t, prog, p, "--workflow", "cli-deploy")
	require.Zero(t, js[vOld].InFlight)
	require.False(t, js[vOld].Unserved)
	code, out, errOut = runProg("runs", "upgrade", "--workflow", "cli-deploy", "--from", vOld, "--to", vCur)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, `no run of workflow "cli-deploy" at version "`+vOld+`" is in flight: nothing to move`+"\n", out)

	// Versions unknown here are usage errors that list the known ones.
	code, out, errOut = runProg("runs", "upgrade", "--workflow", "cli-deploy", "--from", vOld, "--to", "999999999999")
	require.Equal(t, exitUsage, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, `durable runs upgrade: unknown version "999999999999" of workflow "cli-deploy": this program does not register it and no run recorded it; its versions known here:`+"\n")
	require.Contains(t, errOut, "\n  "+vCur+" (newest registered here, 0 runs in flight, served by 1 live worker)\n")
	require.Contains(t, errOut, "\n  "+vOld+" (0 runs in flight)\n")
	code, _, errOut = runProg("runs", "upgrade", "--workflow", "cli-deploy", "--from", "nope", "--to", vCur)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, `unknown version "nope" of workflow "cli-deploy"`)
	code, _, errOut = runProg("runs", "upgrade", "--workflow", "cli-other", "--from", "1", "--to", "2")
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, `unknown version "2" of workflow "cli-other": this program does not register it and no run recorded it; no version of the workflow is known here`)
}

// orderFlowVersion is the version of the order workflow (order-processing)
// that testConfig registers.
func orderFlowVersion(t *testing.T) string {
	t.Helper()
	for _, d := range testConfig().Workflows {
		if wf, ok := d.(interface {
			Name() string
			Version() string
		}); ok && wf.Name() == "order-processing" {
			return wf.Version()
		}
	}
	require.Fail(t, "no order-processing workflow")
	return ""
}

// TestRunsUpgradeRetires: a run that finished a step the version it moves
// to lacks keeps it, retired, for its record; "runs show" marks it. The
// version it moves to is registered by the program only (no run recorded
// it yet). --run and --tenant select the runs.
func TestRunsUpgradeRetires(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	ctx := context.Background()
	client := p.Client(t)
	build := func(first bool) *durable.Workflow[int] {
		wf := durable.NewWorkflow[int]("cli-retire")
		if first {
			durable.Step(wf, "a", func(_ durable.Context, n int) (int, error) { return n, nil })
		}
		gate := durable.WaitForSignal[string](wf, "gate", "go")
		if !first {
			durable.Step(wf, "c", func(ctx durable.Context, _ int) (string, error) {
				v, _ := gate.Output(ctx)
				return "got " + v, nil
			}, durable.After(gate))
		}
		return wf
	}
	v1, v2 := build(true), build(false)
	old, err := durable.New(p.Store, durable.Config{Logger: clitest.QuietLogger(), WorkerID: "retire-v1"})
	require.NoError(t, err)
	require.NoError(t, old.Register(v1))
	require.NoError(t, old.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, old.Stop(sctx))
	})
	id, err := v1.RunNoWait(ctx, client, "acme", 7)
	require.NoError(t, err)
	other, err := v1.RunNoWait(ctx, client, "acme", 8)
	require.NoError(t, err)
	stepIn(t, client, id, "a", durabletype.TaskCompleted)
	stepIn(t, client, id, "gate", durabletype.TaskWaiting)

	// Version 2 is known only to a program that registers it.
	args := []string{"runs", "upgrade", "--workflow", "cli-retire", "--from", v1.Version(), "--to", v2.Version(), "--run", id.String()}
	code, _, errOut := runCLI(t, p.Flags(args...)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, `unknown version "`+v2.Version()+`" of workflow "cli-retire"`)
	require.Contains(t, errOut, "\n  "+v1.Version()+" (2 runs in flight, served by 1 live worker)\n")
	prog := Config{Name: "durable", Workflows: []durable.Definition{v2}}

	// Another tenant's run is not found.
	code, out, errOut := runConfig(prog, p.Flags(append(args, "--tenant", "bob")...)...)
	require.Equal(t, 1, code, errOut)
	require.Equal(t, "durable runs upgrade: run "+id.String()+` refused: not found in tenant "bob"`+"\n", errOut)
	require.Equal(t, `moved 0 runs of workflow "cli-retire" (tenant "bob") from version "`+v1.Version()+`" to "`+v2.Version()+`" (1 refused)`+"\n", out)

	code, out, errOut = runConfig(prog, p.Flags(append(args, "--tenant", "acme")...)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, id.String()+" moved\n"+`moved 1 run of workflow "cli-retire" (tenant "acme") from version "`+v1.Version()+`" to "`+v2.Version()+`" (0 refused)`+"\n", out)
	res, err := client.Get(ctx, other)
	require.NoError(t, err)
	require.Equal(t, v1.Version(), res.Version, "only the run named moved")

	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, errOut)
	steps := section(t, out, "STEP ")
	require.Regexp(t, `^a +- +COMPLETED \(retired\) +1 `, stepRow(t, steps, "a"))
	require.Regexp(t, `^gate +- +WAITING +1 `, stepRow(t, steps, "gate"))
	require.Regexp(t, `^c +gate +PENDING +0 `, stepRow(t, steps, "c"))
	require.Contains(t, out, "(retired: kept for the run's record when it moved to version "+v2.Version()+", which does not run them; they never run again)\n")
	require.Contains(t, out, "\nversion   "+v2.Version()+"\n")
	js := showJSON(t, p, id)
	require.Equal(t, true, jsonStep(t, js, "a")["retired"])
	require.NotContains(t, jsonStep(t, js, "gate"), "retired", "retired is absent unless set")
	require.Equal(t, v2.Version(), js["version"])
	require.Equal(t, true, js["unserved"], "no worker of version 2 yet")

	// A worker of version 2 finishes the run; the retired step stays.
	p.StartWorker(t, v2)
	require.NoError(t, client.Signal(ctx, id, "go", "yes"))
	res = settled(t, client, id)
	require.Equal(t, durabletype.RunCompleted, res.Status, "%v", res.Err)
	c, _ := res.Step("c")
	require.Equal(t, `"got yes"`, string(c.Output))
	a, _ := res.Step("a")
	require.True(t, a.Retired)
	require.Equal(t, durabletype.TaskCompleted, a.State)
}

// TestRunsUpgradeUsage: bad command lines are refused before connecting.
func TestRunsUpgradeUsage(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	id := uuid.NewString()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "durable runs upgrade: --workflow is required\n"},
		{[]string{"--workflow", "w"}, `durable runs upgrade: --from and --to are required: the versions the runs move from and to ("durable workflows" lists them)` + "\n"},
		{[]string{"--workflow", "w", "--from", "1"}, "--from and --to are required"},
		{[]string{"--workflow", "w w", "--from", "1", "--to", "2"}, `--workflow "w w" holds ' ': use 1-128 bytes of letters, digits and _-.:/`},
		{[]string{"--workflow", "w", "--from", "-1", "--to", "2"}, `--from "-1" starts with '-': use 1-64 bytes of letters, digits and _-.+, starting with a letter or digit`},
		{[]string{"--workflow", "w", "--from", "1", "--to", "v@2"}, `--to "v@2" holds '@': use 1-64`},
		{[]string{"--workflow", "w", "--from", "1", "--to", "1"}, `durable runs upgrade: --from and --to are both "1": the runs are at that version already` + "\n"},
		{[]string{"--workflow", "w", "--from", "1", "--to", "2", "--run", "nope"}, `invalid value "nope" for flag -run: not a run ID`},
		{[]string{"--workflow", "w", "--from", "1", "--to", "2", "--tenant", ""}, `--tenant "" is empty: use 1-200 bytes`},
		{[]string{"--workflow", "w", "--from", "1", "--to", "2", id}, `durable runs upgrade: unexpected argument "` + id + `"`},
		{[]string{"--workflow", "w", "--from", "1", "--to", "2", "--database-url="}, "--database-url (or $DURABLE_DATABASE_URL) is required"},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"runs", "upgrade"}, db...), tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	code, _, errOut := runCLI(t, "runs", "upgrade", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable runs upgrade --workflow W --from X --to Y --database-url URL [flags]")
	for _, flag := range []string{"-workflow", "-from", "-to", "-run", "-tenant", "-dry-run", "-json"} {
		require.Contains(t, errOut, "\n  "+flag, flag)
	}
	code, _, errOut = runCLI(t, "runs", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "\n  upgrade  move the runs in flight of a version")
}

// TestWorkflowsUsage: the help and the bad command lines of "workflows".
func TestWorkflowsUsage(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workflow", "a b"}, `durable workflows: --workflow "a b" holds ' ': use 1-128 bytes of letters`},
		{[]string{"extra"}, `durable workflows: unexpected argument "extra"`},
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
		{[]string{"--database-url="}, "durable workflows: --database-url (or $DURABLE_DATABASE_URL) is required"},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"workflows"}, db...), tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	code, _, errOut := runCLI(t, append([]string{"workflows"}, db...)...)
	require.Equal(t, 1, code, "a database that cannot be reached")
	require.Contains(t, errOut, "durable workflows: ")
	code, _, errOut = runCLI(t, "workflows", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable workflows --database-url URL [flags]")
	for _, flag := range []string{"-workflow", "-steps", "-json", "-database-url", "-schema"} {
		require.Contains(t, errOut, "\n  "+flag, flag)
	}
	code, out, _ := runCLI(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "\n  workflows the versions of each workflow")

	// An empty store: nothing but this program's workflows.
	p := newPG(t, true)
	code, out, errOut = runConfig(Config{Name: "app"}, p.Flags("workflows")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "no workflows: this program registers none, no run recorded one and no live worker serves one\n", out)
	code, out, errOut = runConfig(Config{Name: "app"}, p.Flags("workflows", "--workflow", "w", "--json")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, `{"workflows":[]}`+"\n", out)
}

// TestWorkflowsAccepts: a worker whose definition accepts the old version
// is listed as accepting it, so that the old version is not unserved; it
// moves the old version's runs and completes them.
func TestWorkflowsAccepts(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	ctx := context.Background()
	client := p.Client(t)
	old, cur := deployWorkflows()
	vOld, vCur := old.Version(), cur.Version()
	cur.Accepts(vOld)
	id, err := old.RunNoWait(ctx, client, "acme", 1)
	require.NoError(t, err)

	e, err := durable.New(p.Store, durable.Config{Logger: clitest.QuietLogger(), WorkerID: "acc-1"})
	require.NoError(t, err)
	require.NoError(t, e.Register(cur))
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(sctx))
	})

	prog := Config{Name: "durable", Workflows: []durable.Definition{cur}}
	code, out, errOut := runConfig(prog, p.Flags("workflows")...)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut, "nothing unserved")
	rows := versionRows(t, out)
	require.Equal(t, []string{"cli-deploy", vCur, "newest"}, rows[vCur][:3])
	require.Equal(t, "acc-1", rows[vCur][5])
	require.Equal(t, []string{"-", "acc-1"}, rows[vOld][5:7], "the old version is accepted")
	require.Equal(t, "-", rows[vOld][8])
	js := versionsJSON(t, prog, p)
	require.Equal(t, []string{vOld}, js[vCur].Accepts)
	require.Equal(t, []string{"acc-1"}, js[vOld].AcceptedBy)
	require.False(t, js[vOld].Unserved)

	code, out, errOut = runCLI(t, p.Flags("workers", "--json")...)
	require.Equal(t, 0, code, errOut)
	var ws durablejson.Workers
	require.NoError(t, json.Unmarshal([]byte(out), &ws), out)
	require.Len(t, ws.Workers, 1)
	require.Equal(t, []string{"cli-deploy@" + vCur}, ws.Workers[0].Versions)
	// It accepts the old version, and the legacy version of its own (the
	// one releases before fingerprint 2 gave it).
	require.Len(t, ws.Workers[0].Accepts, 2)
	require.Contains(t, ws.Workers[0].Accepts, "cli-deploy@"+vOld)

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := client.Wait(wctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	require.Equal(t, vCur, res.Version, "moved by the worker that accepts its version")
}

// TestSideBySideVersions: a program that gives both versions of a
// workflow serves both from one worker, and starts the one given last by
// name; its help names the workflow once.
func TestSideBySideVersions(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	old, cur := deployWorkflows()
	cfg := Config{Name: "app", Workflows: []durable.Definition{old, cur}}
	ctx := context.Background()
	client := p.Client(t)
	oldRun, err := old.RunNoWait(ctx, client, "t", 1)
	require.NoError(t, err)
	startWorkerCmd(t, cfg, p, "both")

	code, out, errOut := runConfig(cfg, p.Flags("trigger", "--workflow", "cli-deploy", "--input", "10", "--wait")...)
	require.Equal(t, 0, code, errOut)
	ids := clitest.ParseIDs(t, out, 1)
	res, err := client.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status, out)
	require.Equal(t, cur.Version(), res.Version, "by name: the version given last")
	require.Len(t, res.Steps, 3)

	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err = client.Wait(wctx, oldRun)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	require.Len(t, res.Steps, 2, "the old version's run, by the old version's code")

	rows := versionRows(t, func() string {
		code, out, errOut := runConfig(cfg, p.Flags("workflows")...)
		require.Equal(t, 0, code, errOut)
		return out
	}())
	require.Equal(t, "newest", rows[cur.Version()][2])
	require.Equal(t, "yes", rows[old.Version()][2])

	code, _, help := runConfig(cfg, "trigger", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, help, "Workflows: cli-deploy.")
	require.NotContains(t, help, "cli-deploy, cli-deploy", help)
}

// TestStepDetailOfMaps: "workflows" says what a map step maps over: its
// list step, or the run's input (MapInput).
func TestStepDetailOfMaps(t *testing.T) {
	t.Parallel()
	require.Equal(t, `maps over "list"`, stepDetail(durable.StepInfo{Kind: durabletype.KindMap, MapOver: "list"}))
	require.Equal(t, "maps over the run's input", stepDetail(durable.StepInfo{Kind: durabletype.KindMap}))
}

// TestTriggerWarnsOfStaleVersion: "trigger" from a build of the program
// older than the workers' (its definition of the workflow is another
// version) starts the runs and says once, on stderr, that no live worker
// serves their version; a build with the workers' definition is not
// warned.
func TestTriggerWarnsOfStaleVersion(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	old, cur := deployWorkflows()
	startWorkerCmd(t, Config{Name: "app", Workflows: []durable.Definition{cur}}, p, "new")

	oldProg := Config{Name: "app", Workflows: []durable.Definition{old}}
	code, out, errOut := runConfig(oldProg, p.Flags("trigger", "--workflow", "cli-deploy", "--input", "1", "--count", "3")...)
	require.Equal(t, 0, code, errOut)
	clitest.ParseIDs(t, out, 3)
	want := `app trigger: warning: no live worker serves version "` + old.Version() + `" of workflow "cli-deploy"`
	require.Equal(t, 1, strings.Count(errOut, want), errOut)
	require.Contains(t, errOut, `live workers serve "`+cur.Version()+`"`)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one line, not the engine's log as well: %s", errOut)

	newProg := Config{Name: "app", Workflows: []durable.Definition{cur}}
	code, _, errOut = runConfig(newProg, p.Flags("trigger", "--workflow", "cli-deploy", "--input", "1")...)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
}

// TestLegacyVersionCommands: a run that an older release of durable
// started, pinned to the legacy id of the program's definition
// ("8de8fd9e2f04", the fingerprint those releases gave a → b), is shown
// by "workflows" as the program's version's legacy one, and "worker"
// completes it where it is.
func TestLegacyVersionCommands(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	ctx := context.Background()
	const legacy = "8de8fd9e2f04"
	cur, _ := deployWorkflows()
	older, _ := deployWorkflows()
	older.WithVersion(legacy) // as the older release recorded it
	id, err := older.RunNoWait(ctx, p.Client(t), "acme", 1)
	require.NoError(t, err)

	prog := Config{Name: "app", Workflows: []durable.Definition{cur}}
	js := versionsJSON(t, prog, p)
	require.Equal(t, cur.Version(), js[legacy].LegacyOf)
	require.Equal(t, 1, js[legacy].InFlight)
	require.Empty(t, js[cur.Version()].LegacyOf)
	code, out, errOut := runConfig(prog, p.Flags("workflows")...)
	require.Equal(t, 0, code, errOut)
	rows := versionRows(t, out)
	require.Equal(t, "legacy", rows[legacy][2], out)

	startWorkerCmd(t, prog, p, "new")
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := p.Client(t).Wait(wctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	require.Equal(t, legacy, res.Version)
	js = versionsJSON(t, prog, p)
	require.Equal(t, []string{"new"}, js[legacy].AcceptedBy)
	require.False(t, js[legacy].Unserved)
}
