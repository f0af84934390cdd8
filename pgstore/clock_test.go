package pgstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// TestClaimIsStampedAfterItsTaskWasQueued: a claim whose transaction began
// before its task was queued is stamped with the time it took the task, not
// its transaction's start, so that a run's STARTED event never precedes the
// QUEUED event before it. (Claims stamped now() while transitions stamped
// clock_timestamp(): under load some STARTED events were up to 26 ms earlier
// than their QUEUED events.)
func TestClaimIsStampedAfterItsTaskWasQueued(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx) // the claim's transaction starts here
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, "SELECT now()")
	require.NoError(t, err)

	r := newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))

	rows, err := tx.Query(ctx, pgstore.Statements(schema)["claim"], []string{"wf"}, 10, "w", nil, nil)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 1, n)
	require.NoError(t, tx.Commit(ctx))

	evs, err := s.ListEvents(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, durabletype.EventQueued, evs[0].Type)
	require.Equal(t, durabletype.EventStarted, evs[1].Type)
	require.False(t, evs[1].At.Before(evs[0].At), "STARTED at %s precedes QUEUED at %s", evs[1].At, evs[0].At)
}
