package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/store"
)

// tp is a W3C traceparent as the engine stores it.
const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// testTelemetryFields checks what the engine's metrics and spans read from
// the store: trace parents kept with runs (and given to child runs), when a
// claimed task became ready, what a finish did to a failed task and its
// run, and the workflows of rescued tasks.
func testTelemetryFields(t *testing.T, s store.Store) {
	retried := shape(store.StepSpec{Name: "a", Retry: store.RetryPolicy{MaxAttempts: 2, Factor: 1}})
	plain := newRun("wf", "t", shape(step("a")))
	traced := newRun("wf", "t", retried)
	traced.TraceParent = tp
	// The run without a trace parent comes first: a batch's trace parents
	// start with the first run that has one.
	create(t, s, T0, plain, traced)
	require.Empty(t, run(t, s, plain.ID).TraceParent)
	require.Equal(t, tp, run(t, s, traced.ID).TraceParent)

	cs := claim(t, s, at(5*time.Second), 10)
	require.Len(t, cs, 2)
	byRun := map[string]*store.ClaimedTask{}
	for _, c := range cs {
		requireTime(t, T0, c.ReadyAt, "ready since the run was created")
		requireTime(t, at(5*time.Second), c.ClaimedAt)
		byRun[c.RunID.String()] = c
	}
	require.Empty(t, byRun[plain.ID.String()].TraceParent)
	require.Equal(t, tp, byRun[traced.ID.String()].TraceParent)

	res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: at(6 * time.Second), Outcomes: []store.Outcome{
		complete(byRun[plain.ID.String()], `1`), failed(byRun[traced.ID.String()], "boom", false),
	}})
	require.NoError(t, err)
	require.Equal(t, []store.FinishResult{
		{Status: store.FinishApplied, Settled: store.RunCompleted},
		{Status: store.FinishApplied, Retried: true},
	}, res)

	// The retry, ready again at once, is claimed and then rescued.
	c := claimOne(t, s, at(7*time.Second))
	requireTime(t, at(6*time.Second), c.ReadyAt, "ready again since the failure")
	resc, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(time.Hour), DeadAfter: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []store.TaskRef{c.Ref()}, resc.Rescued)
	require.Equal(t, []string{"wf"}, resc.Workflows)
	require.Equal(t, store.RunFailed, run(t, s, traced.ID).Status, "its attempts used up")

	// A failure that fails the run says so; a stale one says nothing more.
	third := newRun("wf", "t", shape(step("a")))
	create(t, s, at(time.Hour), third)
	c = claimOne(t, s, at(time.Hour))
	res, err = s.FinishTasks(ctx, &store.FinishTasksParams{Now: at(time.Hour), Outcomes: []store.Outcome{
		failed(c, "boom", false), failed(c, "again", false),
	}})
	require.NoError(t, err)
	require.Equal(t, []store.FinishResult{{Status: store.FinishApplied, Settled: store.RunFailed}, {Status: store.FinishDuplicate}}, res)

	// A child run keeps the trace parent its step gave it.
	p := newRun("wf", "t", shape(childStep("ship", "c2")))
	create(t, s, at(2*time.Hour), p)
	c = claimOne(t, s, at(2*time.Hour))
	o := spawn(c, `"box"`)
	o.Child.TraceParent = tp
	mustApply(t, s, at(2*time.Hour), o)
	require.Equal(t, tp, run(t, s, dag.ChildID(p.ID, "ship", c.Token)).TraceParent)
	kid := claim(t, s, at(2*time.Hour), 1, "child")
	require.Len(t, kid, 1)
	require.Equal(t, tp, kid[0].TraceParent)

	// A trace parent that is not printable ASCII is refused.
	bad := newRun("wf", "t", shape(step("a")))
	bad.TraceParent = "00-\n"
	_, err = s.CreateRuns(ctx, &store.CreateRunsParams{Now: at(3 * time.Hour), Runs: []store.NewRun{bad}})
	require.ErrorIs(t, err, store.ErrInvalidRun)
}
