package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
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
