package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/memstore"
)

// TestRunIncludeEvents: GET /api/v1/runs/{id}?include=events adds the
// event log that /events lists; without it, a run has no "events"; any
// other include is a 400.
func TestRunIncludeEvents(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	id := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "ada"}})
	en.settle(t, id)
	path := "/api/v1/runs/" + id.String()

	plain := en.do(t, "acme", "GET", path, nil)
	require.Equal(t, http.StatusOK, plain.status, "body: %s", plain.body)
	require.NotContains(t, plain.json(t), "events")
	require.Nil(t, plain.json(t)["error"], "no error: null")

	with := en.do(t, "acme", "GET", path+"?include=events", nil)
	require.Equal(t, http.StatusOK, with.status, "body: %s", with.body)
	log := en.do(t, "acme", "GET", path+"/events", nil)
	require.Equal(t, http.StatusOK, log.status, "body: %s", log.body)
	require.NotEmpty(t, log.json(t)["events"])
	require.Equal(t, log.json(t)["events"], with.json(t)["events"])

	requireProblem(t, en.do(t, "acme", "GET", path+"?include=steps", nil), http.StatusBadRequest, "invalid_filter")
}
