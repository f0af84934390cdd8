package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// tp is a W3C traceparent as the engine stores it.
const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// testTelemetryFields checks what the engine's metrics and spans read from
// the store: trace parents kept with runs (and given to child runs), when a
// claimed task became ready, what a finish did to a failed task and its
// run, and the workflows of rescued tasks.
func testTelemetryFields(t *testing.T, s store.Store) {
	retried := shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, Factor: 1}, LostLimit: 1})
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
		{Status: store.FinishApplied, Settled: durabletype.RunCompleted},
		{Status: store.FinishApplied, Retried: true},
	}, res)

	// The retry, ready again at once, is claimed and then rescued.
	c := claimOne(t, s, at(7*time.Second))
	requireTime(t, at(6*time.Second), c.ReadyAt, "ready again since the failure")
	resc, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(time.Hour), DeadAfter: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []store.TaskRef{c.Ref()}, resc.Rescued)
	require.Equal(t, []string{"wf"}, resc.Workflows)
	require.Equal(t, durabletype.RunFailed, run(t, s, traced.ID).Status, "its lost limit of 1 reached")

	// A failure that fails the run says so; a stale one says nothing more.
	third := newRun("wf", "t", shape(step("a")))
	create(t, s, at(time.Hour), third)
	c = claimOne(t, s, at(time.Hour))
	res, err = s.FinishTasks(ctx, &store.FinishTasksParams{Now: at(time.Hour), Outcomes: []store.Outcome{
		failed(c, "boom", false), failed(c, "again", false),
	}})
	require.NoError(t, err)
	require.Equal(t, []store.FinishResult{{Status: store.FinishApplied, Settled: durabletype.RunFailed}, {Status: store.FinishDuplicate}}, res)

	// A child run keeps the trace parent its step gave it.
	p := newRun("wf", "t", shape(childStep("ship", "c2")))
	create(t, s, at(2*time.Hour), p)
	c = claimOne(t, s, at(2*time.Hour))
	o := spawn(c, `"box"`)
	o.Child.TraceParent = tp
	mustApply(t, s, at(2*time.Hour), o)
	require.Equal(t, tp, run(t, s, dag.ChildID(p.ID, "ship", c.Token, c.ClaimedAt)).TraceParent)
	kid := claim(t, s, at(2*time.Hour), 1, "child")
	require.Len(t, kid, 1)
	require.Equal(t, tp, kid[0].TraceParent)

	// A trace parent that is not printable ASCII is refused.
	bad := newRun("wf", "t", shape(step("a")))
	bad.TraceParent = "00-\n"
	_, err = s.CreateRuns(ctx, &store.CreateRunsParams{Now: at(3 * time.Hour), Runs: []store.NewRun{bad}})
	require.ErrorIs(t, err, durabletype.ErrInvalidRun)
}

// testSettledReports checks that every transition that settles a run
// reports it (store.SettledRun), once, in the result of the call that
// recorded it: a rescue out of attempts, a run past its deadline, a
// cancel (with the child runs cancelled with their parent), an event and
// a signal that complete their runs, and a child run whose settlement
// completes its parent; calls that settle nothing report nothing.
func testSettledReports(t *testing.T, s store.Store) {
	settled := func(r store.NewRun, status durabletype.RunStatus) store.SettledRun {
		return store.SettledRun{RunID: r.ID, Workflow: r.Workflow, Tenant: r.Tenant, Status: status}
	}

	// A rescue that reaches the step's lost limit fails the run.
	rescued := newRun("wf", "t1", shape(durabletype.StepSpec{Name: "a", Retry: once(), LostLimit: 1}))
	create(t, s, T0, rescued)
	claimOne(t, s, T0)
	resc, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(time.Minute), DeadAfter: time.Second, Limit: 10})
	require.NoError(t, err)
	require.Len(t, resc.Rescued, 1)
	require.Equal(t, []store.SettledRun{settled(rescued, durabletype.RunFailed)}, resc.Settled)

	// A run past its deadline fails; a timer that settles nothing
	// reports nothing.
	late := newRun("wf", "t2", shape(step("a"), sleepStep("nap", time.Minute)))
	late.Deadline = at(time.Hour)
	create(t, s, at(time.Minute), late)
	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: at(2 * time.Minute), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, fr.Fired, "the nap ends")
	require.Empty(t, fr.Settled)
	fr, err = s.FireTimers(ctx, &store.FireTimersParams{Now: at(time.Hour), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []store.SettledRun{settled(late, durabletype.RunFailed)}, fr.Settled)

	// Cancelling a parent cancels its child run: both are reported, on
	// the first result; an action that settles nothing reports nothing.
	parent := newRun("wf", "t3", shape(childStep("ship", "c2")))
	create(t, s, at(2*time.Hour), parent)
	c := claimOne(t, s, at(2*time.Hour))
	mustApply(t, s, at(2*time.Hour), spawn(c, `1`))
	kid := store.NewRun{ID: dag.ChildID(parent.ID, "ship", c.Token, c.ClaimedAt), Workflow: "child", Tenant: "t3"}
	cr, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionCancel, Now: at(2 * time.Hour), IDs: []uuid.UUID{uuid.New(), parent.ID, parent.ID}})
	require.NoError(t, err)
	require.Len(t, cr, 3)
	require.ErrorIs(t, cr[0].Err, durabletype.ErrRunNotFound)
	require.NoError(t, cr[1].Err)
	require.ErrorIs(t, cr[2].Err, durabletype.ErrRunSettled)
	require.Equal(t, []store.SettledRun{settled(parent, durabletype.RunCancelled), settled(kid, durabletype.RunCancelled)}, cr[0].Settled)
	require.Empty(t, cr[1].Settled)
	require.Empty(t, cr[2].Settled)
	cr, err = s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionCancel, Now: at(2 * time.Hour), IDs: []uuid.UUID{parent.ID}})
	require.NoError(t, err)
	require.Empty(t, cr[0].Settled)

	// An event that completes the run waiting for it; sent again, it
	// settles nothing.
	waiting := startWait(t, s, at(3*time.Hour), "t4", shape(eventStep("e")), "order-1")
	sr, err := s.SendEvents(ctx, &store.SendEventsParams{Now: at(3 * time.Hour), Events: []store.EventMessage{event("t4", "order-1", `1`)}})
	require.NoError(t, err)
	require.Equal(t, []int{1}, sr.Delivered)
	require.Equal(t, []store.SettledRun{settled(waiting, durabletype.RunCompleted)}, sr.Settled)
	sr, err = s.SendEvents(ctx, &store.SendEventsParams{Now: at(3 * time.Hour), Events: []store.EventMessage{event("t4", "order-1", `2`)}})
	require.NoError(t, err)
	require.Empty(t, sr.Settled)

	// A signal that completes its run.
	signalled := newRun("wf", "t5", shape(signalStep("s", "go")))
	create(t, s, at(4*time.Hour), signalled)
	mustApply(t, s, at(4*time.Hour), waitFor(claimOne(t, s, at(4*time.Hour)), ""))
	sig := mustSignal(t, s, &store.SignalParams{Now: at(4 * time.Hour), RunID: signalled.ID, Name: "go", Payload: []byte(`1`)})
	require.Equal(t, []store.SettledRun{settled(signalled, durabletype.RunCompleted)}, sig.Settled)

	// The last outcome of a child run settles it (FinishResult.Settled)
	// and, by its settlement, its parent (Cascade, on the first result).
	p2 := newRun("wf", "t6", shape(childStep("ship", "c2")))
	create(t, s, at(5*time.Hour), p2)
	c = claimOne(t, s, at(5*time.Hour))
	mustApply(t, s, at(5*time.Hour), spawn(c, `1`))
	cs := claim(t, s, at(5*time.Hour), 1, "child")
	require.Len(t, cs, 1)
	mustApply(t, s, at(5*time.Hour), complete(cs[0], `1`))
	cs = claim(t, s, at(5*time.Hour), 1, "child")
	require.Len(t, cs, 1)
	c2 := cs[0]
	require.Equal(t, "c2", c2.Step)
	res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: at(5 * time.Hour), Outcomes: []store.Outcome{complete(c2, `2`)}})
	require.NoError(t, err)
	require.Equal(t, []store.FinishResult{{Status: store.FinishApplied, Settled: durabletype.RunCompleted,
		Cascade: []store.SettledRun{settled(p2, durabletype.RunCompleted)}}}, res)
	require.Equal(t, durabletype.RunCompleted, run(t, s, p2.ID).Status)

	// Every settlement was reported by the call that recorded it: nothing
	// is left for the leader's pass.
	ai, err := s.ApplyInbox(ctx, &store.ApplyInboxParams{Now: at(6 * time.Hour), Limit: 100})
	require.NoError(t, err)
	require.Empty(t, ai.Settled)
}
