package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// TestCreateRunsTxHoldsNoQueueLocks: while a caller's transaction that
// created a run for tenant T stays open, another run of T still finishes and
// enqueues its next step: the caller's transaction holds no fair-queue lock.
func TestCreateRunsTxHoldsNoQueueLocks(t *testing.T) {
	t.Parallel()
	s, pool, _ := setup(t)
	// Listen, as an engine does: the caller's commit notifies.
	lctx, stop := context.WithCancel(ctx)
	listening := make(chan struct{})
	var once sync.Once
	go s.Listen(lctx, func(n store.Notification) { once.Do(func() { close(listening) }) }) //nolint:errcheck
	defer stop()
	<-listening
	sh := &store.Shape{Steps: []store.StepSpec{step("a"), step("b", "a")}}
	first := newRun("wf", "T", sh)
	require.NoError(t, s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{first}}))
	c := claimN(t, s, 1)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	pending := newRun("wf", "T", &store.Shape{Steps: []store.StepSpec{step("x"), step("y", "x")}})
	require.NoError(t, s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{pending}}))

	done := make(chan error, 1)
	go func() {
		_, err := s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{
			{Task: c[0].Ref(), Kind: store.OutcomeComplete, Output: []byte(`1`)},
		}})
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("FinishTasks waited for the caller's open transaction")
	}
	next := claimN(t, s, 1)
	require.Equal(t, "b", next[0].Step)
	require.NoError(t, tx.Commit(ctx))
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: "w", Limit: 10, Workflows: []string{"wf"}})
		require.NoError(t, err)
		if len(cs) > 0 {
			require.Equal(t, pending.ID, cs[0].RunID, "the committed run's root is promoted when its notification arrives")
			break
		}
		require.True(t, time.Now().Before(deadline), "the committed run's root was never promoted")
		time.Sleep(10 * time.Millisecond) // waiting for the notification, polled with a deadline
	}
}

// TestIncomingPromotedByTheLeader: a run created in a transaction by another
// process, whose notification this process missed, is promoted by the
// leader's next rescue pass.
func TestIncomingPromotedByTheLeader(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	other, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	require.Empty(t, claimN(t, s, 0), "consumes s's initial promotion check")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	r := newRun("wf", "t", &store.Shape{Steps: []store.StepSpec{step("a")}})
	require.NoError(t, other.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{r}}))
	require.NoError(t, tx.Commit(ctx))

	require.Empty(t, claimN(t, s, 0), "s has not heard of the run")
	_, err = s.RescueTasks(ctx, &store.RescueTasksParams{DeadAfter: time.Hour, Limit: 10})
	require.NoError(t, err)
	got := claimN(t, s, 1)
	require.Equal(t, r.ID, got[0].RunID)
	evs, err := s.ListEvents(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, store.EventQueued, evs[0].Type)
	require.Equal(t, store.EventStarted, evs[1].Type)
}

// claimN claims up to 10 tasks of "wf" and requires exactly n.
func claimN(t *testing.T, s store.Store, n int) []*store.ClaimedTask {
	t.Helper()
	cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: "w", Limit: 10, Workflows: []string{"wf"}})
	require.NoError(t, err)
	require.Len(t, cs, n)
	return cs
}
