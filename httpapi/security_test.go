package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/pgstore"
)

func TestTenantIsolationMemory(t *testing.T) {
	t.Parallel()
	testTenantIsolation(t, newEnv(t, memstore.New()))
}

func TestTenantIsolationPostgreSQL(t *testing.T) {
	t.Parallel()
	testTenantIsolation(t, newEnv(t, pgtestStore(t)))
}

// testTenantIsolation: tenant a can neither read, list, cancel, replay,
// signal nor trigger into tenant b's runs; b's are not found, as if they
// did not exist.
func testTenantIsolation(t *testing.T, en *env) {
	aDone := en.trigger(t, "a", "greet", map[string]any{"input": map[string]any{"name": "a"}})
	bDone := en.trigger(t, "b", "greet", map[string]any{"input": map[string]any{"name": "b"}})
	bDone2 := en.trigger(t, "b", "greet", map[string]any{"input": map[string]any{"name": "b2"}})
	bFailed := en.trigger(t, "b", "flaky", map[string]any{"input": 1})
	bWaiting := en.trigger(t, "b", "approval", map[string]any{"input": "x"})
	for _, id := range []uuid.UUID{aDone, bDone, bDone2, bFailed} {
		en.settle(t, id)
	}

	// Listing: none of b's, whatever the filter.
	for _, q := range []string{"", "?tenant=b", "?tenant=a", "?workflow=approval", "?status=FAILED,RUNNING", "?parent=" + bDone.String()} {
		r := en.do(t, "a", "GET", "/api/v1/runs"+q, nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", q, r.body)
		for _, b := range []uuid.UUID{bDone, bDone2, bFailed, bWaiting} {
			require.NotContains(t, string(r.body), b.String(), q)
		}
	}
	r := en.do(t, "a", "GET", "/api/v1/runs", nil)
	require.Len(t, r.json(t)["runs"], 1)
	// The operator (every tenant) sees them all.
	r = en.do(t, "*", "GET", "/api/v1/runs", nil)
	require.Len(t, r.json(t)["runs"], 5)

	// Reads and actions on b's runs: not found, and nothing changed.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/runs/" + bDone.String(), ""},
		{"GET", "/api/v1/runs/" + bDone.String() + "/events", ""},
		{"POST", "/api/v1/runs/" + bWaiting.String() + "/cancel", `{"reason":"mine now"}`},
		{"POST", "/api/v1/runs/" + bFailed.String() + "/replay", `{}`},
		{"POST", "/api/v1/runs/" + bDone.String() + "/replay", `{"from_step":"hello"}`},
		{"POST", "/api/v1/runs/" + bWaiting.String() + "/signals", `{"name":"approve","payload":"mallory"}`},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		requireProblem(t, en.do(t, "a", c.method, c.path, body), http.StatusNotFound, "run_not_found")
	}
	// The step begins waiting once its claim is recorded, which may be
	// after the requests above; none of them may end the wait or the run.
	require.Eventually(t, func() bool {
		res, err := en.e.Get(t.Context(), bWaiting)
		if err != nil || res.Status != durabletype.RunRunning {
			return true // checked below
		}
		approved, _ := res.Step("approved")
		return approved.State != durabletype.TaskQueued && approved.State != durabletype.TaskRunning
	}, 20*time.Second, 5*time.Millisecond)
	res, err := en.e.Get(t.Context(), bWaiting)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunRunning, res.Status)
	approved, _ := res.Step("approved")
	require.Equal(t, durabletype.TaskWaiting, approved.State)
	res, err = en.e.Get(t.Context(), bFailed)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunFailed, res.Status)

	// An unknown run answers the same as b's.
	unknown := en.do(t, "a", "GET", "/api/v1/runs/"+uuid.NewString(), nil)
	theirs := en.do(t, "a", "GET", "/api/v1/runs/"+bDone.String(), nil)
	require.Equal(t, unknown.body, theirs.body)

	// Triggering into b, or sending b an event: forbidden; naming no
	// tenant acts for a.
	requireProblem(t, en.do(t, "a", "POST", "/api/v1/workflows/greet/runs",
		map[string]any{"tenant": "b", "input": map[string]any{"name": "x"}}), http.StatusForbidden, "forbidden_tenant")
	requireProblem(t, en.do(t, "a", "POST", "/api/v1/events",
		map[string]any{"tenant": "b", "key": "paid-o-1"}), http.StatusForbidden, "forbidden_tenant")
	mine := en.trigger(t, "a", "greet", map[string]any{"input": map[string]any{"name": "x"}})
	require.Equal(t, "a", en.settle(t, mine).Tenant)
	// A run ID of b's, reused by a: a conflict that says nothing of b's run.
	r = en.do(t, "a", "POST", "/api/v1/workflows/greet/runs", map[string]any{"run_id": bDone.String(), "input": map[string]any{"name": "x"}})
	requireProblem(t, r, http.StatusConflict, "run_exists")
	require.NotContains(t, string(r.body), "b2")

	// b's cursor is refused in a's scope.
	r = en.do(t, "b", "GET", "/api/v1/runs?limit=1", nil)
	require.Equal(t, http.StatusOK, r.status)
	cursor := r.json(t)["next_cursor"].(string)
	require.NotEmpty(t, cursor)
	requireProblem(t, en.do(t, "a", "GET", "/api/v1/runs?limit=1&cursor="+cursor, nil), http.StatusBadRequest, "invalid_cursor")

	// Stats: only a's.
	r = en.do(t, "a", "GET", "/api/v1/stats", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, string(r.body), `"tenant":"b"`)
	require.Contains(t, string(r.body), `"tenant":"a"`)

	// A request the Tenant function refuses: forbidden.
	requireProblem(t, en.do(t, "", "GET", "/api/v1/runs", nil), http.StatusForbidden, "forbidden")
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "bearer " + token, "Basic " + token, "Bearer " + token + "x"} {
		req := httptest.NewRequest("GET", "/api/v1/runs", nil)
		req.Header.Set("X-Tenant", "*")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		r := en.send(req)
		requireProblem(t, r, http.StatusUnauthorized, "unauthenticated")
		require.Equal(t, `Bearer realm="durable"`, r.header.Get("WWW-Authenticate"))
	}
	// The probes need no credentials.
	require.Equal(t, http.StatusOK, en.send(httptest.NewRequest("GET", "/healthz", nil)).status)
	require.Equal(t, http.StatusOK, en.send(httptest.NewRequest("GET", "/readyz", nil)).status)
	// An empty token accepts nothing.
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer ")
	require.Error(t, httpapi.BearerToken("")(req))
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	id := en.trigger(t, "a", "greet", map[string]any{"input": map[string]any{"name": "a"}})
	en.settle(t, id)
	run := "/api/v1/runs/" + id.String()
	trig := "/api/v1/workflows/greet/runs"

	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"bad uuid", "GET", "/api/v1/runs/not-a-uuid", nil, 400, "invalid_id"},
		{"uuid without dashes", "GET", "/api/v1/runs/" + strings.ReplaceAll(id.String(), "-", ""), nil, 400, "invalid_id"},
		{"NUL in id", "GET", "/api/v1/runs/%00", nil, 400, "invalid_id"},
		{"bad status", "GET", "/api/v1/runs?status=DONE", nil, 400, "invalid_filter"},
		{"unknown parameter", "GET", "/api/v1/runs?stauts=FAILED", nil, 400, "invalid_filter"},
		{"bad time", "GET", "/api/v1/runs?created_after=yesterday", nil, 400, "invalid_filter"},
		{"backwards range", "GET", "/api/v1/runs?created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z", nil, 400, "invalid_filter"},
		{"negative limit", "GET", "/api/v1/runs?limit=-1", nil, 400, "invalid_filter"},
		{"zero limit", "GET", "/api/v1/runs?limit=0", nil, 400, "invalid_filter"},
		{"huge limit", "GET", "/api/v1/runs?limit=1001", nil, 400, "invalid_filter"},
		{"overflowing limit", "GET", "/api/v1/runs?limit=99999999999999999999999", nil, 400, "invalid_filter"},
		{"bogus cursor", "GET", "/api/v1/runs?cursor=bogus", nil, 400, "invalid_cursor"},
		{"cursor of another filter", "GET", "/api/v1/runs?cursor=eyJjIjoxLCJpIjoiMDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAwIiwiZiI6IngifQ", nil, 400, "invalid_cursor"},
		{"bad parent", "GET", "/api/v1/runs?parent=x", nil, 400, "invalid_id"},
		{"bad window", "GET", "/api/v1/stats?window=-1h", nil, 400, "invalid_filter"},
		{"malformed JSON", "POST", trig, `{"input":`, 400, "bad_body"},
		{"not an object", "POST", trig, `[1,2]`, 400, "bad_body"},
		{"unknown field", "POST", trig, `{"inptu":{"name":"x"}}`, 400, "bad_body"},
		{"trailing data", "POST", trig, `{"input":{"name":"x"}} {}`, 400, "bad_body"},
		{"invalid UTF-8", "POST", trig, []byte("{\"input\":{\"name\":\"\xff\xfe\"}}"), 400, "bad_body"},
		{"NUL tenant", "POST", trig, `{"tenant":"a\u0000b","input":{"name":"x"}}`, 400, "invalid_tenant"},
		{"another tenant", "POST", trig, `{"tenant":"b","input":{"name":"x"}}`, 403, "forbidden_tenant"},
		{"input of the wrong type", "POST", trig, `{"input":{"name":42}}`, 422, "invalid_input"},
		{"input not an object", "POST", trig, `{"input":"ada"}`, 422, "invalid_input"},
		{"unknown workflow", "POST", "/api/v1/workflows/nope/runs", `{"input":{}}`, 404, "workflow_not_found"},
		{"bad priority", "POST", trig, `{"priority":99}`, 400, "invalid_trigger"},
		{"bad duration", "POST", trig, `{"start_after":"soon"}`, 400, "invalid_trigger"},
		{"negative delay", "POST", trig, `{"start_after":"-1h"}`, 400, "invalid_trigger"},
		{"bad idempotency key", "POST", trig, `{"idempotency_key":"a\u0000b"}`, 400, "invalid_trigger"},
		{"bad run id", "POST", trig, `{"run_id":"nope"}`, 400, "invalid_id"},
		{"empty signal body", "POST", run + "/signals", "", 400, "bad_body"},
		{"bad signal name", "POST", run + "/signals", `{"name":""}`, 400, "invalid_event"},
		{"empty event body", "POST", "/api/v1/events", "", 400, "bad_body"},
		{"bad event key", "POST", "/api/v1/events", `{"key":""}`, 400, "invalid_event"},
		{"long reason", "POST", run + "/cancel", `{"reason":"` + strings.Repeat("x", 1001) + `"}`, 400, "invalid_text"},
		{"body over the limit", "POST", trig, `{"input":{"name":"` + strings.Repeat("x", 1<<20) + `"}}`, 413, "body_too_large"},
		{"wrong method", "DELETE", run, nil, 405, "method_not_allowed"},
		{"wrong method on a collection", "PUT", "/api/v1/runs", nil, 405, "method_not_allowed"},
		{"unknown path", "GET", "/api/v1/nope", nil, 404, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := en.do(t, "a", c.method, c.path, c.body)
			requireProblem(t, r, c.status, c.code)
			if c.status == 405 {
				require.NotEmpty(t, r.header.Get("Allow"))
			}
		})
	}

	// A form post is refused for its media type.
	req := httptest.NewRequest("POST", trig, strings.NewReader(`{"input":{"name":"x"}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Tenant", "a")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	requireProblem(t, en.send(req), http.StatusUnsupportedMediaType, "unsupported_media_type")

	// A cross-origin browser request is refused.
	req = httptest.NewRequest("POST", run+"/cancel", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Tenant", "a")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	requireProblem(t, en.send(req), http.StatusForbidden, "cross_origin")

	// Nothing is reflected unescaped.
	r := en.do(t, "a", "POST", "/api/v1/workflows/%3Cscript%3Ealert(1)%3C%2Fscript%3E/runs", `{"input":{}}`)
	requireProblem(t, r, 400, "invalid_name")
	require.NotContains(t, string(r.body), "<script>")
	r = en.do(t, "a", "POST", trig, `{"<img src=x>":1}`)
	requireProblem(t, r, 400, "bad_body")
	require.NotContains(t, string(r.body), "<img")

	// An empty trigger body is a null input: a zero Greeting.
	r = en.do(t, "a", "POST", trig, "")
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
}

// TestDefaultBodyLimit: without MaxBodyBytes, bodies over 1 MiB answer 413.
func TestDefaultBodyLimit(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	h := httpapi.New(en.e, httpapi.Options{Logger: quiet})
	send := func(n int) *httptest.ResponseRecorder {
		body := `{"tenant":"a","input":{"name":"` + strings.Repeat("x", n) + `"}}`
		req := httptest.NewRequest("POST", "/api/v1/workflows/greet/runs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	overhead := len(`{"tenant":"a","input":{"name":""}}`)
	require.Equal(t, http.StatusCreated, send(httpapi.DefaultMaxBodyBytes-overhead).Code)
	rec := send(httpapi.DefaultMaxBodyBytes - overhead + 1)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
}

// TestNotReady: /readyz answers 503 while the schema is not migrated, and
// says nothing of the database's error.
func TestNotReady(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: pgtest.EmptySchema(t, pool)})
	require.NoError(t, err)
	e, err := durable.New(s, durable.Config{Logger: quiet})
	require.NoError(t, err)
	h := httpapi.New(e, httpapi.Options{Logger: quiet, Authenticate: httpapi.BearerToken(token)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"code":"not_ready"`)
	require.NotContains(t, rec.Body.String(), "pgstore")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
}
