package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// The leader's renewals of its lease refresh its worker record's last_seen
// (and no other record), so that leading costs no statement for the
// registry.
func TestElectorRefreshesLeaderRecord(t *testing.T) {
	t.Parallel()
	s, _, _ := setup(t)
	pgstore.SetLeaderLease(s, 300*time.Millisecond)
	past := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, id := range []string{"leader", "other"} {
		require.NoError(t, s.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: past, Started: true,
			Worker: store.Worker{ID: id, Concurrency: 1, DeadAfter: time.Minute}}))
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Lead(lctx, "leader", func(ctx context.Context) { <-ctx.Done() }) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := s.ListWorkers(ctx, &store.ListWorkersParams{})
		require.NoError(t, err)
		require.Len(t, res.Workers, 2)
		leader, other := res.Workers[0], res.Workers[1]
		require.True(t, other.LastSeen.Equal(past), "the other record is not touched: %s", other.LastSeen)
		require.True(t, leader.StartedAt.Equal(past), "a refresh keeps the start: %s", leader.StartedAt)
		if leader.LastSeen.After(past) {
			require.True(t, leader.Live, "refreshed on the database's clock")
			break
		}
		require.True(t, time.Now().Before(deadline), "the leader's record was not refreshed within 10s")
		time.Sleep(10 * time.Millisecond)
	}
	require.Positive(t, s.LeaderRefresh())
}
