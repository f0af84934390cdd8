package registrar

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
	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// call is a call the fake registry took.
type call struct {
	op      string // register, remove, prune
	at      time.Time
	worker  store.Worker
	started bool
}

// fakeRegistry notes its calls; fail makes them fail with its error.
type fakeRegistry struct {
	mu    sync.Mutex
	calls []call
	fail  error
	slow  time.Duration // how long a register takes
}

func (r *fakeRegistry) note(c call) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.at = time.Now()
	r.calls = append(r.calls, c)
	return r.fail
}

func (r *fakeRegistry) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) error {
	time.Sleep(r.slow)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return r.note(call{op: "register", worker: p.Worker, started: p.Started})
}

func (r *fakeRegistry) RemoveWorker(ctx context.Context, p *store.RemoveWorkerParams) error {
	return r.note(call{op: "remove", worker: store.Worker{ID: p.ID}})
}

func (r *fakeRegistry) PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (*store.PruneWorkersResult, error) {
	if err := r.note(call{op: "prune"}); err != nil {
		return nil, err
	}
	return &store.PruneWorkersResult{}, nil
}

func (r *fakeRegistry) taken() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *fakeRegistry) setFail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

type bundle struct {
	reg      *fakeRegistry
	r        *Registrar
	inFlight atomic.Int32
	leader   atomic.Bool
}

func setup(t *testing.T, leaderRefresh time.Duration) *bundle {
	t.Helper()
	b := &bundle{reg: &fakeRegistry{}}
	b.r = New(Config{
		Registry: b.reg, WorkerID: "w", Interval: 10 * time.Second, LeaderRefresh: leaderRefresh,
		Record: func() store.Worker {
			return store.Worker{ID: "w", InFlight: int(b.inFlight.Load()), Leader: b.leader.Load()}
		},
	})
	return b
}

func ops(calls []call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.op)
	}
	return out
}

// The registrar registers the worker (Register, before Start), refreshes
// its record every Interval and at once when asked (Refresh), and removes
// it last (Remove, after Stop).
func TestRecordLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 0)
		begin := time.Now()
		b.r.Register(t.Context(), store.Worker{ID: "w"})
		require.NoError(t, b.r.Start(t.Context()))
		time.Sleep(25 * time.Second)
		synctest.Wait()
		calls := b.reg.taken()
		require.Equal(t, []string{"register", "register", "register"}, ops(calls))
		require.True(t, calls[0].started, "registered as started")
		require.False(t, calls[1].started, "refreshed")
		require.Equal(t, begin.Add(20*time.Second), calls[2].at)

		b.inFlight.Store(3)
		b.r.Refresh()
		synctest.Wait()
		calls = b.reg.taken()
		require.Len(t, calls, 4, "asked, at once")
		require.Equal(t, 3, calls[3].worker.InFlight)

		b.r.Stop()
		time.Sleep(time.Minute)
		require.Len(t, b.reg.taken(), 4, "no refresh once stopped")
		b.r.Remove(t.Context())
		calls = b.reg.taken()
		require.Equal(t, call{op: "remove", at: time.Now(), worker: store.Worker{ID: "w"}}, calls[len(calls)-1])
	})
}

// A failed registration is tried again by the next refresh, which records
// the worker as started.
func TestRegisterFailsRefreshRegisters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 0)
		b.reg.setFail(errors.New("unreachable"))
		b.r.Register(t.Context(), store.Worker{ID: "w"})
		b.reg.setFail(nil)
		require.NoError(t, b.r.Start(t.Context()))
		defer b.r.Stop()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		calls := b.reg.taken()
		require.Len(t, calls, 3)
		require.True(t, calls[1].started, "the first refresh registers")
		require.False(t, calls[2].started)
	})
}

// A leader whose record the store refreshes itself at least every
// Interval skips the periodic refreshes of an unchanged record, but not a
// changed one nor one asked for.
func TestLeaderSkipsUnchangedRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 5*time.Second)
		b.leader.Store(true)
		b.r.Register(t.Context(), store.Worker{ID: "w", Leader: true})
		require.NoError(t, b.r.Start(t.Context()))
		defer b.r.Stop()
		time.Sleep(45 * time.Second)
		synctest.Wait()
		require.Len(t, b.reg.taken(), 2, "registered, then refreshed once (the last record is known); then skipped")
		b.inFlight.Store(1)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Len(t, b.reg.taken(), 3, "a changed record is refreshed")
		b.r.Refresh()
		synctest.Wait()
		require.Len(t, b.reg.taken(), 4, "asked, refreshed")
	})
}

// Stop waits for a refresh in flight rather than cancel it (a cancelled
// statement could still land after Remove).
func TestStopWaitsForRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 0)
		b.reg.slow = 3 * time.Second
		require.NoError(t, b.r.Start(t.Context()))
		time.Sleep(11 * time.Second)
		b.r.Stop()
		require.Equal(t, []string{"register"}, ops(b.reg.taken()), "the refresh in flight landed before Stop returned")
	})
}

// Without a registry, the registrar does nothing.
func TestNoRegistry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Config{WorkerID: "w", Interval: time.Second, Record: func() store.Worker { t.Fatal("no record without a registry"); return store.Worker{} }})
		r.Register(t.Context(), store.Worker{ID: "w"})
		require.NoError(t, r.Start(t.Context()))
		r.Refresh()
		synctest.Wait()
		select {
		case <-r.Started():
			t.Fatal("started a goroutine")
		default:
		}
		r.Stop()
		r.Remove(t.Context())
	})
}

// The pruner prunes when leadership begins and every Interval; deposed, it
// stops.
func TestPruner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &fakeRegistry{}
		p := NewPruner(PrunerConfig{Registry: reg})
		begin := time.Now()
		require.NoError(t, p.Start(t.Context()))
		time.Sleep(PruneInterval + time.Minute)
		synctest.Wait()
		calls := reg.taken()
		require.Equal(t, []string{"prune", "prune"}, ops(calls))
		require.Equal(t, begin, calls[0].at)
		require.Equal(t, begin.Add(PruneInterval), calls[1].at)

		reg.setFail(durabletype.ErrNotLeader)
		time.Sleep(PruneInterval)
		synctest.Wait()
		<-p.Stopped()
		require.Len(t, reg.taken(), 3)
		p.Stop()
	})
}
