package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

func TestCreateRunsTx(t *testing.T) {
	t.Parallel()
	s, pool, _ := setup(t)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}

	// Rolled back: no run, nothing claimable.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	rolled := newRun("wf", "t", sh)
	require.NoError(t, created(s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{rolled}})))
	require.NoError(t, tx.Rollback(ctx))
	_, err = s.GetRun(ctx, rolled.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)

	// Committed, with the caller's own write in the same transaction.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	kept := newRun("wf", "t", sh)
	require.NoError(t, created(s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{kept}})))
	var one int
	require.NoError(t, tx.QueryRow(ctx, "SELECT 1").Scan(&one))
	// An existing run is reported without aborting the caller's
	// transaction: a duplicate, and a conflict for another tenant.
	res, err := s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{kept}})
	require.NoError(t, err)
	require.Equal(t, []store.CreatedRun{{ID: kept.ID, Duplicate: true}}, res.Runs)
	clash := kept
	clash.Tenant = "other"
	_, err = s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{clash}})
	require.ErrorIs(t, err, durabletype.ErrRunExists)
	require.NoError(t, tx.Commit(ctx))
	got, err := s.GetRun(ctx, kept.ID)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunRunning, got.Status)
	cs := claimAll(t, s, "wf", 10)
	require.Len(t, cs, 1)
	require.Equal(t, kept.ID, cs[0].RunID)

	// The shape stored by a rolled-back transaction is inserted again.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	fresh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("fresh")}}
	require.NoError(t, created(s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{newRun("wf", "t", fresh)}})))
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{newRun("wf", "t", fresh)}})))

	// Anything but a pgx.Tx is a typed error.
	for _, bad := range []any{nil, "tx", &sql.Tx{}, pool} {
		_, err = s.CreateRunsTx(ctx, bad, &store.CreateRunsParams{Runs: []store.NewRun{newRun("wf", "t", sh)}})
		var typeErr *pgstore.TxTypeError
		require.True(t, errors.As(err, &typeErr), "%T: %v", bad, err)
		require.Contains(t, err.Error(), "pgx.Tx")
	}
}

// TestDatabaseTime uses the database's clock when Now is zero.
func TestDatabaseTime(t *testing.T) {
	t.Parallel()
	s, pool, _ := setup(t)
	var before time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT now()").Scan(&before))
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Hour, Factor: 1}}}}
	r := newRun("wf", "t", sh)
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
	cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: "w", Limit: 1, Workflows: []string{"wf"}})
	require.NoError(t, err)
	require.Len(t, cs, 1)
	_, err = s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{{Task: cs[0].Ref(), Kind: store.OutcomeFail, Error: "x"}}})
	require.NoError(t, err)
	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Limit: 10})
	require.NoError(t, err)
	require.Zero(t, fr.Fired)
	require.True(t, fr.HasNext)
	require.InDelta(t, time.Hour, fr.Next, float64(time.Minute))
	var after time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT now()").Scan(&after))
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.False(t, got.CreatedAt.Before(before) || got.CreatedAt.After(after), "created at %s, not within [%s, %s]", got.CreatedAt, before, after)
	ts, err := s.ListTasks(ctx, r.ID)
	require.NoError(t, err)
	require.False(t, ts[0].StartedAt.Before(got.CreatedAt))
	require.Equal(t, durabletype.TaskQueued, ts[0].State)
}

// notifications collects what a listener delivers.
type notifications struct {
	ch chan store.Notification
}

func listen(t *testing.T, s *pgstore.Store) (*notifications, func()) {
	t.Helper()
	n := &notifications{ch: make(chan store.Notification, 1000)}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(lctx, func(x store.Notification) {
			select {
			case n.ch <- x:
			default:
				t.Error("notification buffer full")
			}
		})
	}()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Listen did not return after its context was cancelled")
		}
	}
	return n, stop
}

// wait returns the next notification satisfying ok, within a deadline.
func (n *notifications) wait(t *testing.T, what string, ok func(store.Notification) bool) store.Notification {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case x := <-n.ch:
			if ok(x) {
				return x
			}
		case <-deadline:
			t.Fatalf("no %s notification", what)
		}
	}
}

func topic(tp store.Topic) func(store.Notification) bool {
	return func(x store.Notification) bool { return x.Topic == tp }
}

// terminate kills the backends of a store's dedicated connections for role.
func terminate(t *testing.T, pool *pgxpool.Pool, schema, role string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		pgstore.ApplicationName(schema, role)).Scan(&n))
	return n
}

func TestListener(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	n, stop := listen(t, s)
	defer stop()
	n.wait(t, "first resync", topic(store.TopicResync))

	r := newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
	n.wait(t, "ready", topic(store.TopicReady))
	nap := newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "nap", Sleep: time.Hour, Retry: once()}}})
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{nap}})))
	n.wait(t, "timer", topic(store.TopicTimer))
	cs := claimAll(t, s, "wf", 10)
	require.Len(t, cs, 1)
	_, err := s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{complete(cs[0])}})
	require.NoError(t, err)
	x := n.wait(t, "run", topic(store.TopicRun))
	require.Equal(t, r.ID.String(), x.Payload)

	// Kill the listener's backend: it says it is deaf (the engines poll),
	// reconnects and resyncs, and keeps delivering.
	require.Eventually(t, func() bool { return terminate(t, pool, schema, "listener") == 1 }, 10*time.Second, 10*time.Millisecond)
	n.wait(t, "deaf after the connection was lost", topic(store.TopicDeaf))
	n.wait(t, "resync after reconnect", topic(store.TopicResync))
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})}})))
	n.wait(t, "ready after reconnect", topic(store.TopicReady))
}

// elector tracks who leads.
type elector struct {
	mu      sync.Mutex
	leading map[string]bool
	started map[string]time.Time // when each candidate last started leading
	lost    map[string]time.Time // when each candidate's lead context was last cancelled
	term    map[string]int64     // the term of each candidate's last leadership
	maxLead int                  // most candidates leading at once
}

func newElector() *elector {
	return &elector{leading: map[string]bool{}, started: map[string]time.Time{}, lost: map[string]time.Time{},
		term: map[string]int64{}}
}

func (e *elector) lead(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		term, _ := store.TermOf(ctx)
		e.mu.Lock()
		e.leading[id] = true
		e.started[id] = time.Now()
		e.term[id] = term
		n := 0
		for _, l := range e.leading {
			if l {
				n++
			}
		}
		e.maxLead = max(e.maxLead, n)
		e.mu.Unlock()
		<-ctx.Done()
		e.mu.Lock()
		e.leading[id] = false
		e.lost[id] = time.Now()
		e.mu.Unlock()
	}
}

// leader returns the single leader and its term, or "" when none or
// several lead.
func (e *elector) leader() (string, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for id, l := range e.leading {
		if l {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		return "", 0
	}
	return ids[0], e.term[ids[0]]
}

// leaseStore returns a store on schema with the given leader's lease, as
// another process would have.
func leaseStore(t *testing.T, pool *pgxpool.Pool, schema string, lease time.Duration) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema, LeaderLease: lease})
	require.NoError(t, err)
	return s
}

// TestElector: three candidates (separate stores, as separate processes
// have) share a schema. Exactly one leads, with a term its lead context
// carries. When its lease expires under it (as when its process froze),
// it stops leading at its next renewal and a leader with a greater term
// takes over. A leader that resigns hands leadership on without overlap.
func TestElector(t *testing.T) {
	t.Parallel()
	_, pool, schema := setup(t)
	e := newElector()
	type candidate struct {
		cancel context.CancelFunc
		done   chan error
	}
	cands := map[string]*candidate{}
	for i := range 3 {
		id := fmt.Sprintf("e%d", i)
		s := leaseStore(t, pool, schema, 3*time.Second) // renewals that a loaded machine does not let lapse
		cctx, cancel := context.WithCancel(ctx)
		c := &candidate{cancel: cancel, done: make(chan error, 1)}
		cands[id] = c
		go func() { c.done <- s.Lead(cctx, id, e.lead(id)) }()
	}
	defer func() {
		for _, c := range cands {
			c.cancel()
		}
		for id, c := range cands {
			select {
			case err := <-c.done:
				require.ErrorIs(t, err, context.Canceled, id)
			case <-time.After(10 * time.Second):
				t.Errorf("Lead %s did not return", id)
			}
		}
	}()

	var first string
	var term int64
	require.Eventually(t, func() bool { first, term = e.leader(); return first != "" }, 10*time.Second, time.Millisecond)
	require.Positive(t, term)
	e.mu.Lock()
	require.Equal(t, 1, e.maxLead, "one leader among three candidates")
	e.mu.Unlock()

	// The lease expires under the leader: its lead context is cancelled
	// (its renewal finds the lease gone), and a leader with a greater term
	// takes over.
	expired := time.Now()
	_, err := pool.Exec(ctx, "UPDATE "+schema+".leader SET expires_at = now()")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.lost[first].After(expired)
	}, 10*time.Second, time.Millisecond, "the old leader's context is cancelled")
	var second string
	var term2 int64
	require.Eventually(t, func() bool {
		second, term2 = e.leader()
		return second != "" && term2 > term
	}, 10*time.Second, time.Millisecond, "a leader with a greater term takes over")
	t.Logf("lease of %s (term %d) expired: %s leads with term %d", first, term, second, term2)
	e.mu.Lock()
	e.maxLead = 1
	e.mu.Unlock()

	// Cancelling the leader's context hands leadership on.
	cands[second].cancel()
	require.ErrorIs(t, <-cands[second].done, context.Canceled)
	cands[second].done <- context.Canceled // for the deferred check
	require.Eventually(t, func() bool {
		l, term3 := e.leader()
		return l != "" && l != second && term3 > term2
	}, 10*time.Second, time.Millisecond, "leadership passes on when the leader's context is cancelled")

	e.mu.Lock()
	require.Equal(t, 1, e.maxLead, "a resigning leader's lead returns before the next one starts")
	e.mu.Unlock()
}

// created drops the result of CreateRuns.
func created(_ *store.CreateRunsResult, err error) error { return err }

// TestDeletedRunsTakeTheirTasks: a run deleted by a statement other than
// retention's own (an engine not yet upgraded, which relied on the foreign
// key's cascade migration 012 dropped; an operator's DELETE) takes its
// tasks with it, by the trigger on runs.
func TestDeletedRunsTakeTheirTasks(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a"), step("b", "a")}}
	gone, kept := newRun("wf", "t", sh), newRun("wf", "t", sh)
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{gone, kept}})))
	runs, tasks := pgx.Identifier{schema, "runs"}.Sanitize(), pgx.Identifier{schema, "tasks"}.Sanitize()
	_, err := pool.Exec(ctx, "DELETE FROM "+runs+" WHERE id = $1", gone.ID)
	require.NoError(t, err)
	count := func(id uuid.UUID) (n int) {
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+tasks+" WHERE run_id = $1", id).Scan(&n))
		return n
	}
	require.Zero(t, count(gone.ID))
	require.Equal(t, 2, count(kept.ID))
}
