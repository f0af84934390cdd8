package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

// TestMapInputShownAsMap: a map step over the run's input (MapInput) is a
// map step to the API: a root step of kind "map" with its items in a run's
// detail, and no "map_over" in its workflow's DAG.
func TestMapInputShownAsMap(t *testing.T) {
	t.Parallel()
	wf := durable.NewWorkflow[[]int]("doubler")
	doubled := durable.MapInput(wf, "double", func(in []int) []int { return in },
		func(_ durable.Context, x int) (int, error) { return 2 * x, nil })
	durable.Step(wf, "sum", func(ctx durable.Context, _ []int) (int, error) {
		d, _ := doubled.Output(ctx)
		n := 0
		for _, v := range d {
			n += v
		}
		return n, nil
	}, durable.After(doubled))
	en := newEngineEnv(t, memstore.New(), wf)

	id := en.trigger(t, "acme", "doubler", map[string]any{"input": []int{1, 2, 3}})
	en.settle(t, id)
	r := en.do(t, "acme", "GET", "/api/v1/runs/"+id.String(), nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var run struct {
		Status string `json:"status"`
		Steps  []struct {
			Name       string         `json:"name"`
			Kind       string         `json:"kind"`
			Parents    []string       `json:"parents"`
			Output     any            `json:"output"`
			ItemCounts map[string]int `json:"item_counts"`
			Items      []struct {
				Item   int `json:"item"`
				Output any `json:"output"`
			} `json:"items"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(r.body, &run))
	require.Equal(t, "COMPLETED", run.Status)
	require.Len(t, run.Steps, 2)
	m := run.Steps[0]
	require.Equal(t, "double", m.Name)
	require.Equal(t, "map", m.Kind)
	require.Empty(t, m.Parents)
	require.Equal(t, map[string]int{"COMPLETED": 3}, m.ItemCounts)
	require.Len(t, m.Items, 3)
	require.Equal(t, 2, m.Items[2].Item)
	require.Equal(t, float64(6), m.Items[2].Output)
	require.Equal(t, []any{2.0, 4.0, 6.0}, m.Output, "a completed map step's output: the list sum reads")
	require.Equal(t, float64(12), run.Steps[1].Output)

	r = en.do(t, "acme", "GET", "/api/v1/workflows/doubler", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var wfDoc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &wfDoc))
	require.JSONEq(t, `[{"name":"double","kind":"map","parents":[],"output":"[]int"},
		{"name":"sum","kind":"step","parents":["double"],"output":"int"}]`, string(wfDoc["steps"]))
}
