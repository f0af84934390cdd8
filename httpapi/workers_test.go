package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// orphanRun starts a run of the "orphan" workflow on s for tenant through
// an engine that is not started: no worker serves the workflow, so its
// first step stays queued.
func orphanRun(t *testing.T, s store.Store, tenant string) uuid.UUID {
	t.Helper()
	wf := durable.NewWorkflow[int]("orphan")
	durable.Step(wf, "work", func(ctx durable.Context, n int) (int, error) { return n, nil })
	e, err := durable.New(s, durable.Config{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, e.Register(wf))
	st, err := e.StartByName(context.Background(), "orphan", tenant, []byte("1"))
	require.NoError(t, err)
	return st.RunID
}

// workerAnswer is a worker of GET /api/v1/workers.
type workerAnswer struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	Version     string    `json:"version"`
	StartedAt   time.Time `json:"started_at"`
	LastSeen    time.Time `json:"last_seen"`
	Workflows   []string  `json:"workflows"`
	Versions    []string  `json:"versions"`
	Accepts     []string  `json:"accepts"`
	Concurrency int       `json:"concurrency"`
	InFlight    int       `json:"in_flight"`
	Leader      bool      `json:"leader"`
	Live        bool      `json:"live"`
	DeadAfter   string    `json:"dead_after"`
}

// workersAnswer is the body of GET /api/v1/workers.
type workersAnswer struct {
	Workers  []workerAnswer `json:"workers"`
	Unserved []struct {
		Workflow string `json:"workflow"`
		Version  string `json:"version"`
		Ready    int    `json:"ready"`
	} `json:"unserved"`
}

func (en *env) workers(t *testing.T, tenant, query string) workersAnswer {
	t.Helper()
	r := en.do(t, tenant, "GET", "/api/v1/workers"+query, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var v workersAnswer
	require.NoError(t, json.Unmarshal(r.body, &v))
	return v
}

func TestWorkersMemory(t *testing.T) {
	t.Parallel()
	testWorkers(t, memstore.New())
}

func TestWorkersPostgreSQL(t *testing.T) {
	t.Parallel()
	testWorkers(t, pgtest.Store(t))
}

func testWorkers(t *testing.T, s store.Store) {
	en := newEnv(t, s)
	ctx := context.Background()
	ws, err := en.e.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	self := ws[0].ID
	orphan := orphanRun(t, s, "acme")
	// A worker that died an hour ago, serving the orphan workflow.
	require.NoError(t, s.(store.WorkerRegistry).RegisterWorker(ctx, &store.RegisterWorkerParams{
		Now: time.Now().Add(-time.Hour), Started: true,
		Worker: store.Worker{ID: "crashed", Host: "h1", Workflows: []string{"orphan"}, Concurrency: 1, DeadAfter: time.Minute},
	}))

	// The live worker: the started engine, which leads (once elected).
	require.Eventually(t, func() bool {
		v := en.workers(t, "*", "")
		return len(v.Workers) == 1 && v.Workers[0].Leader
	}, 20*time.Second, 20*time.Millisecond, "the engine is listed as leader")
	v := en.workers(t, "*", "")
	w := v.Workers[0]
	require.Equal(t, self, w.ID)
	require.True(t, w.Live)
	require.NotEmpty(t, w.Host)
	require.Equal(t, []string{"approval", "flaky", "greet", "paid", "slow"}, w.Workflows)
	require.Equal(t, 100, w.Concurrency)
	require.Equal(t, "10s", w.DeadAfter)
	require.False(t, w.StartedAt.IsZero())
	require.False(t, w.LastSeen.Before(w.StartedAt))
	require.Len(t, v.Unserved, 1)
	require.Equal(t, "orphan", v.Unserved[0].Workflow)
	require.Equal(t, 1, v.Unserved[0].Ready)

	// all=true adds the dead worker, which neither leads nor serves.
	v = en.workers(t, "*", "?all=true")
	require.Len(t, v.Workers, 2)
	i := slices.IndexFunc(v.Workers, func(x workerAnswer) bool {
		return x.ID == "crashed"
	})
	require.GreaterOrEqual(t, i, 0)
	require.False(t, v.Workers[i].Live)
	require.False(t, v.Workers[i].Leader)
	require.Equal(t, "1m0s", v.Workers[i].DeadAfter)
	require.Len(t, v.Unserved, 1, "a dead worker serves nothing")
	require.Len(t, en.workers(t, "*", "?all=false").Workers, 1)

	// Tenant-scoped callers see the fleet; the unserved workflows are
	// counted from their own queues.
	v = en.workers(t, "acme", "")
	require.Len(t, v.Workers, 1)
	require.Len(t, v.Unserved, 1)
	v = en.workers(t, "globex", "")
	require.Len(t, v.Workers, 1)
	require.Empty(t, v.Unserved)

	requireProblem(t, en.do(t, "*", "GET", "/api/v1/workers?all=maybe", nil), 400, "invalid_filter")
	requireProblem(t, en.do(t, "*", "GET", "/api/v1/workers?live=true", nil), 400, "invalid_filter")
	requireProblem(t, en.do(t, "*", "POST", "/api/v1/workers", nil), 405, "method_not_allowed")

	// The orphan run is unserved; a served run not settled and a settled
	// run are not.
	r := en.do(t, "acme", "GET", "/api/v1/runs/"+orphan.String(), nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, true, r.json(t)["unserved"])
	sid := en.trigger(t, "acme", "slow", map[string]any{"input": 1})
	gid := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "x"}})
	en.settle(t, gid)
	for _, id := range []uuid.UUID{sid, gid} {
		r = en.do(t, "acme", "GET", "/api/v1/runs/"+id.String(), nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.NotContains(t, r.json(t), "unserved", id)
	}

	// The listing marks the orphan run only.
	r = en.do(t, "acme", "GET", "/api/v1/runs", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	marked := map[string]bool{}
	for _, x := range r.json(t)["runs"].([]any) {
		run := x.(map[string]any)
		marked[run["id"].(string)] = run["unserved"] == true
	}
	require.Equal(t, map[string]bool{orphan.String(): true, sid.String(): false, gid.String(): false}, marked)
}

// noRegistry hides the store's registry of workers.
type noRegistry struct{ store.Store }

// TestWorkersUnsupported: on a store without a registry of workers, the
// workers endpoint answers 501, and runs carry no unserved flag.
func TestWorkersUnsupported(t *testing.T) {
	t.Parallel()
	s := noRegistry{memstore.New()}
	en := newEnv(t, s)
	requireProblem(t, en.do(t, "*", "GET", "/api/v1/workers", nil), 501, "workers_unsupported")
	orphan := orphanRun(t, s, "acme")
	r := en.do(t, "acme", "GET", "/api/v1/runs/"+orphan.String(), nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, r.json(t), "unserved")
	r = en.do(t, "acme", "GET", "/api/v1/runs", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), "unserved")
}
