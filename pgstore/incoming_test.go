package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
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
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a"), step("b", "a")}}
	first := newRun("wf", "T", sh)
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{first}})))
	c := claimN(t, s, 1)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	pending := newRun("wf", "T", &durabletype.Shape{Steps: []durabletype.StepSpec{step("x"), step("y", "x")}})
	require.NoError(t, created(s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{pending}})))

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
	r := newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	require.NoError(t, created(other.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
	require.NoError(t, tx.Commit(ctx))

	require.Empty(t, claimN(t, s, 0), "s has not heard of the run")
	_, err = s.RescueTasks(ctx, &store.RescueTasksParams{DeadAfter: time.Hour, Limit: 10})
	require.NoError(t, err)
	got := claimN(t, s, 1)
	require.Equal(t, r.ID, got[0].RunID)
	evs, err := s.ListEvents(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, durabletype.EventQueued, evs[0].Type)
	require.Equal(t, durabletype.EventStarted, evs[1].Type)
}

// claimN claims up to 10 tasks of "wf" and requires exactly n.
func claimN(t *testing.T, s store.Store, n int) []*store.ClaimedTask {
	t.Helper()
	cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: "w", Limit: 10, Workflows: []string{"wf"}})
	require.NoError(t, err)
	require.Len(t, cs, n)
	return cs
}

// TestRunsInFlightFromTheQueues: a run is in flight (listed RUNNING,
// counted in the stats) whichever queue holds its work: its root incoming
// (created in a caller's transaction, not promoted yet), ready, running,
// or waiting for a timer (a sleep here; a retry backoff is the same timer);
// and no longer once it settled.
func TestRunsInFlightFromTheQueues(t *testing.T) {
	t.Parallel()
	s, pool, _ := setup(t)
	running := func(tenant string) []string {
		t.Helper()
		res, err := s.ListRuns(ctx, &store.ListRunsParams{Limit: 100,
			Filter: store.RunFilter{Tenant: tenant, Statuses: []durabletype.RunStatus{durabletype.RunRunning}}})
		require.NoError(t, err)
		var ids []string
		for _, r := range res.Runs {
			ids = append(ids, r.ID.String())
		}
		st, err := s.Stats(ctx, &store.StatsParams{Tenant: tenant, Window: time.Hour})
		require.NoError(t, err)
		inflight := 0
		for _, c := range st.Runs {
			if !c.Settled {
				inflight += c.Count
			}
		}
		require.Equal(t, len(ids), inflight, "the stats count the runs the list shows")
		return ids
	}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	incoming := newRun("wf", "A", &durabletype.Shape{Steps: []durabletype.StepSpec{step("x")}})
	require.NoError(t, created(s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{incoming}})))
	require.NoError(t, tx.Commit(ctx))

	ready := newRun("wf", "A", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	asleep := newRun("wf", "A", &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "nap", Sleep: time.Hour, Retry: durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}}}})
	other := newRun("wf", "B", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{ready, asleep, other}})))
	require.ElementsMatch(t, []string{incoming.ID.String(), ready.ID.String(), asleep.ID.String()}, running("A"))
	require.ElementsMatch(t, []string{other.ID.String()}, running("B"))
	require.Len(t, running(""), 4)

	// Claimed (running), then backing off, then settled.
	var c *store.ClaimedTask
	for c == nil {
		cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: "w", Limit: 10, Workflows: []string{"wf"}})
		require.NoError(t, err)
		for _, x := range cs {
			if x.RunID == other.ID {
				c = x
			} else {
				_, err := s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{{Task: x.Ref(), Kind: store.OutcomeRelease}}})
				require.NoError(t, err)
			}
		}
	}
	require.Equal(t, []string{other.ID.String()}, running("B"), "running")
	_, err = s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{{Task: c.Ref(), Kind: store.OutcomeComplete, Output: []byte(`1`)}}})
	require.NoError(t, err)
	require.Empty(t, running("B"), "settled")
	require.Len(t, running(""), 3)
}

// TestInboxReportsSettled: an event sent inside a caller's transaction
// settles nothing in that call; the pass that applies it once committed
// (ApplyInbox, or the leader's rescue pass) reports the run it settled,
// and no later pass reports it again.
func TestInboxReportsSettled(t *testing.T) {
	t.Parallel()
	s, pool, _ := setup(t)
	sendInTx := func(key string) store.NewRun {
		t.Helper()
		w := step("w")
		w.Wait = &durabletype.WaitSpec{}
		r := newRun("wf", "T", &durabletype.Shape{Steps: []durabletype.StepSpec{w}})
		require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
		c := claimN(t, s, 1)
		res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{{Task: c[0].Ref(), Kind: store.OutcomeWait, Key: key}}})
		require.NoError(t, err)
		require.Equal(t, store.FinishApplied, res[0].Status)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck
		sent, err := s.SendEventsTx(ctx, tx, &store.SendEventsParams{Events: []store.EventMessage{{Tenant: "T", Key: key, Payload: []byte(`1`)}}})
		require.NoError(t, err)
		require.Equal(t, []int{1}, sent.Delivered)
		require.Empty(t, sent.Settled, "delivered after the commit")
		require.NoError(t, tx.Commit(ctx))
		return r
	}
	settled := func(r store.NewRun) []store.SettledRun {
		return []store.SettledRun{{RunID: r.ID, Workflow: r.Workflow, Tenant: r.Tenant, Status: durabletype.RunCompleted}}
	}

	first := sendInTx("k1")
	ai, err := s.ApplyInbox(ctx, &store.ApplyInboxParams{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, ai.Applied)
	require.Equal(t, settled(first), ai.Settled)
	ai, err = s.ApplyInbox(ctx, &store.ApplyInboxParams{Limit: 10})
	require.NoError(t, err)
	require.Zero(t, ai.Applied)
	require.Empty(t, ai.Settled)

	// The leader's pass applies what stayed pending since its previous
	// pass.
	second := sendInTx("k2")
	var got []store.SettledRun
	for range 2 {
		rs, err := s.RescueTasks(ctx, &store.RescueTasksParams{DeadAfter: time.Hour, Limit: 10})
		require.NoError(t, err)
		got = append(got, rs.Settled...)
	}
	require.Equal(t, settled(second), got)
	rs, err := s.RescueTasks(ctx, &store.RescueTasksParams{DeadAfter: time.Hour, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, rs.Settled)
}
