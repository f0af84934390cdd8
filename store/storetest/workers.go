package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// registry returns s as a store.WorkerRegistry, skipping the test for a
// store without one.
func registry(t *testing.T, s store.Store) store.WorkerRegistry {
	t.Helper()
	r, ok := s.(store.WorkerRegistry)
	if !ok {
		t.Skip("store has no worker registry")
	}
	return r
}

func listWorkers(t *testing.T, r store.WorkerRegistry, now time.Time) []store.Worker {
	t.Helper()
	res, err := r.ListWorkers(ctx, &store.ListWorkersParams{Now: now})
	require.NoError(t, err)
	require.True(t, res.Now.Equal(now), "ListWorkers judged liveness at %s, not at the given %s", res.Now, now)
	return res.Workers
}

func testWorkerRegistry(t *testing.T, st store.Store) {
	r := registry(t, st)
	const window = 30 * time.Second
	w1 := store.Worker{ID: "w-1", Host: "host-a", Version: "v1.2.3", Workflows: []string{"checkout", "refund"},
		Concurrency: 8, InFlight: 3, Leader: true, DeadAfter: window}
	w2 := store.Worker{ID: "w-2", Host: "host-b", Version: "", Concurrency: 1, DeadAfter: 2 * window}
	// Registered in the reverse order of their IDs: the list is ordered.
	require.NoError(t, r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: T0.Add(time.Second), Worker: w2, Started: true}))
	require.NoError(t, r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: T0, Worker: w1, Started: true}))

	got := listWorkers(t, r, T0.Add(2*time.Second))
	require.Len(t, got, 2)
	want1 := w1
	want1.StartedAt, want1.LastSeen, want1.Live = T0, T0, true
	if _, ok := st.(store.Elector); ok {
		want1.Leader = false // it says it leads, but does not (see WorkerLeaderHoldsLead)
	}
	want2 := w2
	want2.StartedAt, want2.LastSeen, want2.Live = T0.Add(time.Second), T0.Add(time.Second), true
	requireWorker(t, want1, got[0])
	requireWorker(t, want2, got[1])

	// A refresh replaces the record but keeps when the worker started.
	w1.InFlight, w1.Leader, w1.Workflows = 0, false, []string{"checkout"}
	require.NoError(t, r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: T0.Add(10 * time.Second), Worker: w1}))
	got = listWorkers(t, r, T0.Add(10*time.Second))
	want1 = w1
	want1.StartedAt, want1.LastSeen, want1.Live = T0, T0.Add(10*time.Second), true
	requireWorker(t, want1, got[0])

	// Liveness is each record's own window (dag.WorkerLive).
	at := T0.Add(10*time.Second + window)
	got = listWorkers(t, r, at)
	require.False(t, got[0].Live, "w-1 last seen %s, window %s, at %s", got[0].LastSeen, window, at)
	require.True(t, got[1].Live, "w-2's window is %s", 2*window)
	got = listWorkers(t, r, at.Add(-time.Microsecond))
	require.True(t, got[0].Live)

	// A process restarted under the same ID starts anew.
	require.NoError(t, r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: T0.Add(time.Minute), Worker: w1, Started: true}))
	got = listWorkers(t, r, T0.Add(time.Minute))
	require.True(t, got[0].StartedAt.Equal(T0.Add(time.Minute)), "started at %s", got[0].StartedAt)

	// A refresh of a record that is gone creates it.
	require.NoError(t, r.RemoveWorker(ctx, &store.RemoveWorkerParams{ID: "w-2"}))
	require.NoError(t, r.RemoveWorker(ctx, &store.RemoveWorkerParams{ID: "w-2"}), "removing an unknown worker")
	got = listWorkers(t, r, T0.Add(time.Minute))
	require.Len(t, got, 1)
	require.Equal(t, "w-1", got[0].ID)
	require.NoError(t, r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: T0.Add(2 * time.Minute), Worker: w2}))
	got = listWorkers(t, r, T0.Add(2*time.Minute))
	require.Len(t, got, 2)
	require.True(t, got[1].StartedAt.Equal(T0.Add(2*time.Minute)), "started at %s", got[1].StartedAt)
}

func testWorkerRegistryInvalid(t *testing.T, st store.Store) {
	r := registry(t, st)
	for name, w := range map[string]store.Worker{
		"empty id":      {DeadAfter: time.Second},
		"negative":      {ID: "w", Concurrency: -1, DeadAfter: time.Second},
		"no deadAfter":  {ID: "w"},
		"unsorted":      {ID: "w", Workflows: []string{"b", "a"}, DeadAfter: time.Second},
		"bad utf8 host": {ID: "w", Host: "\xff", DeadAfter: time.Second},
		"nul version":   {ID: "w", Version: "v1\x00", DeadAfter: time.Second},
		"control host":  {ID: "w", Host: "a\tb", DeadAfter: time.Second},
	} {
		err := r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: T0, Worker: w, Started: true})
		require.ErrorIs(t, err, durabletype.ErrInvalidWorker, name)
	}
	require.Empty(t, listWorkers(t, r, T0))
}

func testWorkerPrune(t *testing.T, st store.Store) {
	r := registry(t, st)
	short := store.Worker{ID: "short", DeadAfter: time.Second}
	long := store.Worker{ID: "long", DeadAfter: 2 * dag.WorkerPruneAfter}
	for _, w := range []store.Worker{short, long} {
		require.NoError(t, r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: T0, Worker: w, Started: true}))
	}
	prune := func(now time.Time) int {
		res, err := r.PruneWorkers(ctx, &store.PruneWorkersParams{Now: now})
		require.NoError(t, err)
		return res.Deleted
	}
	require.Zero(t, prune(T0.Add(dag.WorkerPruneAfter-time.Microsecond)))
	require.Equal(t, 1, prune(T0.Add(dag.WorkerPruneAfter)))
	got := listWorkers(t, r, T0.Add(dag.WorkerPruneAfter))
	require.Len(t, got, 1)
	require.Equal(t, "long", got[0].ID)
	require.True(t, got[0].Live, "a worker within its own window is live and kept")
	require.Equal(t, 1, prune(T0.Add(2*dag.WorkerPruneAfter)))
	require.Empty(t, listWorkers(t, r, T0.Add(2*dag.WorkerPruneAfter)))
}

func requireWorker(t *testing.T, want, got store.Worker) {
	t.Helper()
	require.True(t, want.StartedAt.Equal(got.StartedAt), "%s: started at %s, want %s", want.ID, got.StartedAt, want.StartedAt)
	require.True(t, want.LastSeen.Equal(got.LastSeen), "%s: last seen %s, want %s", want.ID, got.LastSeen, want.LastSeen)
	got.StartedAt, got.LastSeen = want.StartedAt, want.LastSeen
	if len(want.Workflows) == 0 {
		require.Empty(t, got.Workflows)
		got.Workflows = want.Workflows
	}
	require.Equal(t, want, got)
}

// listedLeaders returns the IDs of the workers listed as leading at now.
func listedLeaders(t *testing.T, r store.WorkerRegistry, now time.Time) []string {
	t.Helper()
	var out []string
	for _, w := range listWorkers(t, r, now) {
		if w.Leader {
			out = append(out, w.ID)
		}
	}
	return out
}

// testWorkerLeaderHoldsLead: a store that hands out leadership (an
// Elector) lists as the leader the worker that leads now and no other,
// whatever the records say. Both records below say they lead, as the
// record of a leader that died without a word does.
func testWorkerLeaderHoldsLead(t *testing.T, st store.Store) {
	r := registry(t, st)
	el, ok := st.(store.Elector)
	if !ok {
		t.Skip("store hands out no leadership")
	}
	for _, id := range []string{"w-1", "w-2"} {
		require.NoError(t, r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: T0, Started: true,
			Worker: store.Worker{ID: id, Leader: true, DeadAfter: time.Hour}}))
	}
	listAt := T0.Add(time.Second) // both live
	require.Empty(t, listedLeaders(t, r, listAt), "nobody leads")

	// lead makes id the leader and returns once it leads, and a function
	// that resigns and returns once Lead has returned.
	lead := func(id string) func() {
		lctx, cancel := context.WithCancel(ctx)
		leading := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- el.Lead(lctx, id, func(ctx context.Context) {
				close(leading)
				<-ctx.Done()
			})
		}()
		select {
		case <-leading:
		case err := <-done:
			t.Fatalf("Lead(%s) returned without leading: %v", id, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s does not lead within 10s", id)
		}
		return func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		}
	}
	resign := lead("w-1")
	require.Equal(t, []string{"w-1"}, listedLeaders(t, r, listAt), "listed as soon as it leads")
	resign()
	require.Empty(t, listedLeaders(t, r, listAt), "w-1 no longer leads; its record still says so")
	resign = lead("w-2")
	require.Equal(t, []string{"w-2"}, listedLeaders(t, r, listAt))
	resign()
	require.Empty(t, listedLeaders(t, r, listAt))
}
