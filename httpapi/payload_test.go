package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
)

// waitingStep waits until step of run id waits.
func (en *env) waitingStep(t *testing.T, id uuid.UUID, step string) {
	t.Helper()
	require.Eventually(t, func() bool {
		res, err := en.e.Get(context.Background(), id)
		require.NoError(t, err)
		s, ok := res.Step(step)
		return ok && s.State == durabletype.TaskWaiting
	}, 20*time.Second, 10*time.Millisecond)
}

// A payload that a waiting step cannot read as its type: 422
// payload_refused, naming the run, the step and the shape expected; the
// step keeps waiting.
func TestPayloadRefused(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	pid := en.trigger(t, "acme", "paid", map[string]any{"input": "o-1"})
	en.waitingStep(t, pid, "payment")
	r := en.do(t, "acme", "POST", "/api/v1/events", map[string]any{"key": "paid-o-1", "payload": "120 EUR"})
	requireProblem(t, r, http.StatusUnprocessableEntity, "payload_refused")
	p := r.json(t)
	require.Equal(t, float64(0), p["delivered"])
	refused := p["refused"].([]any)
	require.Len(t, refused, 1)
	rf := refused[0].(map[string]any)
	require.Equal(t, pid.String(), rf["run_id"])
	require.Equal(t, "payment", rf["step"])
	require.Equal(t, "at the top: a string, expected an integer (64 bits)", rf["reason"])
	require.Equal(t, map[string]any{"type": "integer", "bits": float64(64)}, rf["expected"])
	require.Contains(t, p["detail"], `step "payment" refused the payload`)
	en.waitingStep(t, pid, "payment")

	r = en.do(t, "acme", "POST", "/api/v1/events", map[string]any{"key": "paid-o-1", "payload": 120})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, float64(1), r.json(t)["delivered"])
	require.Equal(t, durabletype.RunCompleted, en.settle(t, pid).Status)

	aid := en.trigger(t, "acme", "approval", map[string]any{"input": "po-7"})
	en.waitingStep(t, aid, "approved")
	r = en.do(t, "acme", "POST", "/api/v1/runs/"+aid.String()+"/signals", map[string]any{"name": "approve", "payload": 5})
	requireProblem(t, r, http.StatusUnprocessableEntity, "payload_refused")
	require.Equal(t, "approved", r.json(t)["refused"].([]any)[0].(map[string]any)["step"])
	r = en.do(t, "acme", "POST", "/api/v1/runs/"+aid.String()+"/signals", map[string]any{"name": "approve", "payload": "carol"})
	require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	require.Equal(t, durabletype.RunCompleted, en.settle(t, aid).Status)
}

// Sizes: a payload over the engine's limit answers 413 payload_too_large;
// a run's answer leaves out values over Options.MaxValueBytes (their size
// said), unless ?full=true.
func TestPayloadSizes(t *testing.T) {
	t.Parallel()
	wf := durable.NewWorkflow[string]("big")
	grow := durable.Step(wf, "grow", func(ctx durable.Context, in string) (string, error) {
		return strings.Repeat(in, 100), nil
	})
	// After grow: once gate waits, grow's output is there to read.
	durable.WaitForSignal[string](wf, "gate", "go", durable.After(grow))
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet, MaxInputSize: 1000, MaxEventSize: 100})
	require.NoError(t, err)
	require.NoError(t, e.Register(wf))
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })
	en := &env{e: e, h: httpapi.New(e, httpapi.Options{Logger: quiet, MaxValueBytes: 500})}

	requireProblem(t, en.do(t, "", "POST", "/api/v1/workflows/big/runs", map[string]any{"tenant": "t", "input": strings.Repeat("x", 1000)}),
		http.StatusRequestEntityTooLarge, "payload_too_large")
	requireProblem(t, en.do(t, "", "POST", "/api/v1/events", map[string]any{"tenant": "t", "key": "k", "payload": strings.Repeat("x", 100)}),
		http.StatusRequestEntityTooLarge, "payload_too_large")

	id := en.trigger(t, "", "big", map[string]any{"tenant": "t", "input": strings.Repeat("y", 10)})
	en.waitingStep(t, id, "gate")
	requireProblem(t, en.do(t, "", "POST", "/api/v1/runs/"+id.String()+"/signals", map[string]any{"name": "go", "payload": strings.Repeat("x", 100)}),
		http.StatusRequestEntityTooLarge, "payload_too_large")
	r := en.do(t, "", "GET", "/api/v1/runs/"+id.String(), nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var run struct {
		Input json.RawMessage `json:"input"`
		Steps []struct {
			Name          string          `json:"name"`
			Output        json.RawMessage `json:"output"`
			OutputOmitted int             `json:"output_omitted"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(r.body, &run))
	require.Equal(t, `"yyyyyyyyyy"`, string(run.Input))
	require.Equal(t, "grow", run.Steps[0].Name)
	require.Empty(t, run.Steps[0].Output)
	require.Equal(t, 1002, run.Steps[0].OutputOmitted)
	r = en.do(t, "", "GET", "/api/v1/runs/"+id.String()+"?full=true", nil)
	run.Steps = nil
	require.NoError(t, json.Unmarshal(r.body, &run))
	require.Len(t, run.Steps[0].Output, 1002)
	require.Zero(t, run.Steps[0].OutputOmitted)
}
