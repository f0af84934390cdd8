package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// leading runs s.Lead for id until the test ends, and returns the lead
// contexts it is given, in order.
func leading(t *testing.T, s *pgstore.Store, id string) <-chan context.Context {
	t.Helper()
	lctx, cancel := context.WithCancel(ctx)
	leads := make(chan context.Context, 10)
	done := make(chan error, 1)
	go func() {
		done <- s.Lead(lctx, id, func(ctx context.Context) { leads <- ctx; <-ctx.Done() })
	}()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	return leads
}

// nextLead waits for the next lead context of leads.
func nextLead(t *testing.T, leads <-chan context.Context, what string) context.Context {
	t.Helper()
	select {
	case c := <-leads:
		return c
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no leadership within 30s", what)
		return nil
	}
}

// waitDone waits for c to be cancelled.
func waitDone(t *testing.T, c context.Context, what string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: the lead context is not cancelled within 30s", what)
	}
}

// holder reads the lease: its worker and term, and whether it has expired.
func holder(t *testing.T, pool *pgxpool.Pool, schema string) (worker string, term int64, expired bool) {
	t.Helper()
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT worker, term, expires_at <= now() FROM "+schema+".leader").Scan(&worker, &term, &expired))
	return worker, term, expired
}

// TestLeaderLeaseDefault: the lease defaults to DefaultLeaderLease (the
// leader's record is refreshed every half lease at worst); a lease below
// 100ms is refused.
func TestLeaderLeaseDefault(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	require.Equal(t, pgstore.DefaultLeaderLease/2, s.LeaderRefresh())
	require.Equal(t, 15*time.Second, pgstore.DefaultLeaderLease, "the lease docs/semantics.md states")
	_, err = pgstore.New(pool, &pgstore.Config{Schema: schema, LeaderLease: 50 * time.Millisecond})
	require.Error(t, err)

	// With the default lease, a candidate takes a free lease and renews it.
	leads := leading(t, s, "w-default")
	lead := nextLead(t, leads, "default lease")
	term, ok := store.TermOf(lead)
	require.True(t, ok)
	w, held, expired := holder(t, pool, schema)
	require.Equal(t, "w-default", w)
	require.Equal(t, term, held)
	require.False(t, expired)
	renewed, err := pgstore.Renew(ctx, s, term)
	require.NoError(t, err)
	require.True(t, renewed)
}

// setupPool returns a pool and a migrated schema of its own.
func setupPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	_, pool, schema := setup(t)
	return pool, schema
}

// TestLeaderLeaseExpiryTakeover: a leader that stops renewing its lease
// (Acquire alone: a process that froze right after) loses it when it
// expires; a candidate then takes it with the next term. The frozen
// leader's renewal and fenced writes, once it wakes, are refused and
// change nothing.
func TestLeaderLeaseExpiryTakeover(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	// Long enough for the next Acquire to find it held on a loaded
	// machine; the takeover below waits for it to expire.
	frozen := leaseStore(t, pool, schema, 3*time.Second)
	old, err := pgstore.Acquire(ctx, frozen, "frozen")
	require.NoError(t, err)
	require.Positive(t, old)
	again, err := pgstore.Acquire(ctx, leaseStore(t, pool, schema, 300*time.Millisecond), "other")
	require.NoError(t, err)
	require.Zero(t, again, "a lease held is not taken")

	next := leaseStore(t, pool, schema, 3*time.Second) // its renewals must not lapse while the test writes
	lead := nextLead(t, leading(t, next, "next"), "takeover")
	term, _ := store.TermOf(lead)
	require.Equal(t, old+1, term, "the next term")
	w, held, _ := holder(t, pool, schema)
	require.Equal(t, "next", w)
	require.Equal(t, term, held)

	renewed, err := pgstore.Renew(ctx, frozen, old)
	require.NoError(t, err)
	require.False(t, renewed, "the old leader's renewal finds the lease taken")
	_, err = frozen.PruneEvents(store.WithTerm(ctx, old), &store.PruneEventsParams{OlderThan: time.Hour, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader)
	_, err = frozen.PruneRuns(store.WithTerm(ctx, old), &store.PruneRunsParams{OlderThan: time.Hour, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader)
	_, err = frozen.PruneEvents(store.WithTerm(ctx, term), &store.PruneEventsParams{OlderThan: time.Hour, Limit: 10})
	require.NoError(t, err, "the current term's write applies")
	w, held, _ = holder(t, pool, schema)
	require.Equal(t, "next", w, "the refused writes changed nothing")
	require.Equal(t, term, held)
}

// TestLeaderLeaseExpiredUnclaimed: a lease that expired with nobody to
// take it over refuses its leader's fenced writes all the same.
func TestLeaderLeaseExpiredUnclaimed(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	s := leaseStore(t, pool, schema, 100*time.Millisecond)
	term, err := pgstore.Acquire(ctx, s, "alone")
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, _, expired := holder(t, pool, schema); return expired },
		10*time.Second, 10*time.Millisecond)
	_, err = s.PruneEvents(store.WithTerm(ctx, term), &store.PruneEventsParams{OlderThan: time.Hour, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader)
}

// TestLeaderLeaseFenceHoldsTakeover: a fenced transaction holds the lease
// row, so a takeover of its expired lease waits until it ends: what the old
// leader's transaction wrote commits before the next leader begins.
func TestLeaderLeaseFenceHoldsTakeover(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	// Long enough for the fence below to find it current on a loaded
	// machine; the takeover waits for it to expire.
	s := leaseStore(t, pool, schema, 2*time.Second)
	term, err := pgstore.Acquire(ctx, s, "old")
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT "+schema+".fence($1)", term)
	require.NoError(t, err, "the fence of the current term passes")
	require.Eventually(t, func() bool { _, _, expired := holder(t, pool, schema); return expired },
		10*time.Second, 10*time.Millisecond)

	type acquired struct {
		term int64
		err  error
	}
	got := make(chan acquired, 1)
	go func() {
		term, err := pgstore.Acquire(ctx, leaseStore(t, pool, schema, 200*time.Millisecond), "new")
		got <- acquired{term, err}
	}()
	// The takeover waits for the fenced transaction's lock on the row.
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND position($1 in query) > 0 AND query LIKE '%leader SET term%')`, schema).Scan(&waiting))
		if !waiting {
			select {
			case a := <-got:
				t.Fatalf("the takeover did not wait: %+v", a)
			default:
			}
		}
		return waiting
	}, 10*time.Second, 10*time.Millisecond, "the takeover waits for the fenced transaction")
	select {
	case a := <-got:
		t.Fatalf("the takeover did not wait: %+v", a)
	default:
	}
	require.NoError(t, tx.Commit(ctx))
	a := <-got
	require.NoError(t, a.err)
	require.Equal(t, term+1, a.term, "the takeover follows the commit")
}

// TestLeaderRenewsBesideAStuckFencedWrite: a fenced write that waits (here
// held open; in a frozen-leader takeover, the new leader's rescue waits for
// the locks of the frozen process's open transaction until the server ends
// its session) does not hold up its own leader's renewal: the leader keeps
// its lease instead of losing it to the wait. A takeover still waits for
// the fenced write (TestLeaderLeaseFenceHoldsTakeover).
func TestLeaderRenewsBesideAStuckFencedWrite(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	s := leaseStore(t, pool, schema, time.Minute)
	term, err := pgstore.Acquire(ctx, s, "leader")
	require.NoError(t, err)
	require.Positive(t, term)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT "+schema+".fence($1)", term)
	require.NoError(t, err)

	// Were the renewal to wait for the fenced transaction, it would wait
	// until that ends: the deadline only bounds the failure.
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	renewed, err := pgstore.Renew(rctx, s, term)
	require.NoError(t, err, "the renewal does not wait for the leader's own fenced write")
	require.True(t, renewed)
	// And the fenced write still commits under the term.
	_, err = tx.Exec(ctx, "SELECT "+schema+".fence($1)", term)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

// TestLeaderStepsDownWhenLeaseTaken: a leader whose lease another took
// (here by hand) stops leading at its next renewal, and does not lead
// again while the other holds the lease.
func TestLeaderStepsDownWhenLeaseTaken(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	s := leaseStore(t, pool, schema, 3*time.Second)
	leads := leading(t, s, "leader")
	lead := nextLead(t, leads, "first")
	_, err := pool.Exec(ctx, "UPDATE "+schema+".leader SET term = term + 1, worker = 'thief', expires_at = now() + interval '1 hour'")
	require.NoError(t, err)
	waitDone(t, lead, "lease taken")
	res, err := s.ListWorkers(ctx, &store.ListWorkersParams{})
	require.NoError(t, err)
	for _, w := range res.Workers {
		require.False(t, w.Leader, "no record is listed as leader: the thief has none")
	}
	select {
	case <-leads:
		t.Fatal("led again while another held the lease")
	default:
	}
}

// TestLeaderStepsDownOnRefusedWrite: a leader whose fenced write is refused
// stops leading at once, before its next renewal (a minute away here).
func TestLeaderStepsDownOnRefusedWrite(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	s := leaseStore(t, pool, schema, 3*time.Minute)
	lead := nextLead(t, leading(t, s, "leader"), "first")
	_, err := pool.Exec(ctx, "UPDATE "+schema+".leader SET expires_at = now()")
	require.NoError(t, err)
	_, err = s.PruneEvents(lead, &store.PruneEventsParams{OlderThan: time.Hour, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader)
	waitDone(t, lead, "write refused")
}

// TestLeaderResignsAtOnce: a leader that stops gives its lease up at once,
// and a candidate that listens (Store.Listen) takes it at once, long before
// its next poll (when the lease it read would expire: minutes here).
func TestLeaderResignsAtOnce(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	first := leaseStore(t, pool, schema, 3*time.Minute)
	lctx, cancel := context.WithCancel(ctx)
	leads := make(chan context.Context, 1)
	done := make(chan error, 1)
	go func() {
		done <- first.Lead(lctx, "first", func(ctx context.Context) { leads <- ctx; <-ctx.Done() })
	}()
	lead := nextLead(t, leads, "first")
	term, _ := store.TermOf(lead)

	// The candidate polls on its elector connection: its first poll, which
	// finds the lease held, can be seen in pg_stat_activity.
	second := leaseStore(t, pool, schema, 3*time.Minute)
	n, stop := listen(t, second)
	defer stop()
	n.wait(t, "listening", topic(store.TopicResync))
	next := leading(t, second, "second")
	require.Eventually(t, func() bool {
		var polled bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE application_name = $1 AND state = 'idle' AND query LIKE '%leader SET term%')`,
			pgstore.ApplicationName(schema, "elector:second")).Scan(&polled))
		return polled
	}, 10*time.Second, 10*time.Millisecond, "the candidate polls once and finds the lease held")

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	w, _, expired := holder(t, pool, schema)
	require.True(t, expired || w == "second", "the lease is given up when Lead returns")
	select {
	case c := <-next:
		got, _ := store.TermOf(c)
		require.Equal(t, term+1, got)
	case <-time.After(30 * time.Second):
		t.Fatal("the candidate did not take the lease given up within 30s (its next poll is minutes away)")
	}
}

// activity lists the other sessions' states and statements, for a failure
// message.
func activity(t *testing.T, pool *pgxpool.Pool) string {
	rows, err := pool.Query(ctx, "SELECT coalesce(state, ''), coalesce(wait_event_type, ''), left(query, 80) FROM pg_stat_activity WHERE pid <> pg_backend_pid()")
	require.NoError(t, err)
	defer rows.Close()
	var out string
	for rows.Next() {
		var state, wait, q string
		require.NoError(t, rows.Scan(&state, &wait, &q))
		out += fmt.Sprintf("\n%s %s %q", state, wait, q)
	}
	return out
}

// TestLeaderLeaseSameWorkerTakesOver: a process restarted under the worker
// ID of a leader that died takes its lease at once, with the next term,
// rather than waiting for it to expire; the dead one's term is fenced out.
func TestLeaderLeaseSameWorkerTakesOver(t *testing.T) {
	t.Parallel()
	pool, schema := setupPool(t)
	dead := leaseStore(t, pool, schema, time.Hour)
	old, err := pgstore.Acquire(ctx, dead, "w-1")
	require.NoError(t, err)
	other, err := pgstore.Acquire(ctx, leaseStore(t, pool, schema, time.Hour), "w-2")
	require.NoError(t, err)
	require.Zero(t, other, "another worker waits for the lease to expire")
	term, err := pgstore.Acquire(ctx, leaseStore(t, pool, schema, time.Hour), "w-1")
	require.NoError(t, err)
	require.Equal(t, old+1, term, "the restarted worker takes its lease at once")
	_, err = dead.PruneEvents(store.WithTerm(ctx, old), &store.PruneEventsParams{OlderThan: time.Hour, Limit: 10})
	require.ErrorIs(t, err, durabletype.ErrNotLeader)
}
