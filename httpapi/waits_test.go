package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// countingStore counts the reads of one run and of one run's tasks.
type countingStore struct {
	*memstore.Store
	gets, lists atomic.Int64
}

func (s *countingStore) GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error) {
	s.gets.Add(1)
	return s.Store.GetRun(ctx, id)
}

func (s *countingStore) ListTasks(ctx context.Context, id uuid.UUID) ([]*store.Task, error) {
	s.lists.Add(1)
	return s.Store.ListTasks(ctx, id)
}

// plainStore is a store with no optional capability (store.WaitLister
// among them).
type plainStore struct{ store.Store }

// TestListRunsWaitsInOneRead: include=waits reads the waits of a page in
// one call of the store (store.WaitLister), not the runs and their tasks
// one by one; a store without that capability still gets them, one run at
// a time, and both say the same.
func TestListRunsWaitsInOneRead(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	en := newEngineEnv(t, s, waitingFlows()...)
	running := []uuid.UUID{
		en.trigger(t, "acme", "gate", map[string]any{"input": "po-1"}),
		en.trigger(t, "acme", "napper", map[string]any{"input": 1}),
		en.trigger(t, "acme", "retrier", map[string]any{"input": 1}),
		en.trigger(t, "acme", "fanout", map[string]any{"input": 2}),
	}
	quick := en.trigger(t, "acme", "quick", map[string]any{"input": 1})
	require.Equal(t, durabletype.RunCompleted, en.settle(t, quick).Status)
	require.Eventually(t, func() bool {
		runs := en.listed(t, "acme", "include=waits")
		for _, id := range running {
			if len(runs[id].Waits) != 1 || (runs[id].Workflow == "fanout" && runs[id].Waits[0].Items != 2) {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond)

	// Served by engines that are not started (no background reads), on
	// the same runs.
	list := func(st store.Store) map[uuid.UUID]listedRun {
		t.Helper()
		e, err := durable.New(st, durable.Config{Logger: quiet})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		httpapi.New(e, httpapi.Options{Logger: quiet}).ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/runs?include=waits", nil))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var page struct {
			Runs []listedRun `json:"runs"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		out := map[uuid.UUID]listedRun{}
		for _, r := range page.Runs {
			out[r.ID] = r
		}
		return out
	}
	batched := &countingStore{Store: s}
	got := list(batched)
	require.Zero(t, batched.gets.Load(), "no run read one by one")
	require.Zero(t, batched.lists.Load(), "no run's tasks read one by one")
	require.Len(t, got, len(running)+1)
	for _, id := range running {
		require.Len(t, got[id].Waits, 1, got[id].Workflow)
	}
	require.Empty(t, got[quick].Waits)

	byRun := &countingStore{Store: s}
	require.Equal(t, got, list(plainStore{byRun}), "the same waits without store.WaitLister")
	require.Equal(t, int64(len(running)), byRun.lists.Load(), "one read per running run")
}
