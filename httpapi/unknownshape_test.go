package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// TestUnknownShape: a run recorded by a newer release, with a shape this
// engine cannot read, is a typed 409 (unknown_shape) of the API, never a
// 500; the other runs are served as usual.
func TestUnknownShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	newer, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	retry := durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}
	nr := store.NewRun{ID: uuid.New(), Workflow: "future", Tenant: "t", Input: []byte(`{}`),
		Shape: &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "x", Retry: retry}}}}
	_, err = newer.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{nr}})
	require.NoError(t, err)
	shapes, runs := pgx.Identifier{schema, "shapes"}.Sanitize(), pgx.Identifier{schema, "runs"}.Sanitize()
	_, err = pool.Exec(ctx, "UPDATE "+shapes+` SET shape = jsonb_set(shape, '{steps,0,future}', '{}')
		WHERE id = (SELECT shape_id FROM `+runs+" WHERE id = $1)", nr.ID)
	require.NoError(t, err)

	older, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	en := newEnv(t, older)
	requireProblem(t, en.do(t, "t", "GET", "/api/v1/runs/"+nr.ID.String(), nil), http.StatusConflict, "unknown_shape")
	requireProblem(t, en.do(t, "t", "POST", "/api/v1/runs/"+nr.ID.String()+"/cancel", map[string]any{}), http.StatusConflict, "unknown_shape")
	requireProblem(t, en.do(t, "other", "GET", "/api/v1/runs/"+nr.ID.String(), nil), http.StatusNotFound, "run_not_found")
	r := en.do(t, "t", "GET", "/api/v1/runs", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Contains(t, string(r.body), nr.ID.String())

	id := en.trigger(t, "t", "greet", map[string]any{"input": map[string]any{"name": "x"}})
	require.Equal(t, http.StatusOK, en.do(t, "t", "GET", "/api/v1/runs/"+id.String(), nil).status)
}
