package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
)

// TestTriggerUnknownWorkflow: triggering a workflow the server's engine
// does not register is a 404 whose detail names the workflows it can
// start (before, it said only that the workflow was not registered).
func TestTriggerUnknownWorkflow(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	r := en.do(t, "acme", "POST", "/api/v1/workflows/user-signup/runs", map[string]any{"input": map[string]any{}})
	requireProblem(t, r, 404, "workflow_not_found")
	require.Equal(t, `no workflow "user-signup" here: this server can start "approval", "flaky", "greet", "paid", "slow"`,
		r.json(t)["detail"])
}

// TestTriggerWarnsOfStaleVersion: a server whose engine does not serve
// the workflow (it only starts runs) and whose definition is not the live
// workers' version says so in the trigger's response, once for a batch;
// the run still starts. Triggered where the workers' version is
// registered, no warning.
func TestTriggerWarnsOfStaleVersion(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	workers := newEngineEnv(t, s, shipDef("3", "pack", "weigh"))
	c, err := durable.New(s, durable.Config{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, c.Register(shipDef("2", "pack", "label")))
	stale := &env{e: c, h: httpapi.New(c, httpapi.Options{Logger: quiet, Authenticate: httpapi.BearerToken(token),
		Tenant: func(r *http.Request) (string, bool, error) { return r.Header.Get("X-Tenant"), false, nil }})}

	r := stale.do(t, "acme", "POST", "/api/v1/workflows/ship/runs", map[string]any{"input": "a"})
	require.Equal(t, http.StatusCreated, r.status, r.body)
	js := r.json(t)
	require.NotEmpty(t, js["run_id"])
	require.Contains(t, js["warning"], `no live worker serves version "2" of workflow "ship"`)
	require.Contains(t, js["warning"], `live workers serve "3"`)

	r = stale.do(t, "acme", "POST", "/api/v1/workflows/ship/runs/batch",
		map[string]any{"runs": []map[string]any{{"input": "b"}, {"input": "c"}}})
	require.Equal(t, http.StatusCreated, r.status, r.body)
	var batch struct {
		Runs    []map[string]any `json:"runs"`
		Warning string           `json:"warning"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &batch))
	require.Len(t, batch.Runs, 2)
	require.NotContains(t, batch.Runs[0], "warning", "once, on the batch")
	require.Contains(t, batch.Warning, `version "2"`)

	r = workers.do(t, "acme", "POST", "/api/v1/workflows/ship/runs", map[string]any{"input": "d"})
	require.Equal(t, http.StatusCreated, r.status, r.body)
	require.NotContains(t, r.json(t), "warning")
}

// TestTriggerUnknownFields: an input with a field the workflow's input
// type does not have (a misspelling) is refused with 422 and starts
// nothing, alone or in a batch; "allow_unknown_fields": true (a client
// newer than this server's definition) starts it, the field kept in the
// recorded input.
func TestTriggerUnknownFields(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	in := map[string]any{"name": "ada", "nmae": "typo"}
	r := en.do(t, "acme", "POST", "/api/v1/workflows/greet/runs", map[string]any{"input": in})
	require.Equal(t, http.StatusUnprocessableEntity, r.status, r.body)
	require.Contains(t, string(r.body), "nmae")
	r = en.do(t, "acme", "POST", "/api/v1/workflows/greet/runs/batch",
		map[string]any{"runs": []map[string]any{{"input": map[string]any{"name": "bo"}}, {"input": in}}})
	require.Equal(t, http.StatusUnprocessableEntity, r.status, r.body)
	require.Contains(t, string(r.body), "runs[1]")

	r = en.do(t, "acme", "POST", "/api/v1/workflows/greet/runs", map[string]any{"input": in, "allow_unknown_fields": true})
	require.Equal(t, http.StatusCreated, r.status, r.body)
	id := r.json(t)["run_id"].(string)
	r = en.do(t, "acme", "GET", "/api/v1/runs/"+id, nil)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, string(r.body), `"nmae":"typo"`)
	r = en.do(t, "acme", "POST", "/api/v1/workflows/greet/runs/batch",
		map[string]any{"runs": []map[string]any{{"input": in, "allow_unknown_fields": true}}})
	require.Equal(t, http.StatusCreated, r.status, r.body)
}
