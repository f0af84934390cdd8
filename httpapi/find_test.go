package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
)

// TestListRunsFindsByKeyAndInput: GET /api/v1/runs?idempotency_key= and
// ?input_contains= find runs by the caller's own keys, within the
// caller's tenant; a bad value is a 400 that names the parameter.
func TestListRunsFindsByKeyAndInput(t *testing.T) {
	en := newEnv(t, memstore.New())
	ada := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "ada"}, "idempotency_key": "order-1"})
	bob := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "bob"}, "idempotency_key": "order-2"})
	other := en.trigger(t, "globex", "greet", map[string]any{"input": map[string]any{"name": "ada"}, "idempotency_key": "order-1"})
	list := func(tenant, query string) []string {
		t.Helper()
		r := en.do(t, tenant, "GET", "/api/v1/runs?"+query, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var out []string
		for _, run := range r.json(t)["runs"].([]any) {
			out = append(out, run.(map[string]any)["id"].(string))
		}
		return out
	}
	require.Equal(t, []string{ada.String()}, list("acme", "idempotency_key=order-1"))
	require.Equal(t, []string{bob.String()}, list("acme", "idempotency_key=order-2&workflow=greet"))
	require.ElementsMatch(t, []string{ada.String(), other.String()}, list("*", "idempotency_key=order-1"))
	require.Empty(t, list("acme", "idempotency_key=order-3"))
	in := url.QueryEscape(`{"name":"ada"}`)
	require.Equal(t, []string{ada.String()}, list("acme", "input_contains="+in))
	require.Equal(t, []string{other.String()}, list("*", "input_contains="+in+"&tenant=globex"))
	require.ElementsMatch(t, []string{ada.String(), bob.String()}, list("acme", "input_contains="+url.QueryEscape(`{}`)))
	require.Empty(t, list("acme", "input_contains="+url.QueryEscape(`{"name":"ada"}`)+"&idempotency_key=order-2"))

	for _, q := range []string{
		"input_contains=" + url.QueryEscape(`{"name":`),
		"input_contains=" + url.QueryEscape(`{"name":"ada"} x`),
		"input_contains=" + url.QueryEscape(`"\u0000"`),
		"input_contains=" + strings.Repeat("1", 17<<10),
	} {
		requireProblem(t, en.do(t, "acme", "GET", "/api/v1/runs?"+q, nil), http.StatusBadRequest, "invalid_filter")
	}
	r := en.do(t, "acme", "GET", "/api/v1/runs?idempotency_key="+url.QueryEscape("bad\x01key"), nil)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Equal(t, "idempotency_key", r.json(t)["parameter"], "body: %s", r.body)
}

// TestDashboardFindsRuns: the runs list filters by idempotency key and by
// a JSON value of the input, from the page's address and from its fields.
func TestDashboardFindsRuns(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	ada := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "ada"}, "idempotency_key": "order-1"})
	bob := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "bob"}, "idempotency_key": "order-2"})
	row := func(id uuid.UUID) string { return fmt.Sprintf(`#runs tr[data-run="%s"]`, id) }
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/?idempotency_key=order-1"),
		chromedp.WaitVisible(row(ada)),
		chromedp.WaitNotPresent(row(bob)),
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(row(ada)),
		chromedp.WaitVisible(row(bob)),
		chromedp.SendKeys(`#f-input`, `{"name":"bob"}`+"\r"),
		chromedp.WaitNotPresent(row(ada)),
		chromedp.WaitVisible(row(bob)),
	))
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`))
	require.NoError(t, err)
	require.Equal(t, "#/?input_contains="+url.QueryEscape(`{"name":"bob"}`), loc)
}

// TestTriggerBatch: POST /api/v1/workflows/{name}/runs/batch starts many
// runs in one transaction, answering each trigger in order; a refused
// trigger is named (runs[i]) and nothing starts.
func TestTriggerBatch(t *testing.T) {
	en := newEnv(t, memstore.New())
	count := func() int {
		r := en.do(t, "acme", "GET", "/api/v1/runs?limit=1000", nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		return len(r.json(t)["runs"].([]any))
	}
	body := map[string]any{"runs": []map[string]any{
		{"input": map[string]any{"name": "ada"}, "idempotency_key": "b-1"},
		{"input": map[string]any{"name": "bob"}, "idempotency_key": "b-2", "priority": 2},
		{"input": map[string]any{"name": "cy"}},
	}}
	r := en.do(t, "acme", "POST", "/api/v1/workflows/greet/runs/batch", body)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var got struct {
		Runs []struct {
			RunID     uuid.UUID `json:"run_id"`
			Duplicate bool      `json:"duplicate"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(r.body, &got))
	require.Len(t, got.Runs, 3)
	for i, name := range []string{"ada", "bob", "cy"} {
		require.False(t, got.Runs[i].Duplicate)
		res, err := en.e.Get(context.Background(), got.Runs[i].RunID)
		require.NoError(t, err)
		require.Equal(t, "acme", res.Tenant)
		require.JSONEq(t, `{"name":"`+name+`"}`, string(res.Input))
	}
	require.Equal(t, 3, count())

	// The keyed ones again: duplicates, 200, nothing started.
	r = en.do(t, "acme", "POST", "/api/v1/workflows/greet/runs/batch", map[string]any{"runs": body["runs"].([]map[string]any)[:2]})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Contains(t, string(r.body), `{"run_id":"`+got.Runs[1].RunID.String()+`","duplicate":true}`)
	require.Equal(t, 3, count())

	for _, tc := range []struct {
		runs   []map[string]any
		status int
		code   string
		detail string
	}{
		{[]map[string]any{{"input": map[string]any{"name": "x"}}, {"input": map[string]any{"name": 7}}}, 422, "invalid_input", "runs[1]: "},
		{[]map[string]any{{"input": map[string]any{"name": "x"}}, {"input": map[string]any{"name": "y"}, "tenant": "globex"}}, 403, "forbidden_tenant", "runs[1]: "},
		{[]map[string]any{{"input": map[string]any{"name": "x"}, "idempotency_key": "a\x01"}}, 400, "invalid_trigger", "runs[0]: idempotency_key"},
		{[]map[string]any{{"input": map[string]any{"name": "x"}}, {"input": map[string]any{"name": "y"}, "start_after": "soon"}}, 400, "invalid_trigger", "runs[1]: start_after"},
		{[]map[string]any{}, 400, "invalid_trigger", "runs: want 1 to 1000 triggers, got 0"},
	} {
		r := en.do(t, "acme", "POST", "/api/v1/workflows/greet/runs/batch", map[string]any{"runs": tc.runs})
		requireProblem(t, r, tc.status, tc.code)
		require.True(t, strings.HasPrefix(r.json(t)["detail"].(string), tc.detail), "body: %s", r.body)
		require.Equal(t, 3, count(), "nothing started: %s", r.body)
	}
	r = en.do(t, "acme", "POST", "/api/v1/workflows/greet/runs/batch", map[string]any{"runs": []map[string]any{{"input": map[string]any{"name": "x"}, "idempotency_key": "a\x01"}}})
	require.Equal(t, "runs[0].idempotency_key", r.json(t)["parameter"])
	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/workflows/nope/runs/batch", map[string]any{"runs": []map[string]any{{"input": 1}}}), 404, "workflow_not_found")
}
