package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// TestCountsCompacted: a retention pass merges the shards of the counts of
// the minutes closed in the last ten into one row per workflow, tenant and
// status, and the stats read the same before and after. The minute in
// progress and minutes older than ten are left as they are.
func TestCountsCompacted(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	counts := pgx.Identifier{schema, "run_counts"}.Sanitize()

	now := time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second)
	closed := now.Add(-3 * time.Minute).Truncate(time.Minute)
	current := now.Truncate(time.Minute)
	old := now.Add(-20 * time.Minute).Truncate(time.Minute)
	for _, r := range []struct {
		minute           time.Time
		workflow, status string
		shard, n         int
	}{
		{closed, "wf", "COMPLETED", 0, 5}, {closed, "wf", "COMPLETED", 3, 7}, {closed, "wf", "COMPLETED", 7, 1},
		{closed, "wf", "FAILED", 2, 4}, {closed, "wf", "FAILED", 5, 6},
		{current, "wf", "COMPLETED", 1, 2}, {current, "wf", "COMPLETED", 4, 3},
		{old, "wf", "COMPLETED", 3, 9}, {old, "wf", "COMPLETED", 6, 1},
	} {
		_, err := pool.Exec(ctx, `INSERT INTO `+counts+` (minute, workflow, tenant, status, shard, n) VALUES ($1, $2, 't', $3, $4, $5)`,
			r.minute, r.workflow, r.status, r.shard, r.n)
		require.NoError(t, err)
	}
	stats := func() []durabletype.RunCount {
		t.Helper()
		st, err := s.Stats(ctx, &store.StatsParams{Now: now, Window: time.Hour})
		require.NoError(t, err)
		return st.Runs
	}
	before := stats()
	require.Equal(t, []durabletype.RunCount{
		{Workflow: "wf", Tenant: "t", Status: durabletype.RunCompleted, Settled: true, Count: 5 + 7 + 1 + 2 + 3 + 9 + 1},
		{Workflow: "wf", Tenant: "t", Status: durabletype.RunFailed, Settled: true, Count: 10},
	}, before)

	res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: now, OlderThan: time.Hour, Limit: 10})
	require.NoError(t, err)
	require.Zero(t, res.Deleted)

	rows, err := pool.Query(ctx, `SELECT minute, status, shard, n FROM `+counts+` ORDER BY minute, status, shard`)
	require.NoError(t, err)
	type row struct {
		minute       time.Time
		status       string
		shard, count int
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.minute, &x.status, &x.shard, &x.count)
		x.minute = x.minute.UTC()
		return x, err
	})
	require.NoError(t, err)
	require.Equal(t, []row{
		{old, "COMPLETED", 3, 9}, {old, "COMPLETED", 6, 1},
		{closed, "COMPLETED", 0, 13}, {closed, "FAILED", 0, 10},
		{current, "COMPLETED", 1, 2}, {current, "COMPLETED", 4, 3},
	}, got)
	require.Equal(t, before, stats(), "the stats read the same")
}
