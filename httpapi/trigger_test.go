package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/require"

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
