package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// TestCreateRunsTxSkippedRunTakesNoKey: inside a caller's transaction, a
// run whose ID another transaction inserts meanwhile (same ID, no key) is
// skipped, and the key it asked for is not left behind pointing at the
// other run: a later run with that key is created, not taken for a
// duplicate of a run that never had the key.
func TestCreateRunsTxSkippedRunTakesNoKey(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	other := newRun("wf", "t", sh)

	first, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	require.NoError(t, created(s.CreateRunsTx(ctx, first, &store.CreateRunsParams{Runs: []store.NewRun{other}})))

	keyed := other
	keyed.IdempotencyKey = "the-key"
	type result struct {
		res *store.CreateRunsResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		tx, err := pool.Begin(ctx)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer func() { _ = tx.Rollback(ctx) }()
		res, err := s.CreateRunsTx(ctx, tx, &store.CreateRunsParams{Runs: []store.NewRun{keyed}})
		if err == nil {
			err = tx.Commit(ctx)
		}
		done <- result{res, err}
	}()
	// The second insert waits for the first transaction's ID.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO ' || $1 || '.runs%'`, pgx.Identifier{schema}.Sanitize()).Scan(&n))
		return n > 0
	}, time.Minute, time.Millisecond, "the second insert waits for the first transaction")
	require.NoError(t, first.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.True(t, r.res.Runs[0].Duplicate)
	require.Equal(t, other.ID, r.res.Runs[0].ID)

	var keys int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "idem_keys"}.Sanitize()).Scan(&keys))
	require.Zero(t, keys, "the skipped run's key is released")
	fresh := newRun("wf", "t", sh)
	fresh.IdempotencyKey = "the-key"
	res, err := s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{fresh}})
	require.NoError(t, err)
	require.False(t, res.Runs[0].Duplicate, "the key was never the other run's")
	require.Equal(t, fresh.ID, res.Runs[0].ID)
}

// TestDeletedRunFreesKeysPointingAtIt: deleting a run frees every key that
// points at it, one it does not hold too (left by an engine before the
// keys' table whose insert took the key and then skipped the run for its
// ID, taken by another run).
func TestDeletedRunFreesKeysPointingAtIt(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	r := newRun("wf", "t", sh)
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
	keys := pgx.Identifier{schema, "idem_keys"}.Sanitize()
	_, err := pool.Exec(ctx, "INSERT INTO "+keys+" (workflow, tenant, key, run_id) VALUES ('wf', 't', 'stray', $1)", r.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema, "runs"}.Sanitize()+" WHERE id = $1", r.ID)
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+keys).Scan(&n))
	require.Zero(t, n)
}
