package durablejson_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
)

// TestValue: JSON as it is, anything else in base64, a value over the
// limit left out with its size; nothing for no value.
func TestValue(t *testing.T) {
	t.Parallel()
	js, b64, omitted := durablejson.Value([]byte(`{"a":1}`), 100)
	require.Equal(t, json.RawMessage(`{"a":1}`), js)
	require.Empty(t, b64)
	require.Zero(t, omitted)
	js, b64, _ = durablejson.Value([]byte("\x00raw"), -1)
	require.Nil(t, js)
	require.Equal(t, "AHJhdw==", b64)
	js, b64, omitted = durablejson.Value([]byte(`"long"`), 3)
	require.Nil(t, js)
	require.Empty(t, b64)
	require.Equal(t, 6, omitted)
	js, b64, omitted = durablejson.Value(nil, -1)
	require.Nil(t, js)
	require.Empty(t, b64)
	require.Zero(t, omitted)
}

// TestNewRunDetail: a run without error has a null error and no children
// as an empty list; a map step's items are counted and numbered; a due
// time is shown only while a step waits.
func TestNewRunDetail(t *testing.T) {
	t.Parallel()
	res := &durable.RunResult{ID: uuid.New(), Workflow: "w", Tenant: "t", Status: durabletype.RunRunning, Input: []byte("1"),
		Steps: []durable.StepResult{
			{Name: "m", Kind: durabletype.KindMap, State: durabletype.TaskWaiting, Items: []durable.StepResult{
				{Name: "m[0]", Kind: durabletype.KindItem, State: durabletype.TaskCompleted, Output: []byte("2")},
				{Name: "m[1]", Kind: durabletype.KindItem, State: durabletype.TaskQueued, Item: 1},
			}},
			{Name: "done", State: durabletype.TaskCompleted, Parents: []string{"m"}, DueAt: time.Unix(1e9, 0)},
		}}
	b, err := json.Marshal(durablejson.NewRunDetail(&durablejson.RunData{Run: res}, -1))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got["error"])
	require.Contains(t, got, "error")
	require.Equal(t, []any{}, got["children"])
	steps := got["steps"].([]any)
	m := steps[0].(map[string]any)
	require.Equal(t, map[string]any{"COMPLETED": 1.0, "QUEUED": 1.0}, m["item_counts"])
	items := m["items"].([]any)
	require.Equal(t, 1.0, items[1].(map[string]any)["item"])
	require.Equal(t, 2.0, items[0].(map[string]any)["output"])
	done := steps[1].(map[string]any)
	require.Equal(t, "step", done["kind"], "a step of no kind is a step")
	require.Nil(t, done["due_at"], "a completed step waits for nothing")
	require.NotContains(t, done, "items")
	require.NotContains(t, done, "retired")
	require.NotContains(t, m, "output", "a map step not completed has no list yet")
}

// TestNewRunDetailMapOutput: a completed map step's output is the list
// its children read, its items' outputs in item order; left out when an
// item's output is not JSON, and over the size limit like any output.
func TestNewRunDetailMapOutput(t *testing.T) {
	t.Parallel()
	mapStep := func(outs ...string) *durable.RunResult {
		m := durable.StepResult{Name: "m", Kind: durabletype.KindMap, State: durabletype.TaskCompleted, Items: []durable.StepResult{}}
		for k, o := range outs {
			m.Items = append(m.Items, durable.StepResult{Name: "m", Kind: durabletype.KindItem, State: durabletype.TaskCompleted, Item: k, Output: []byte(o)})
		}
		return &durable.RunResult{ID: uuid.New(), Workflow: "w", Tenant: "t", Status: durabletype.RunCompleted, Steps: []durable.StepResult{m}}
	}
	step := func(res *durable.RunResult, max int) durablejson.Step {
		return durablejson.NewRunDetail(&durablejson.RunData{Run: res}, max).Steps[0]
	}
	require.JSONEq(t, `[{"a":1},"b",3]`, string(step(mapStep(`{"a":1}`, `"b"`, `3`), -1).Output))
	require.JSONEq(t, `[]`, string(step(mapStep(), -1).Output), "no items: an empty list")
	got := step(mapStep("\x00\x01", `2`), -1)
	require.Nil(t, got.Output, "not JSON: no list")
	require.Empty(t, got.OutputBase64)
	got = step(mapStep(`"aaaa"`, `"bbbb"`), 8)
	require.Nil(t, got.Output)
	require.Equal(t, len(`["aaaa","bbbb"]`), got.OutputOmitted)
}

// TestNewRunDetailFunction: a function's run has kind "function", its
// body as its one step and its calls by number (10 after 2), each with its
// name and number apart, a patch marker of kind "patch", a due time only
// while the call waits; a DAG's run has no calls.
func TestNewRunDetailFunction(t *testing.T) {
	t.Parallel()
	due := time.Unix(2e9, 0)
	res := &durable.RunResult{ID: uuid.New(), Workflow: "f", Status: durabletype.RunRunning, Steps: []durable.StepResult{
		{Name: "main", Kind: durabletype.KindFunc, State: durabletype.TaskSleeping, DueAt: due},
		{Name: "charge#0", Kind: durabletype.KindStep, State: durabletype.TaskCompleted, Output: []byte(`"ch"`), Attempts: 2},
		{Name: "new-path#10", Kind: durabletype.KindStep, State: durabletype.TaskCompleted, Patch: true, Item: 10},
		{Name: "nap#2", Kind: durabletype.KindSleep, State: durabletype.TaskSleeping, DueAt: due, Item: 2},
		{Name: "paid#1", Kind: durabletype.KindEvent, State: durabletype.TaskCompleted, EventKey: "paid:o1", DueAt: due, Item: 1},
	}}
	d := durablejson.NewRunDetail(&durablejson.RunData{Run: res}, -1)
	require.Equal(t, durablejson.KindFunction, d.Kind)
	require.Len(t, d.Steps, 1)
	require.Equal(t, "main", d.Steps[0].Name)
	var got []string
	for _, c := range d.Calls {
		got = append(got, fmt.Sprintf("%d %s %s", c.Number, c.Name, c.Kind))
	}
	require.Equal(t, []string{"0 charge step", "1 paid event", "2 nap sleep", "10 new-path patch"}, got)
	require.Equal(t, "paid:o1", d.Calls[1].EventKey)
	require.Nil(t, d.Calls[1].DueAt, "a wait over waits for nothing")
	require.Equal(t, due.UTC(), *d.Calls[2].DueAt)
	require.Equal(t, 2, d.Calls[0].Attempts)

	dagRun := &durable.RunResult{ID: uuid.New(), Workflow: "w", Steps: []durable.StepResult{{Name: "a#1", State: durabletype.TaskCompleted, Item: 1}}}
	d = durablejson.NewRunDetail(&durablejson.RunData{Run: dagRun}, -1)
	require.Equal(t, durablejson.KindWorkflow, d.Kind)
	require.Nil(t, d.Calls)
	b, err := json.Marshal(d)
	require.NoError(t, err)
	require.NotContains(t, string(b), `"calls"`)
}
