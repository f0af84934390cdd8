package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// TxEffects writes effects in the transactions a store's FinishTx gives
// steps, and counts those that were kept, for RunTx.
type TxEffects struct {
	// Write records key in tx, a transaction FinishTx gave fn.
	Write func(ctx context.Context, tx any, key string) error
	// Count returns how many records of key committed transactions kept.
	Count func(t *testing.T, key string) int
}

// TxFactory returns a new, empty store that implements store.TxFinisher,
// and the effects of its transactions.
type TxFactory func(t *testing.T) (store.TxFinisher, TxEffects)

// RunTx runs the conformance suite of store.TxFinisher: a step's writes in
// the transaction are kept if and only if its outcome is recorded.
func RunTx(t *testing.T, newStore TxFactory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.TxFinisher, fx TxEffects)
	}{
		{"Applied", testTxApplied},
		{"NotRecorded", testTxNotRecorded},
		{"StaleClaim", testTxStaleClaim},
		{"Duplicate", testTxDuplicate},
		{"Concurrent", testTxConcurrent},
		{"InvalidOutcome", testTxInvalidOutcome},
		{"CancelledRun", testTxCancelledRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, fx := newStore(t)
			tt.fn(t, s, fx)
		})
	}
}

// finishTx records o in a transaction that writes key first.
func finishTx(t *testing.T, s store.TxFinisher, fx TxEffects, now time.Time, key string, o store.Outcome, record bool) (store.FinishResult, bool, error) {
	t.Helper()
	return s.FinishTx(ctx, &store.FinishTxParams{Now: now}, func(ctx context.Context, tx any) (store.Outcome, bool) {
		require.NoError(t, fx.Write(ctx, tx, key))
		return o, record
	})
}

func txStore(t *testing.T, s store.TxFinisher) store.Store {
	st, ok := s.(store.Store)
	require.True(t, ok, "a TxFinisher is a Store")
	return st
}

func testTxApplied(t *testing.T, ts store.TxFinisher, fx TxEffects) {
	s := txStore(t, ts)
	r := newRun("wf", "t", shape(step("a"), step("b", "a")))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	res, recorded, err := finishTx(t, ts, fx, at(time.Second), "a", complete(c, `"A"`), true)
	require.NoError(t, err)
	require.True(t, recorded)
	require.Equal(t, store.FinishApplied, res.Status)
	require.Equal(t, 1, fx.Count(t, "a"), "the step's write commits with its outcome")
	require.Equal(t, `"A"`, string(tasks(t, s, r.ID)["a"].Output))

	// The outcome's transition is the whole one: b is ready, and the
	// outcome that settles the run reports it.
	cb := claimOne(t, s, at(2*time.Second))
	require.Equal(t, "b", cb.Step)
	require.Equal(t, `"A"`, string(cb.ParentOutputs["a"]))
	res, recorded, err = finishTx(t, ts, fx, at(3*time.Second), "b", complete(cb, `"B"`), true)
	require.NoError(t, err)
	require.True(t, recorded)
	require.Equal(t, durabletype.RunCompleted, res.Settled)
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "COMPLETED:1"}, stepEvents(t, s, r.ID, "b"))
}

func testTxNotRecorded(t *testing.T, ts store.TxFinisher, fx TxEffects) {
	s := txStore(t, ts)
	r := newRun("wf", "t", shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, Factor: 1}}))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	res, recorded, err := finishTx(t, ts, fx, at(time.Second), "a", failed(c, "boom", false), false)
	require.NoError(t, err)
	require.False(t, recorded)
	require.Equal(t, store.FinishResult{}, res)
	require.Zero(t, fx.Count(t, "a"), "a step that did not complete keeps none of its writes")
	require.Equal(t, durabletype.TaskRunning, tasks(t, s, r.ID)["a"].State, "nothing was recorded")

	// The caller records the failure as any other; the next attempt's
	// writes are kept.
	mustApply(t, s, at(2*time.Second), failed(c, "boom", false))
	fireAll(t, s, at(time.Minute))
	c2 := claimOne(t, s, at(time.Minute))
	res, recorded, err = finishTx(t, ts, fx, at(time.Minute+time.Second), "a", complete(c2, `1`), true)
	require.NoError(t, err)
	require.True(t, recorded)
	require.Equal(t, store.FinishApplied, res.Status)
	require.Equal(t, 1, fx.Count(t, "a"))
}

// testTxStaleClaim: a step whose claim was rescued while it ran (its worker
// was cut off) keeps none of its writes, and changes nothing.
func testTxStaleClaim(t *testing.T, ts store.TxFinisher, fx TxEffects) {
	s := txStore(t, ts)
	r := newRun("wf", "t", shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 3, Factor: 1}}))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	rescued, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(time.Minute), DeadAfter: 30 * time.Second, Limit: 10})
	require.NoError(t, err)
	require.Len(t, rescued.Rescued, 1)
	before := stepEvents(t, s, r.ID, "a")

	res, recorded, err := finishTx(t, ts, fx, at(time.Minute+time.Second), "stale", complete(c, `"late"`), true)
	require.NoError(t, err)
	require.True(t, recorded)
	require.Equal(t, store.FinishStale, res.Status)
	require.Zero(t, fx.Count(t, "stale"), "the writes of a stale claim roll back")
	require.Equal(t, before, stepEvents(t, s, r.ID, "a"))
	require.Equal(t, durabletype.TaskQueued, tasks(t, s, r.ID)["a"].State)

	// The rescued attempt's writes are the ones kept.
	fireAll(t, s, at(2*time.Minute))
	c2 := claimOne(t, s, at(2*time.Minute))
	res, _, err = finishTx(t, ts, fx, at(2*time.Minute+time.Second), "fresh", complete(c2, `"fresh"`), true)
	require.NoError(t, err)
	require.Equal(t, store.FinishApplied, res.Status)
	require.Equal(t, 1, fx.Count(t, "fresh"))
	require.Equal(t, `"fresh"`, string(tasks(t, s, r.ID)["a"].Output))
}

func testTxDuplicate(t *testing.T, ts store.TxFinisher, fx TxEffects) {
	s := txStore(t, ts)
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	res, _, err := finishTx(t, ts, fx, at(time.Second), "first", complete(c, `1`), true)
	require.NoError(t, err)
	require.Equal(t, store.FinishApplied, res.Status)
	// The same claim's outcome again (an engine that could not tell
	// whether its commit went through): recorded already.
	res, recorded, err := finishTx(t, ts, fx, at(2*time.Second), "again", complete(c, `1`), true)
	require.NoError(t, err)
	require.True(t, recorded)
	require.Equal(t, store.FinishDuplicate, res.Status)
	require.Zero(t, fx.Count(t, "again"))
	require.Equal(t, 1, fx.Count(t, "first"))
	require.Equal(t, []store.FinishStatus{store.FinishDuplicate}, finish(t, s, at(3*time.Second), complete(c, `1`)))
}

// testTxConcurrent: two transactions record the same claim's outcome at
// once; one commits, and only its writes are kept.
func testTxConcurrent(t *testing.T, ts store.TxFinisher, fx TxEffects) {
	s := txStore(t, ts)
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	var wg sync.WaitGroup
	statuses := make([]store.FinishStatus, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			var res store.FinishResult
			res, _, errs[i] = s.(store.TxFinisher).FinishTx(ctx, &store.FinishTxParams{Now: at(time.Second)}, func(ctx context.Context, tx any) (store.Outcome, bool) {
				if err := fx.Write(ctx, tx, "k"); err != nil {
					errs[i] = err
				}
				return complete(c, `1`), true
			})
			statuses[i] = res.Status
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ElementsMatch(t, []store.FinishStatus{store.FinishApplied, store.FinishDuplicate}, statuses)
	require.Equal(t, 1, fx.Count(t, "k"))
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "COMPLETED:1"}, stepEvents(t, s, r.ID, "a"))
}

func testTxInvalidOutcome(t *testing.T, ts store.TxFinisher, fx TxEffects) {
	s := txStore(t, ts)
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	_, _, err := finishTx(t, ts, fx, at(time.Second), "bad", store.Outcome{Task: c.Ref(), Kind: store.OutcomeKind(99)}, true)
	require.ErrorIs(t, err, durabletype.ErrInvalidOutcome)
	require.Zero(t, fx.Count(t, "bad"))
	require.Equal(t, durabletype.TaskRunning, tasks(t, s, r.ID)["a"].State)
}

// testTxCancelledRun: the run was cancelled while its step ran: the step's
// writes roll back with its outcome.
func testTxCancelledRun(t *testing.T, ts store.TxFinisher, fx TxEffects) {
	s := txStore(t, ts)
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	_, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionCancel, Now: at(time.Second), IDs: []uuid.UUID{r.ID}})
	require.NoError(t, err)
	res, recorded, err := finishTx(t, ts, fx, at(2*time.Second), "a", complete(c, `1`), true)
	require.NoError(t, err)
	require.True(t, recorded)
	require.NotEqual(t, store.FinishApplied, res.Status)
	require.Zero(t, fx.Count(t, "a"))
	require.Equal(t, durabletype.RunCancelled, run(t, s, r.ID).Status)
}
