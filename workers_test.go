package durable_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// leaders returns the IDs of the workers that say they lead.
func leaders(ws []durable.WorkerInfo) []string {
	var out []string
	for _, w := range ws {
		if w.Leader {
			out = append(out, w.ID)
		}
	}
	return out
}

// inFlight sums the steps in flight the workers reported.
func stepsInFlight(ws []durable.WorkerInfo) int {
	n := 0
	for _, w := range ws {
		n += w.InFlight
	}
	return n
}

func TestWorkers(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		build := func() (*durable.Workflow[int], *durable.Workflow[int]) {
			wf := durable.NewWorkflow[int]("workers-wf")
			durable.Step(wf, "block", func(ctx durable.Context, n int) (int, error) {
				started <- struct{}{}
				select {
				case <-release:
					return n, nil
				case <-ctx.Done():
					return 0, context.Cause(ctx)
				}
			})
			other := durable.NewWorkflow[int]("workers-other")
			durable.Step(other, "noop", func(ctx durable.Context, n int) (int, error) { return n, nil })
			return wf, other
		}
		// Live is read at single moments: on PostgreSQL a DeadAfter that a
		// loaded machine's late refresh does not outlast.
		dead := h.duration(h.deadAfter(), 10*time.Second)
		wfA, _ := build()
		h.startOn(h.another(), durable.Config{WorkerID: "workers-a", Concurrency: 3, Version: "v-test", DeadAfter: dead}, wfA)
		wfB, otherB := build()
		b := h.startOn(h.another(), durable.Config{WorkerID: "workers-b", DeadAfter: dead}, wfB, otherB)
		c := h.client()

		// Both are listed as soon as Start returns; one of them leads.
		ws, err := c.Workers(ctx)
		require.NoError(t, err)
		require.Len(t, ws, 2)
		require.Equal(t, "workers-a", ws[0].ID)
		require.Equal(t, "workers-b", ws[1].ID)
		require.Equal(t, "v-test", ws[0].Version)
		require.Equal(t, 3, ws[0].Concurrency)
		require.Equal(t, 100, ws[1].Concurrency)
		require.Equal(t, []string{"workers-wf"}, ws[0].Workflows)
		require.Equal(t, []string{"workers-other", "workers-wf"}, ws[1].Workflows)
		for _, w := range ws {
			require.True(t, w.Live, "%s is live", w.ID)
			require.Equal(t, dead, w.DeadAfter)
			require.NotEmpty(t, w.Host)
			require.False(t, w.StartedAt.IsZero())
			require.False(t, w.LastSeen.Before(w.StartedAt))
			require.True(t, w.Serves("workers-wf"))
		}
		require.False(t, ws[0].Serves("workers-other"))
		// Three refreshes in memory (virtual time: a refresh that did not
		// happen fails the test); on PostgreSQL, room for a loaded machine.
		within := h.duration(3*dag.WorkerRefresh(dead), 15*time.Second)
		h.eventually(within, func() bool {
			ws, err = c.Workers(ctx)
			require.NoError(t, err)
			return len(leaders(ws)) == 1
		}, "one leader among %v", ws)
		unserved, err := c.Unserved(ctx, "nope", "workers-wf", "workers-other", "nope")
		require.NoError(t, err)
		require.Equal(t, []string{"nope"}, unserved)

		// A running step is counted in flight at the next refresh, and
		// no longer once it finished.
		id, err := wfA.RunNoWait(ctx, c, "t", 7)
		require.NoError(t, err)
		<-started
		h.eventually(within, func() bool {
			ws, err = c.Workers(ctx)
			require.NoError(t, err)
			return stepsInFlight(ws) == 1
		}, "one step in flight: %+v", ws)
		close(release)
		h.wait(c, id, h.duration(time.Minute, 10*time.Second))
		h.eventually(within, func() bool {
			ws, err = c.Workers(ctx)
			require.NoError(t, err)
			return stepsInFlight(ws) == 0
		}, "no step in flight: %+v", ws)

		// A worker that stops gracefully is gone at once; the other leads.
		require.NoError(t, b.Stop(h.ctx(time.Minute)))
		ws, err = c.Workers(ctx)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		require.Equal(t, "workers-a", ws[0].ID)
		h.eventually(within, func() bool {
			ws, err = c.Workers(ctx)
			require.NoError(t, err)
			return len(ws) == 1 && ws[0].Leader
		}, "workers-a leads: %+v", ws)
		unserved, err = c.Unserved(ctx, "workers-wf", "workers-other")
		require.NoError(t, err)
		require.Equal(t, []string{"workers-other"}, unserved)
	})
}

// A worker that died is listed, not live and not leading, until pruned.
func TestWorkersDead(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		r, ok := h.store.(store.WorkerRegistry)
		require.True(t, ok)
		seen := time.Now().Add(-time.Hour)
		require.NoError(t, r.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: seen, Started: true, Worker: store.Worker{
			ID: "crashed", Workflows: []string{"wf"}, Concurrency: 1, Leader: true, DeadAfter: time.Minute,
		}}))
		c := h.client()
		ws, err := c.Workers(ctx)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		require.False(t, ws[0].Live)
		require.False(t, ws[0].Leader, "a dead worker does not lead")
		require.False(t, ws[0].Serves("wf"))
		unserved, err := c.Unserved(ctx, "wf")
		require.NoError(t, err)
		require.Equal(t, []string{"wf"}, unserved)
	})
}

// On a store without a registry, Workers says so.
func TestWorkersUnsupported(t *testing.T) {
	e, err := durable.New(&hookStore{Store: memstore.New()}, durable.Config{Logger: quiet})
	require.NoError(t, err)
	_, err = e.Workers(context.Background())
	require.ErrorIs(t, err, durable.ErrWorkersUnsupported)
	_, err = e.Unserved(context.Background(), "wf")
	require.ErrorIs(t, err, durable.ErrWorkersUnsupported)
}

func TestConfigVersion(t *testing.T) {
	_, err := durable.New(memstore.New(), durable.Config{Version: string(make([]byte, 256))})
	require.ErrorIs(t, err, durable.ErrInvalidConfig)
	_, err = durable.New(memstore.New(), durable.Config{Version: "\xff"})
	require.ErrorIs(t, err, durable.ErrInvalidConfig)
	// PostgreSQL's text takes no NUL: such a version would never register.
	_, err = durable.New(memstore.New(), durable.Config{Version: "v1\x00"})
	require.ErrorIs(t, err, durable.ErrInvalidConfig)
	_, err = durable.New(memstore.New(), durable.Config{Version: "v1\nv2"})
	require.ErrorIs(t, err, durable.ErrInvalidConfig)
}

// refreshingStore is an in-memory store that claims to refresh the
// leader's record itself (as pgstore's elector does) and counts the
// registrations of each worker.
type refreshingStore struct {
	*memstore.Store
	mu        sync.Mutex
	registers map[string]int
}

func (s *refreshingStore) LeaderRefresh() time.Duration { return time.Second }

func (s *refreshingStore) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) error {
	s.mu.Lock()
	s.registers[p.Worker.ID]++
	s.mu.Unlock()
	return s.Store.RegisterWorker(ctx, p)
}

func (s *refreshingStore) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registers[id]
}

// An idle leader on a store that refreshes the leader's record makes no
// periodic refresh of its own; the other workers refresh theirs every
// dag.WorkerRefresh(DeadAfter).
func TestWorkersLeaderRefreshedByStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &refreshingStore{Store: memstore.New(), registers: map[string]int{}}
		start := func(id string) *durable.Engine {
			e, err := durable.New(st, durable.Config{WorkerID: id, Logger: quiet})
			require.NoError(t, err)
			wf := durable.NewWorkflow[int]("refresh-" + id)
			durable.Step(wf, "s", func(ctx durable.Context, n int) (int, error) { return n, nil })
			require.NoError(t, e.Register(wf))
			require.NoError(t, e.Start(context.Background()))
			return e
		}
		leader := start("leader")
		synctest.Wait() // it leads, and registered again to say so
		require.Equal(t, 2, st.count("leader"), "registered at start and when it began to lead")
		other := start("other")
		synctest.Wait()

		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, 2, st.count("leader"), "an idle leader leaves its refreshes to the store")
		periods := int(time.Minute / dag.WorkerRefresh(30*time.Second))
		require.Equal(t, 1+periods, st.count("other"), "registered at start, refreshed every %s", dag.WorkerRefresh(30*time.Second))

		require.NoError(t, other.Stop(context.Background()))
		require.NoError(t, leader.Stop(context.Background()))
		ws, err := leader.Workers(context.Background())
		require.NoError(t, err)
		require.Empty(t, ws)
	})
}

// Workflows registered after Start are in the record at once.
func TestWorkersRegisterAfterStart(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		first := durable.NewWorkflow[int]("late-first")
		durable.Step(first, "s", func(ctx durable.Context, n int) (int, error) { return n, nil })
		e := h.start(durable.Config{WorkerID: "late"}, first)
		unserved, err := e.Unserved(ctx, "late-first", "late-second")
		require.NoError(t, err)
		require.Equal(t, []string{"late-second"}, unserved)

		second := durable.NewWorkflow[int]("late-second")
		durable.Step(second, "s", func(ctx durable.Context, n int) (int, error) { return n, nil })
		require.NoError(t, e.Register(second))
		h.eventually(h.duration(time.Second, 5*time.Second), func() bool {
			unserved, err = e.Unserved(ctx, "late-first", "late-second")
			require.NoError(t, err)
			return len(unserved) == 0
		}, "both workflows served: unserved %v", unserved)
	})
}

// UnservedQueues: the workflows with ready steps (summed over tenants)
// that no live worker serves, by name; a dead worker serves nothing.
func TestUnservedQueues(t *testing.T) {
	workers := []durable.WorkerInfo{
		{ID: "live", Live: true, Workflows: []string{"served"}},
		{ID: "dead", Live: false, Workflows: []string{"orphan"}},
	}
	st := &durabletype.Stats{Queues: []durabletype.QueueStats{
		{Workflow: "zeta", Tenant: "a", Ready: 2},
		{Workflow: "served", Tenant: "a", Ready: 5},
		{Workflow: "orphan", Tenant: "a", Ready: 1},
		{Workflow: "orphan", Tenant: "b", Ready: 3},
		{Workflow: "idle", Tenant: "a", Waiting: 4},
	}}
	require.Equal(t, []durable.UnservedWorkflow{{Workflow: "orphan", Ready: 4}, {Workflow: "zeta", Ready: 2}},
		durable.UnservedQueues(workers, st))
	require.Empty(t, durable.UnservedQueues(workers, &durabletype.Stats{}))
}

// lateRegistry is a memory store whose worker refresh, when its context is
// cancelled while it runs, lands anyway after the record's removal: what a
// statement already on its way to PostgreSQL does when its client gives up
// on it.
type lateRegistry struct {
	*memstore.Store
	entered, release, removed chan struct{}
	late                      sync.WaitGroup
	blocking                  atomic.Bool
	once                      sync.Once
}

func (s *lateRegistry) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) error {
	if !s.blocking.Load() {
		return s.Store.RegisterWorker(ctx, p)
	}
	s.once.Do(func() { close(s.entered) })
	select {
	case <-s.release:
		return s.Store.RegisterWorker(ctx, p)
	case <-ctx.Done():
		s.late.Go(func() {
			<-s.removed
			_ = s.Store.RegisterWorker(context.Background(), p)
		})
		return ctx.Err()
	}
}

func (s *lateRegistry) RemoveWorker(ctx context.Context, p *store.RemoveWorkerParams) error {
	defer close(s.removed)
	return s.Store.RemoveWorker(ctx, p)
}

// A refresh of the worker's record in flight when the engine stops is
// waited for, not abandoned: abandoned, it could land after Stop removed
// the record and bring the stopped worker back to the list.
func TestWorkersRefreshInFlightAtStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lateRegistry{Store: memstore.New(), entered: make(chan struct{}), release: make(chan struct{}), removed: make(chan struct{})}
		e, err := durable.New(s, durable.Config{Logger: quiet, WorkerID: "stopping"})
		require.NoError(t, err)
		first := durable.NewWorkflow[int]("first")
		durable.Step(first, "a", func(ctx durable.Context, n int) (int, error) { return n, nil })
		require.NoError(t, e.Register(first))
		ctx := context.Background()
		require.NoError(t, e.Start(ctx))

		// Registering a workflow after Start refreshes the record at once.
		s.blocking.Store(true)
		second := durable.NewWorkflow[int]("second")
		durable.Step(second, "b", func(ctx durable.Context, n int) (int, error) { return n, nil })
		require.NoError(t, e.Register(second))
		<-s.entered

		stopped := make(chan error, 1)
		go func() { stopped <- e.Stop(ctx) }()
		synctest.Wait() // Stop waits for the refresh
		close(s.release)
		require.NoError(t, <-stopped)
		s.late.Wait()
		ws, err := s.ListWorkers(ctx, &store.ListWorkersParams{Now: time.Now()})
		require.NoError(t, err)
		require.Empty(t, ws.Workers, "a stopped worker is not listed")
	})
}

// dyingStore is the store of an engine whose process the test kills: once
// killed, nothing it writes to the worker registry lands (a dead process
// writes nothing), and its leadership ends without a resignation (on
// PostgreSQL the backend of its election connection is terminated, as when
// the process is SIGKILLed; in memory the leadership is taken from it).
type dyingStore struct {
	store.Store
	dead    atomic.Bool
	leadCtx context.Context
	endLead context.CancelFunc
}

func newDyingStore(inner store.Store) *dyingStore {
	ctx, cancel := context.WithCancel(context.Background())
	return &dyingStore{Store: inner, leadCtx: ctx, endLead: cancel}
}

var errDead = errors.New("the process is dead")

func (s *dyingStore) Listen(ctx context.Context, deliver func(store.Notification)) error {
	return s.Store.(store.Listener).Listen(ctx, deliver)
}

// Lead campaigns until the engine stops or the test kills the process.
func (s *dyingStore) Lead(ctx context.Context, id string, lead func(ctx context.Context)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.leadCtx, cancel)
	defer stop()
	return s.Store.(store.Elector).Lead(ctx, id, lead)
}

func (s *dyingStore) registry() store.WorkerRegistry { return s.Store.(store.WorkerRegistry) }

func (s *dyingStore) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) error {
	if s.dead.Load() {
		return errDead
	}
	return s.registry().RegisterWorker(ctx, p)
}

func (s *dyingStore) RemoveWorker(ctx context.Context, p *store.RemoveWorkerParams) error {
	if s.dead.Load() {
		return errDead
	}
	return s.registry().RemoveWorker(ctx, p)
}

func (s *dyingStore) ListWorkers(ctx context.Context, p *store.ListWorkersParams) (*store.ListWorkersResult, error) {
	return s.registry().ListWorkers(ctx, p)
}

func (s *dyingStore) PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (*store.PruneWorkersResult, error) {
	return s.registry().PruneWorkers(ctx, p)
}

// A leader killed without a word (its record still says it leads, and is
// live for DeadAfter) is not listed as the leader beside the next one:
// only the worker that holds the leadership now is, as soon as it holds it.
func TestWorkersLeaderKilled(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		// A DeadAfter long enough that the killed leader is listed live
		// throughout the test.
		cfg := func(id string) durable.Config {
			return durable.Config{WorkerID: id, HeartbeatInterval: h.duration(5*time.Second, 200*time.Millisecond),
				DeadAfter: h.duration(time.Minute, 10*time.Second)}
		}
		build := func() *durable.Workflow[int] {
			wf := durable.NewWorkflow[int]("leader-killed")
			durable.Step(wf, "s", func(ctx durable.Context, n int) (int, error) { return n, nil })
			return wf
		}
		dying := newDyingStore(h.another())
		h.startOn(dying, cfg("first"), build())
		c := h.client()
		var ws []durable.WorkerInfo
		refresh := func() {
			var err error
			ws, err = c.Workers(ctx)
			require.NoError(t, err)
		}
		within := h.duration(time.Minute, 10*time.Second)
		h.eventually(within, func() bool {
			refresh()
			return len(ws) == 1 && ws[0].Leader
		}, "first leads: %+v", ws)
		h.startOn(h.another(), cfg("second"), build())
		refresh()
		require.Equal(t, []string{"first"}, leaders(ws), "second waits for the leadership")

		// Kill the leader's process: its record stays as it last wrote it.
		dying.dead.Store(true)
		if h.pg != nil {
			_, err := h.pg.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
				pgstore.ApplicationName(h.pg.schema, "elector:first"))
			require.NoError(t, err)
		}
		dying.endLead()

		// Until its session is gone (or, in memory, its duties have
		// returned) the killed leader holds the leadership and may be
		// listed; never beside the next one.
		h.eventually(within, func() bool {
			refresh()
			require.LessOrEqual(t, len(leaders(ws)), 1, "two leaders listed: %+v", ws)
			return slices.Equal(leaders(ws), []string{"second"})
		}, "second leads: %+v", ws)
		require.Len(t, ws, 2)
		require.True(t, ws[0].Live, "the killed leader is still listed live (within its DeadAfter): %+v", ws[0])
		require.Equal(t, "first", ws[0].ID)
	})
}
