package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// leadTerm makes id the leader of el and returns the term its lead context
// carries (store.TermOf) once it leads, and a function that resigns and
// returns once Lead has returned.
func leadTerm(t *testing.T, el store.Elector, id string) (int64, func()) {
	t.Helper()
	lctx, cancel := context.WithCancel(ctx)
	terms := make(chan int64, 1)
	done := make(chan error, 1)
	go func() {
		done <- el.Lead(lctx, id, func(ctx context.Context) {
			term, ok := store.TermOf(ctx)
			if !ok {
				term = -1
			}
			terms <- term
			<-ctx.Done()
		})
	}()
	var term int64
	select {
	case term = <-terms:
	case err := <-done:
		t.Fatalf("Lead(%s) returned without leading: %v", id, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s does not lead within 30s", id)
	}
	require.Positive(t, term, "the lead context of %s carries a term", id)
	return term, func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}
}

// testFencing: a store that hands out leadership (an Elector) gives each
// leadership a greater term, carried by the lead context, and refuses
// (durabletype.ErrNotLeader) the leader-only writes made under a term that
// is no longer the current one, changing nothing, while the same writes
// under the current term apply: a timer is not fired, a dead worker's step
// not rescued, a settled run not pruned; pending messages and old events
// are not touched.
func testFencing(t *testing.T, s store.Store) {
	el, ok := s.(store.Elector)
	if !ok {
		t.Skip("store hands out no leadership")
	}
	// A settled run (to prune), a step claimed and never heartbeated (to
	// rescue), a sleep due after a second (to fire).
	settled := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, settled)
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `1`))
	worked := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, worked)
	require.Equal(t, worked.ID, claimOne(t, s, T0).RunID)
	sleeper := newRun("wf", "t", shape(sleepStep("nap", time.Second)))
	create(t, s, T0, sleeper)

	old, resign := leadTerm(t, el, "w-1")
	resign()
	current, resign := leadTerm(t, el, "w-2")
	defer func() { resign() }()
	require.Greater(t, current, old, "each leadership has a greater term")
	stale, fresh := store.WithTerm(ctx, old), store.WithTerm(ctx, current)

	_, err := s.FireTimers(stale, &store.FireTimersParams{Now: at(time.Minute), Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader, "FireTimers under a stale term")
	require.Equal(t, durabletype.TaskSleeping, states(t, s, sleeper.ID)["nap"], "the timer was not fired")
	_, err = s.RescueTasks(stale, &store.RescueTasksParams{Now: at(time.Hour), DeadAfter: time.Minute, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader, "RescueTasks under a stale term")
	require.Equal(t, durabletype.TaskRunning, states(t, s, worked.ID)["a"], "the step was not rescued")
	_, err = s.PruneRuns(stale, &store.PruneRunsParams{Now: at(48 * time.Hour), OlderThan: time.Hour, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader, "PruneRuns under a stale term")
	require.Equal(t, durabletype.RunCompleted, run(t, s, settled.ID).Status, "the run was not pruned")
	_, err = s.ApplyInbox(stale, &store.ApplyInboxParams{Now: at(time.Hour), Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader, "ApplyInbox under a stale term")
	_, err = s.PruneEvents(stale, &store.PruneEventsParams{Now: at(48 * time.Hour), OlderThan: time.Hour, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader, "PruneEvents under a stale term")

	// Under the current term, the same calls apply.
	_, err = s.FireTimers(fresh, &store.FireTimersParams{Now: at(time.Minute), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, durabletype.TaskCompleted, states(t, s, sleeper.ID)["nap"], "the timer fired")
	rr, err := s.RescueTasks(fresh, &store.RescueTasksParams{Now: at(time.Hour), DeadAfter: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Len(t, rr.Rescued, 1)
	require.Equal(t, worked.ID, rr.Rescued[0].RunID, "the step was rescued")
	pr, err := s.PruneRuns(fresh, &store.PruneRunsParams{Now: at(48 * time.Hour), OlderThan: time.Hour, Limit: 10})
	require.NoError(t, err)
	require.Positive(t, pr.Deleted)
	_, err = s.GetRun(ctx, settled.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound, "the run was pruned")
	_, err = s.ApplyInbox(fresh, &store.ApplyInboxParams{Now: at(time.Hour), Limit: 10})
	require.NoError(t, err)
	_, err = s.PruneEvents(fresh, &store.PruneEventsParams{Now: at(48 * time.Hour), OlderThan: time.Hour, Limit: 10})
	require.NoError(t, err)

	// Once its leader resigned, no term is current.
	resign()
	resign = func() {}
	_, err = s.PruneEvents(fresh, &store.PruneEventsParams{Now: at(48 * time.Hour), OlderThan: time.Hour, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader, "PruneEvents under the term of a leader that resigned")
}
