package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// Versions of workflows through the API (docs/semantics.md, "Versions and
// deploys"): the version of runs, the versions of workflows the server
// knows (registered or not), unserved versions, and moving runs between
// versions.

// shipDef is version v of workflow "ship", a chain of steps as one build
// declares it.
func shipDef(v string, steps ...string) *durable.Workflow[string] {
	wf := durable.NewWorkflow[string]("ship").WithVersion(v)
	var prev durable.Parent
	for _, s := range steps {
		var opts []durable.StepOption
		if prev != nil {
			opts = append(opts, durable.After(prev))
		}
		prev = durable.Step(wf, s, func(_ durable.Context, in string) (string, error) { return in + "/" + s, nil }, opts...)
	}
	return wf
}

// gatedDefs are two versions of workflow "gated": "1" runs prep, then
// legacy and a wait for signal "go" before done; "2" drops legacy and adds
// audit. A run of 1 that waits for the signal moves to 2 with legacy
// retired (it ran, and 2 does not run it).
func gatedDefs() (v1, v2 *durable.Workflow[string]) {
	build := func(v string, legacy bool) *durable.Workflow[string] {
		wf := durable.NewWorkflow[string]("gated").WithVersion(v)
		id := func(_ durable.Context, in string) (string, error) { return in, nil }
		prep := durable.Step(wf, "prep", id)
		if legacy {
			durable.Step(wf, "legacy", id, durable.After(prep))
		}
		gate := durable.WaitForSignal[string](wf, "gate", "go", durable.After(prep))
		durable.Step(wf, "done", id, durable.After(gate))
		if !legacy {
			durable.Step(wf, "audit", id, durable.After(prep))
		}
		return wf
	}
	return build("1", true), build("2", false)
}

// legacyDef is a workflow that no server of the tests registers: a build
// that is gone left its runs.
func legacyDef() *durable.Workflow[int] {
	wf := durable.NewWorkflow[int]("legacy")
	first := durable.Step(wf, "first", func(_ durable.Context, n int) (int, error) { return n, nil })
	durable.Step(wf, "second", func(_ durable.Context, n int) (int, error) { return n, nil }, durable.After(first))
	return wf
}

// apiVersion is a version of GET /api/v1/workflows.
type apiVersion struct {
	Version    string     `json:"version"`
	Newest     bool       `json:"newest"`
	Registered bool       `json:"registered"`
	Accepts    []string   `json:"accepts"`
	Input      string     `json:"input"`
	Steps      []apiStep  `json:"steps"`
	OnFailure  bool       `json:"on_failure"`
	InFlight   int        `json:"in_flight"`
	Ready      int        `json:"ready"`
	Workers    []string   `json:"workers"`
	AcceptedBy []string   `json:"accepted_by"`
	Unserved   bool       `json:"unserved"`
	RecordedAt *time.Time `json:"recorded_at"`
}

type apiStep struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Parents []string `json:"parents"`
	Output  string   `json:"output"`
	Signal  string   `json:"signal"`
	Retired bool     `json:"retired"`
}

// apiWorkflow is a workflow of GET /api/v1/workflows.
type apiWorkflow struct {
	Name       string       `json:"name"`
	Kind       string       `json:"kind"`
	Version    string       `json:"version"`
	Registered bool         `json:"registered"`
	Steps      []apiStep    `json:"steps"`
	Unserved   bool         `json:"unserved"`
	Versions   []apiVersion `json:"versions"`
}

func (w apiWorkflow) version(t *testing.T, v string) apiVersion {
	t.Helper()
	i := slices.IndexFunc(w.Versions, func(x apiVersion) bool { return x.Version == v })
	require.GreaterOrEqual(t, i, 0, "workflow %s has no version %s: %+v", w.Name, v, w.Versions)
	return w.Versions[i]
}

func (w apiWorkflow) versionNames() []string {
	var out []string
	for _, v := range w.Versions {
		out = append(out, v.Version)
	}
	return out
}

func stepNames(steps []apiStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name)
	}
	return out
}

// decode answers the request as tenant, requires status, and decodes the
// body into v.
func (en *env) decode(t *testing.T, tenant, method, path string, body any, status int, v any) {
	t.Helper()
	r := en.do(t, tenant, method, path, body)
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

func (en *env) workflows(t *testing.T, tenant string) map[string]apiWorkflow {
	t.Helper()
	var v struct {
		Workflows []apiWorkflow `json:"workflows"`
	}
	en.decode(t, tenant, "GET", "/api/v1/workflows", nil, http.StatusOK, &v)
	out := map[string]apiWorkflow{}
	for _, w := range v.Workflows {
		out[w.Name] = w
	}
	return out
}

// runVersion reads a run's version and whether it is unserved.
func (en *env) runVersion(t *testing.T, tenant string, id uuid.UUID) (version string, unserved bool) {
	t.Helper()
	var v struct {
		Version  string `json:"version"`
		Unserved bool   `json:"unserved"`
	}
	en.decode(t, tenant, "GET", "/api/v1/runs/"+id.String(), nil, http.StatusOK, &v)
	return v.Version, v.Unserved
}

// upgradeAnswer is the body of POST /api/v1/workflows/{name}/upgrade.
type upgradeAnswer struct {
	Moved   []uuid.UUID `json:"moved"`
	Refused []struct {
		RunID uuid.UUID `json:"run_id"`
		Error string    `json:"error"`
		Code  string    `json:"code"`
	} `json:"refused"`
}

func (en *env) upgrade(t *testing.T, tenant, workflow string, body map[string]any) upgradeAnswer {
	t.Helper()
	var v upgradeAnswer
	en.decode(t, tenant, "POST", "/api/v1/workflows/"+workflow+"/upgrade", body, http.StatusOK, &v)
	return v
}

// startClient starts a run of wf through an engine that registers nothing
// and is not started: a client whose build no worker runs any more.
func startClient[I any](t *testing.T, s store.Store, wf *durable.Workflow[I], tenant string, in I) uuid.UUID {
	t.Helper()
	c, err := durable.New(s, durable.Config{Logger: quiet})
	require.NoError(t, err)
	st, err := wf.Start(context.Background(), c, tenant, in)
	require.NoError(t, err)
	return st.RunID
}

func TestVersionsAPIMemory(t *testing.T) {
	t.Parallel()
	testVersionsAPI(t, memstore.New())
}

func TestVersionsAPIPostgreSQL(t *testing.T) {
	t.Parallel()
	testVersionsAPI(t, pgtest.Store(t))
}

// testVersionsAPI: the server's engine serves versions "3" and "2" of
// workflow ship (2 registered last: the one it starts); runs of version 1
// (pack → label), started by a build that is gone, wait unserved, as do
// the runs of workflow legacy, which the server does not register. The API
// shows each run's version, lists and filters by version, lists every
// workflow the store knows with its versions, DAGs, runs in flight and
// workers, and moves runs from 1 to 2 within the caller's tenant.
func testVersionsAPI(t *testing.T, s store.Store) {
	v1, v2, v3 := shipDef("1", "pack", "label"), shipDef("2", "pack", "label", "notify"), shipDef("3", "pack", "weigh")
	en := newEngineEnv(t, s, v3, v2)
	self := en.e.WorkerID()
	a1 := startClient(t, s, v1, "acme", "a1")
	a2 := startClient(t, s, v1, "acme", "a2")
	g1 := startClient(t, s, v1, "globex", "g1")
	lg := startClient(t, s, legacyDef(), "acme", 7)
	cur := en.trigger(t, "acme", "ship", map[string]any{"input": "c"})
	require.Equal(t, durabletype.RunCompleted, en.settle(t, cur).Status)

	// Each run says its version; those of versions no worker serves are
	// unserved.
	for id, want := range map[uuid.UUID]string{a1: "1", a2: "1", cur: "2", lg: legacyDef().Version()} {
		v, unserved := en.runVersion(t, "acme", id)
		require.Equal(t, want, v)
		require.Equal(t, id != cur, unserved, "run of version %s", v)
	}
	require.Regexp(t, `^[0-9a-f]{12}$`, legacyDef().Version())

	// The listing shows and filters by version, within the tenant.
	byVersion := func(tenant, q string) map[uuid.UUID]string {
		t.Helper()
		var page struct {
			Runs []struct {
				ID       uuid.UUID `json:"id"`
				Version  string    `json:"version"`
				Unserved bool      `json:"unserved"`
			} `json:"runs"`
		}
		en.decode(t, tenant, "GET", "/api/v1/runs?"+q, nil, http.StatusOK, &page)
		out := map[uuid.UUID]string{}
		for _, r := range page.Runs {
			out[r.ID] = r.Version
			require.Equal(t, r.Version == "1", r.Unserved && r.Version != legacyDef().Version(), "run %s", r.ID)
		}
		return out
	}
	require.Equal(t, map[uuid.UUID]string{a1: "1", a2: "1", cur: "2"}, byVersion("acme", "workflow=ship"))
	require.Equal(t, map[uuid.UUID]string{a1: "1", a2: "1"}, byVersion("acme", "version=1"))
	require.Equal(t, map[uuid.UUID]string{a1: "1", a2: "1", g1: "1"}, byVersion("*", "workflow=ship&version=1"))
	require.Equal(t, map[uuid.UUID]string{cur: "2"}, byVersion("acme", "version=2&include=waits"))
	require.Empty(t, byVersion("acme", "version=3"))
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/runs?version=a@b", nil), 400, "invalid_version")

	// Every workflow the store and the workers know: ship with its three
	// versions, newest first, and legacy, which this server does not
	// register, with the DAG its runs recorded.
	wfs := en.workflows(t, "*")
	ship := wfs["ship"]
	require.True(t, ship.Registered)
	require.Equal(t, "2", ship.Version)
	require.Equal(t, []string{"pack", "label", "notify"}, stepNames(ship.Steps))
	require.Equal(t, []string{"2", "3", "1"}, ship.versionNames())
	require.True(t, ship.Unserved)
	n2 := ship.version(t, "2")
	require.True(t, n2.Newest)
	require.True(t, n2.Registered)
	require.Equal(t, []string{self}, n2.Workers)
	require.Equal(t, "string", n2.Input)
	require.Equal(t, []apiStep{{Name: "pack", Kind: "step", Parents: []string{}, Output: "string"},
		{Name: "label", Kind: "step", Parents: []string{"pack"}, Output: "string"},
		{Name: "notify", Kind: "step", Parents: []string{"label"}, Output: "string"}}, n2.Steps)
	require.Zero(t, n2.InFlight)
	require.False(t, n2.Unserved)
	require.NotNil(t, n2.RecordedAt)
	n3 := ship.version(t, "3")
	require.False(t, n3.Newest)
	require.True(t, n3.Registered)
	require.Equal(t, []string{self}, n3.Workers)
	require.Nil(t, n3.RecordedAt, "no run started at version 3")
	old := ship.version(t, "1")
	require.False(t, old.Registered)
	require.Empty(t, old.Workers)
	require.Empty(t, old.AcceptedBy)
	require.Equal(t, 3, old.InFlight)
	require.Equal(t, 3, old.Ready)
	require.True(t, old.Unserved)
	require.Equal(t, []string{"pack", "label"}, stepNames(old.Steps), "the DAG its runs recorded")
	legacy := wfs["legacy"]
	require.False(t, legacy.Registered)
	require.Equal(t, legacyDef().Version(), legacy.Version)
	require.Equal(t, []string{"first", "second"}, stepNames(legacy.Steps))
	require.True(t, legacy.Unserved)
	require.Equal(t, 1, legacy.version(t, legacyDef().Version()).InFlight)

	// A tenant-scoped caller sees the same workflows, with its runs only.
	require.Equal(t, 2, en.workflows(t, "acme")["ship"].version(t, "1").InFlight)
	globex := en.workflows(t, "globex")
	require.Equal(t, 1, globex["ship"].version(t, "1").Ready)
	require.Zero(t, globex["legacy"].version(t, legacyDef().Version()).InFlight)
	require.False(t, globex["legacy"].Unserved, "globex has no run of legacy")

	// One workflow; 404 only when nothing knows it.
	var one apiWorkflow
	en.decode(t, "acme", "GET", "/api/v1/workflows/legacy", nil, http.StatusOK, &one)
	require.Equal(t, legacy.Steps, one.Steps)
	en.decode(t, "acme", "GET", "/api/v1/workflows/ship", nil, http.StatusOK, &one)
	require.Equal(t, []string{"2", "3", "1"}, one.versionNames())
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/workflows/nope", nil), 404, "workflow_not_found")
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/workflows/a@b", nil), 400, "invalid_name")

	// This server cannot start legacy, and says why.
	r := en.do(t, "acme", "POST", "/api/v1/workflows/legacy/runs", map[string]any{"input": 1})
	requireProblem(t, r, 404, "workflow_not_found")
	require.Contains(t, r.json(t)["detail"], `workflow "legacy" is known here only from its runs and workers`)
	require.Contains(t, r.json(t)["detail"], `this server can start "ship"`)

	// The workers: this engine serves ship 2 and 3; versions 1 and
	// legacy's wait.
	ws := en.workers(t, "*", "")
	require.Len(t, ws.Workers, 1)
	require.Equal(t, []string{"ship@2", "ship@3"}, ws.Workers[0].Versions)
	require.Equal(t, []string{}, ws.Workers[0].Accepts)
	var unserved []string
	for _, u := range ws.Unserved {
		unserved = append(unserved, u.Workflow+"@"+u.Version+":"+strings.Repeat("x", u.Ready))
	}
	require.Equal(t, []string{"legacy@" + legacyDef().Version() + ":x", "ship@1:xxx"}, unserved)

	// The queues count by version.
	var stats struct {
		Queues []struct {
			Workflow, Version, Tenant string
			Ready                     int
		} `json:"queues"`
	}
	en.decode(t, "acme", "GET", "/api/v1/stats", nil, http.StatusOK, &stats)
	var queues []string
	for _, q := range stats.Queues {
		queues = append(queues, q.Workflow+"@"+q.Version+"/"+q.Tenant+":"+strings.Repeat("x", q.Ready))
	}
	require.Equal(t, []string{"legacy@" + legacyDef().Version() + "/acme:x", "ship@1/acme:xx"}, queues)

	// Moving runs: bad requests first.
	path := "/api/v1/workflows/ship/upgrade"
	requireProblem(t, en.do(t, "acme", "POST", path, ""), 400, "bad_body")
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{}), 400, "invalid_version")
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{"from": "1"}), 400, "invalid_version")
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{"from": "a@b", "to": "2"}), 400, "invalid_version")
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{"from": "1", "to": "a@b"}), 400, "invalid_version")
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{"from": "1", "to": "1"}), 400, "invalid_upgrade")
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{"from": "1", "to": "2", "run_ids": []string{"x"}}), 400, "invalid_id")
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{"from": "1", "to": "2", "run_ids": []string{}}), 400, "invalid_id")
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{"from": "1", "to": "2", "force": true}), 400, "bad_body")
	requireProblem(t, en.do(t, "acme", "POST", path, `{"from":"1","to":"2","run_ids":["`+strings.Repeat("a", 1<<20)+`"]}`), 413, "body_too_large")
	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/workflows/nope/upgrade", map[string]any{"from": "1", "to": "2"}), 404, "workflow_not_found")
	r = en.do(t, "acme", "POST", path, map[string]any{"from": "1", "to": "9"})
	requireProblem(t, r, 422, "unknown_version")
	require.Equal(t, []any{"2", "3", "1"}, r.json(t)["versions"])
	require.Contains(t, r.json(t)["detail"], `workflow "ship" has no version "9"`)
	requireProblem(t, en.do(t, "acme", "POST", path, map[string]any{"from": "0", "to": "2"}), 422, "unknown_version")
	requireProblem(t, en.do(t, "acme", "GET", path, nil), 405, "method_not_allowed")

	// A dry run: version 3 lacks label, which the runs have not run.
	res := en.upgrade(t, "acme", "ship", map[string]any{"from": "1", "to": "3", "dry_run": true})
	require.Empty(t, res.Moved)
	require.Len(t, res.Refused, 2)
	for _, x := range res.Refused {
		require.Contains(t, []uuid.UUID{a1, a2}, x.RunID)
		require.Equal(t, "incompatible", x.Code)
		require.Contains(t, x.Error, `"label"`)
	}
	res = en.upgrade(t, "acme", "ship", map[string]any{"from": "1", "to": "2", "dry_run": true})
	require.ElementsMatch(t, []uuid.UUID{a1, a2}, res.Moved)
	require.Empty(t, res.Refused)
	v, _ := en.runVersion(t, "acme", a1)
	require.Equal(t, "1", v, "a dry run moves nothing")

	// Moving named runs within the tenant: another tenant's run is not
	// found (and stays), a run of another version is refused.
	res = en.upgrade(t, "acme", "ship", map[string]any{"from": "1", "to": "2", "run_ids": []string{a1.String(), g1.String(), cur.String()}})
	require.Equal(t, []uuid.UUID{a1}, res.Moved)
	refused := map[uuid.UUID]string{}
	for _, x := range res.Refused {
		refused[x.RunID] = x.Code
		if x.RunID == g1 {
			require.Equal(t, `not found in tenant "acme"`, x.Error, "nothing of another tenant's run shows")
		}
	}
	require.Equal(t, map[uuid.UUID]string{g1: "run_not_found", cur: "version_mismatch"}, refused)
	v, _ = en.runVersion(t, "*", g1)
	require.Equal(t, "1", v)
	done := en.settle(t, a1)
	require.Equal(t, durabletype.RunCompleted, done.Status, "a worker of version 2 ran it")
	require.Equal(t, "2", done.Version)
	notify, ok := done.Step("notify")
	require.True(t, ok)
	require.Equal(t, `"a1/notify"`, string(notify.Output))
	v, unserved2 := en.runVersion(t, "acme", a1)
	require.Equal(t, "2", v)
	require.False(t, unserved2)

	// A settled run is refused.
	res = en.upgrade(t, "acme", "ship", map[string]any{"from": "2", "to": "3", "run_ids": []string{a1.String()}})
	require.Empty(t, res.Moved)
	require.Len(t, res.Refused, 1)
	require.Equal(t, "run_settled", res.Refused[0].Code)

	// Every run of the version, within the tenant; then the operator's.
	res = en.upgrade(t, "acme", "ship", map[string]any{"from": "1", "to": "2"})
	require.Equal(t, []uuid.UUID{a2}, res.Moved)
	require.Equal(t, map[uuid.UUID]string{g1: "1"}, byVersion("*", "version=1"))
	res = en.upgrade(t, "*", "ship", map[string]any{"from": "1", "to": "2"})
	require.Equal(t, []uuid.UUID{g1}, res.Moved)
	for _, id := range []uuid.UUID{a2, g1} {
		require.Equal(t, durabletype.RunCompleted, en.settle(t, id).Status)
	}
	old = en.workflows(t, "*")["ship"].version(t, "1")
	require.Zero(t, old.InFlight)
	require.False(t, old.Unserved)
	require.False(t, en.workflows(t, "acme")["ship"].Unserved)
}

func TestRetiredStepsMemory(t *testing.T) {
	t.Parallel()
	testRetiredSteps(t, memstore.New())
}

func TestRetiredStepsPostgreSQL(t *testing.T) {
	t.Parallel()
	testRetiredSteps(t, pgtest.Store(t))
}

// testRetiredSteps: a run of gated 1 that waits for its signal moves to
// version 2: legacy, which it ran and 2 lacks, is retired; audit, which 2
// adds, runs.
func testRetiredSteps(t *testing.T, s store.Store) {
	g1, g2 := gatedDefs()
	en := newEngineEnv(t, s, g1, g2)
	st, err := g1.Start(context.Background(), en.e, "acme", "x")
	require.NoError(t, err)
	id := st.RunID
	require.Eventually(t, func() bool {
		res, err := en.e.Get(context.Background(), id)
		require.NoError(t, err)
		gate, _ := res.Step("gate")
		legacy, _ := res.Step("legacy")
		return gate.State == durabletype.TaskWaiting && legacy.State == durabletype.TaskCompleted
	}, 20*time.Second, 20*time.Millisecond)
	res := en.upgrade(t, "acme", "gated", map[string]any{"from": "1", "to": "2"})
	require.Equal(t, []uuid.UUID{id}, res.Moved)
	r := en.do(t, "acme", "POST", "/api/v1/runs/"+id.String()+"/signals", map[string]any{"name": "go", "payload": "ok"})
	require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	require.Equal(t, durabletype.RunCompleted, en.settle(t, id).Status)

	var run struct {
		Version string `json:"version"`
		Steps   []struct {
			Name    string `json:"name"`
			State   string `json:"state"`
			Retired *bool  `json:"retired"`
		} `json:"steps"`
	}
	en.decode(t, "acme", "GET", "/api/v1/runs/"+id.String(), nil, http.StatusOK, &run)
	require.Equal(t, "2", run.Version)
	retired := map[string]bool{}
	for _, s := range run.Steps {
		require.Equal(t, "COMPLETED", s.State, s.Name)
		if s.Retired != nil {
			require.True(t, *s.Retired, "retired is absent unless set")
			retired[s.Name] = true
		}
	}
	require.Equal(t, map[string]bool{"legacy": true}, retired)
	require.ElementsMatch(t, []string{"prep", "legacy", "gate", "done", "audit"}, func() []string {
		var names []string
		for _, s := range run.Steps {
			names = append(names, s.Name)
		}
		return names
	}())
}
