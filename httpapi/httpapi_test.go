package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
	pgtest.NoteSkipped()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// token is the bearer token of the tests' handlers.
const token = "s3cret-token"

// Greeting is the input of the greet workflow.
type Greeting struct {
	Name string `json:"name"`
}

// env is one test's engine and API. Requests carry the token and the
// tenant of the X-Tenant header ("*": every tenant).
type env struct {
	e     *durable.Engine
	h     http.Handler
	fixed *atomic.Bool // makes the flaky workflow's step succeed
}

// newEnv starts an engine on s serving the test workflows, and its API.
func newEnv(t testing.TB, s store.Store) *env {
	t.Helper()
	fixed := &atomic.Bool{}
	greet := durable.NewWorkflow[Greeting]("greet")
	hello := durable.Step(greet, "hello", func(ctx durable.Context, in Greeting) (string, error) {
		return "hello " + in.Name, nil
	})
	durable.Step(greet, "shout", func(ctx durable.Context, in Greeting) (string, error) {
		h, _ := hello.Output(ctx)
		return strings.ToUpper(h), nil
	}, durable.After(hello))

	flaky := durable.NewWorkflow[int]("flaky")
	first := durable.Step(flaky, "first", func(ctx durable.Context, n int) (int, error) { return n + 1, nil })
	durable.Step(flaky, "second", func(ctx durable.Context, n int) (int, error) {
		if !fixed.Load() {
			return 0, durable.Terminal(errors.New("<b>broken</b>"))
		}
		v, _ := first.Output(ctx)
		return v * 10, nil
	}, durable.After(first))

	approval := durable.NewWorkflow[string]("approval")
	ok := durable.WaitForSignal[string](approval, "approved", "approve")
	durable.Step(approval, "record", func(ctx durable.Context, in string) (string, error) {
		by, _ := ok.Output(ctx)
		return in + " approved by " + by, nil
	}, durable.After(ok))

	paid := durable.NewWorkflow[string]("paid")
	got := durable.WaitForEvent[int](paid, "payment", func(ctx durable.Context, order string) (string, error) {
		return "paid-" + order, nil
	}, durable.WithLookback(time.Hour))
	durable.Step(paid, "ship", func(ctx durable.Context, order string) (int, error) {
		amount, _ := got.Output(ctx)
		return amount, nil
	}, durable.After(got))

	slow := durable.NewWorkflow[int]("slow")
	durable.Sleep(slow, "nap", time.Hour)

	e, err := durable.New(s, durable.Config{Logger: quiet, PollInterval: 50 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, DeadAfter: 10 * time.Second}) // live at every read on a loaded machine
	require.NoError(t, err)
	require.NoError(t, e.Register(greet, flaky, approval, paid, slow))
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	})
	h := httpapi.New(e, httpapi.Options{
		Logger:       quiet,
		Authenticate: httpapi.BearerToken(token),
		Tenant: func(r *http.Request) (string, bool, error) {
			switch t := r.Header.Get("X-Tenant"); t {
			case "":
				return "", false, errors.New("no tenant header")
			case "*":
				return "", true, nil
			default:
				return t, false, nil
			}
		},
		MaxBodyBytes: 64 << 10,
	})
	return &env{e: e, h: h, fixed: fixed}
}

// resp is an answer of the API.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

// do sends a request as tenant (empty: no X-Tenant header) with the token.
func (en *env) do(t testing.TB, tenant, method, path string, body any) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(js)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	return en.send(req)
}

func (en *env) send(req *http.Request) resp {
	rec := httptest.NewRecorder()
	en.h.ServeHTTP(rec, req)
	return resp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// requireProblem checks that r is a problem of status and code.
func requireProblem(t *testing.T, r resp, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	p := r.json(t)
	require.Equal(t, float64(status), p["status"])
	require.Equal(t, code, p["code"], "body: %s", r.body)
	require.Equal(t, http.StatusText(status), p["title"])
}

// trigger starts a run through the API and returns its ID.
func (en *env) trigger(t testing.TB, tenant, workflow string, body map[string]any) uuid.UUID {
	t.Helper()
	r := en.do(t, tenant, "POST", "/api/v1/workflows/"+workflow+"/runs", body)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	id, err := uuid.Parse(r.json(t)["run_id"].(string))
	require.NoError(t, err)
	require.Equal(t, "/api/v1/runs/"+id.String(), r.header.Get("Location"))
	return id
}

// settle waits for a run to settle.
func (en *env) settle(t testing.TB, id uuid.UUID) *durable.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := en.e.Wait(ctx, id)
	require.NoError(t, err)
	return res
}

func TestMainPathMemory(t *testing.T) {
	t.Parallel()
	testMainPath(t, newEnv(t, memstore.New()))
}

func TestMainPathPostgreSQL(t *testing.T) {
	t.Parallel()
	testMainPath(t, newEnv(t, pgtest.Store(t)))
}

func testMainPath(t *testing.T, en *env) {
	// Trigger, then the same idempotency key again: a duplicate.
	body := map[string]any{"tenant": "acme", "input": map[string]any{"name": "ada"}, "idempotency_key": "k-1", "priority": 2}
	id := en.trigger(t, "*", "greet", body)
	r := en.do(t, "*", "POST", "/api/v1/workflows/greet/runs", body)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, map[string]any{"run_id": id.String(), "duplicate": true}, r.json(t))
	require.Equal(t, durabletype.RunCompleted, en.settle(t, id).Status)

	// The run, its steps with their parents and outputs.
	r = en.do(t, "acme", "GET", "/api/v1/runs/"+id.String(), nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	var run struct {
		ID             uuid.UUID       `json:"id"`
		Workflow       string          `json:"workflow"`
		Tenant         string          `json:"tenant"`
		Status         string          `json:"status"`
		Input          json.RawMessage `json:"input"`
		IdempotencyKey string          `json:"idempotency_key"`
		Priority       int             `json:"priority"`
		FinishedAt     *time.Time      `json:"finished_at"`
		Steps          []struct {
			Name     string          `json:"name"`
			Kind     string          `json:"kind"`
			State    string          `json:"state"`
			Parents  []string        `json:"parents"`
			Attempts int             `json:"attempts"`
			Output   json.RawMessage `json:"output"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(r.body, &run))
	require.Equal(t, id, run.ID)
	require.Equal(t, "greet", run.Workflow)
	require.Equal(t, "acme", run.Tenant)
	require.Equal(t, "COMPLETED", run.Status)
	require.JSONEq(t, `{"name":"ada"}`, string(run.Input))
	require.Equal(t, "k-1", run.IdempotencyKey)
	require.Equal(t, 2, run.Priority)
	require.NotNil(t, run.FinishedAt)
	require.Len(t, run.Steps, 2)
	require.Equal(t, "hello", run.Steps[0].Name)
	require.Equal(t, "step", run.Steps[0].Kind)
	require.Empty(t, run.Steps[0].Parents)
	require.Equal(t, []string{"hello"}, run.Steps[1].Parents)
	require.Equal(t, "COMPLETED", run.Steps[1].State)
	require.Equal(t, 1, run.Steps[1].Attempts)
	require.JSONEq(t, `"HELLO ADA"`, string(run.Steps[1].Output))

	// Its events.
	r = en.do(t, "acme", "GET", "/api/v1/runs/"+id.String()+"/events", nil)
	require.Equal(t, http.StatusOK, r.status)
	evs := r.json(t)["events"].([]any)
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1].(map[string]any)
	require.Equal(t, "shout", last["step"])
	require.Equal(t, "COMPLETED", last["type"])

	// A listing with filters, and the next page by cursor.
	id2 := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "bob"}})
	en.settle(t, id2)
	r = en.do(t, "acme", "GET", "/api/v1/runs?status=completed&workflow=greet&limit=1", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	page := r.json(t)
	require.Len(t, page["runs"], 1)
	require.Equal(t, id2.String(), page["runs"].([]any)[0].(map[string]any)["id"])
	next := page["next_cursor"].(string)
	r = en.do(t, "acme", "GET", "/api/v1/runs?status=COMPLETED&workflow=greet&limit=1&cursor="+next, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, id.String(), r.json(t)["runs"].([]any)[0].(map[string]any)["id"])
	r = en.do(t, "acme", "GET", "/api/v1/runs?status=FAILED", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.json(t)["runs"])

	// Cancelling a settled run, replaying a completed one without a step:
	// conflicts; from a step: it runs again.
	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/runs/"+id.String()+"/cancel", map[string]any{"reason": "late"}), 409, "run_settled")
	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/runs/"+id.String()+"/replay", nil), 409, "nothing_to_replay")
	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/runs/"+id.String()+"/replay", map[string]any{"from_step": "nope"}), 400, "step_not_found")
	r = en.do(t, "acme", "POST", "/api/v1/runs/"+id.String()+"/replay", map[string]any{"from_step": "shout"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, durabletype.RunCompleted, en.settle(t, id).Status)

	// A failed run, replayed once fixed.
	fid := en.trigger(t, "acme", "flaky", map[string]any{"input": 4})
	require.Equal(t, durabletype.RunFailed, en.settle(t, fid).Status)
	r = en.do(t, "acme", "GET", "/api/v1/runs/"+fid.String(), nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `"error":{"step":"second","message":"\u003cb\u003ebroken\u003c/b\u003e"}`)
	en.fixed.Store(true)
	r = en.do(t, "acme", "POST", "/api/v1/runs/"+fid.String()+"/replay", "")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	res := en.settle(t, fid)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	second, _ := res.Step("second")
	require.Equal(t, "50", string(second.Output))
	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/runs/"+fid.String()+"/cancel", nil), 409, "run_settled")

	// Cancel a running run, with a reason; replaying a running one conflicts.
	sid := en.trigger(t, "acme", "slow", map[string]any{"input": 1})
	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/runs/"+sid.String()+"/replay", nil), 409, "run_not_settled")
	r = en.do(t, "acme", "POST", "/api/v1/runs/"+sid.String()+"/cancel", map[string]any{"reason": "not needed"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "CANCELLED", r.json(t)["status"])
	res = en.settle(t, sid)
	require.ErrorIs(t, res.Err, durable.ErrRunCancelled)

	// A signal and an event.
	aid := en.trigger(t, "acme", "approval", map[string]any{"input": "po-7"})
	r = en.do(t, "acme", "POST", "/api/v1/runs/"+aid.String()+"/signals", map[string]any{"name": "approve", "payload": "carol"})
	require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	res = en.settle(t, aid)
	rec, _ := res.Step("record")
	require.Equal(t, `"po-7 approved by carol"`, string(rec.Output))
	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/runs/"+aid.String()+"/signals", map[string]any{"name": "approve"}), 409, "run_settled")

	pid := en.trigger(t, "acme", "paid", map[string]any{"input": "o-9"})
	r = en.do(t, "acme", "POST", "/api/v1/events", map[string]any{"key": "paid-o-9", "payload": 120})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	res = en.settle(t, pid)
	ship, _ := res.Step("ship")
	require.Equal(t, "120", string(ship.Output))

	// Workflows and their DAGs.
	r = en.do(t, "acme", "GET", "/api/v1/workflows/approval", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var wf map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &wf))
	steps := `[{"name":"approved","kind":"event","parents":[],"output":"string","signal":"approve"},
		{"name":"record","kind":"step","parents":["approved"],"output":"string"}]`
	require.JSONEq(t, steps, string(wf["steps"]))
	require.JSONEq(t, `"approval"`, string(wf["name"]))
	require.JSONEq(t, `true`, string(wf["registered"]))
	require.JSONEq(t, `false`, string(wf["on_failure"]))
	var versions []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(wf["versions"], &versions))
	require.Len(t, versions, 1)
	require.JSONEq(t, string(wf["version"]), string(versions[0]["version"]))
	require.JSONEq(t, steps, string(versions[0]["steps"]))
	require.JSONEq(t, `true`, string(versions[0]["newest"]))
	require.JSONEq(t, `0`, string(versions[0]["in_flight"]), "its run has settled")
	require.JSONEq(t, `[`+strconv.Quote(en.e.WorkerID())+`]`, string(versions[0]["workers"]))
	r = en.do(t, "acme", "GET", "/api/v1/workflows", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Len(t, r.json(t)["workflows"], 5)
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/workflows/nope", nil), 404, "workflow_not_found")

	// Stats.
	r = en.do(t, "acme", "GET", "/api/v1/stats?window=24h", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Contains(t, string(r.body), `"workflow":"greet","tenant":"acme","status":"COMPLETED","settled":true`)

	// Probes.
	r = en.send(httptest.NewRequest("GET", "/healthz", nil))
	require.Equal(t, http.StatusOK, r.status)
	r = en.send(httptest.NewRequest("GET", "/readyz", nil))
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
}

// pgtestStore returns a pgstore on a fresh schema, or skips the test
// without DURABLE_TEST_DATABASE_URL.
func pgtestStore(t *testing.T) store.Store { return pgtest.Store(t) }
