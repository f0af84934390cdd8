package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// TestWaits: Engine.Waits says, in one read, what the steps of many runs
// wait for, as their results do; TenantRuns.Waits only for the tenant's
// runs; a store that cannot list waits says so.
func TestWaits(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		napper := durable.NewWorkflow[int]("napper")
		durable.Sleep(napper, "nap", time.Hour)
		gate := durable.NewWorkflow[int]("gate")
		durable.WaitForSignal[string](gate, "ok", "go")
		e := h.start(durable.Config{}, napper, gate)
		ctx := h.ctx(time.Minute)
		start := func(wf *durable.Workflow[int], tenant string) uuid.UUID {
			st, err := wf.Start(ctx, e, tenant, 1)
			require.NoError(t, err)
			return st.RunID
		}
		n1, g1, n2 := start(napper, "a"), start(gate, "a"), start(napper, "b")
		step := func(id uuid.UUID, name string) *durable.StepResult {
			res, err := e.Get(ctx, id)
			require.NoError(t, err)
			s, ok := res.Step(name)
			require.True(t, ok)
			return s
		}
		h.eventually(time.Minute, func() bool { return step(g1, "ok").State == durabletype.TaskWaiting }, "the gate waits")

		ids := []uuid.UUID{n1, g1, n2, uuid.New()}
		got, err := e.Waits(ctx, ids)
		require.NoError(t, err)
		require.Len(t, got, 3, "a run not found has no entry")
		nap := step(n1, "nap")
		require.Equal(t, []durable.StepWait{{Step: "nap", Kind: durabletype.KindSleep, State: durabletype.TaskSleeping, DueAt: nap.DueAt}}, got[n1])
		require.False(t, nap.DueAt.IsZero())
		require.Equal(t, []durable.StepWait{{Step: "ok", Kind: durabletype.KindEvent, State: durabletype.TaskWaiting, Signal: "go", Attempts: 1}}, got[g1])
		require.Len(t, got[n2], 1)

		got, err = e.Tenant("a").Waits(ctx, ids)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.NotContains(t, got, n2, "another tenant's run")
		got, err = e.Tenant("").Waits(ctx, ids)
		require.NoError(t, err)
		require.Empty(t, got)

		plain, err := durable.New(struct{ store.Store }{h.store}, h.config(durable.Config{}))
		require.NoError(t, err)
		_, err = plain.Waits(context.Background(), ids)
		require.ErrorIs(t, err, durable.ErrWaitsUnsupported)
	})
}
