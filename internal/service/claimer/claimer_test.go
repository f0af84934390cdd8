package claimer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore has ready tasks to claim; it notes when each claim came and
// its limit, and fails while err is set. A claim takes took.
type fakeStore struct {
	mu     sync.Mutex
	ready  int
	at     []time.Time
	limits []int
	err    error
	took   time.Duration
}

func (s *fakeStore) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	time.Sleep(s.took)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.WorkerID != "w" || !slices.Equal(p.Workflows, []string{"wf"}) || !slices.Equal(p.Queues, []string{"wf@1"}) || p.TenantLimit != 3 {
		return nil, errors.New("wrong params")
	}
	s.at = append(s.at, time.Now())
	s.limits = append(s.limits, p.Limit)
	if s.err != nil {
		return nil, s.err
	}
	n := min(s.ready, p.Limit)
	s.ready -= n
	out := make([]*store.ClaimedTask, n)
	for i := range out {
		out[i] = &store.ClaimedTask{RunID: uuid.New(), Step: "s"}
	}
	return out, nil
}

func (s *fakeStore) add(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready += n
}

func (s *fakeStore) claims() ([]time.Time, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at), slices.Clone(s.limits)
}

// executor holds the tasks it is given until finish frees their slots.
type executor struct {
	mu      sync.Mutex
	running []*store.ClaimedTask
	total   int
	c       *Claimer
}

func (x *executor) Execute(c *store.ClaimedTask) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.running = append(x.running, c)
	x.total++
}

// finish ends n running steps.
func (x *executor) finish(n int) {
	x.mu.Lock()
	x.running = x.running[n:]
	x.mu.Unlock()
	for range n {
		x.c.Done()
	}
}

func (x *executor) count() (running, total int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.running), x.total
}

type bundle struct {
	store *fakeStore
	exec  *executor
	c     *Claimer
	heard atomic.Bool
	took  []time.Duration
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{store: &fakeStore{}, exec: &executor{}}
	b.c = New(Config{
		Store: b.store, Executor: b.exec, WorkerID: "w", Slots: 5, Batch: 2, TenantLimit: 3,
		PollInterval: time.Second, MaxPollInterval: 8 * time.Second,
		Served:    func() ([]string, []string) { return []string{"wf"}, []string{"wf@1"} },
		Notifying: b.heard.Load,
		Claimed:   func(claimed []*store.ClaimedTask, took time.Duration) { b.took = append(b.took, took) },
	})
	b.exec.c = b.c
	return b
}

// The claimer claims Batch at a time while slots are free, and no more
// than the free slots; when they are all taken it waits for one to free.
func TestClaimsWhileSlotsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		b.store.add(20)
		require.NoError(t, b.c.Start(t.Context()))
		defer b.c.Stop()
		synctest.Wait()
		running, _ := b.exec.count()
		require.Equal(t, 5, running, "every slot taken")
		_, limits := b.store.claims()
		require.Equal(t, []int{2, 2, 1}, limits, "Batch at a time, no more than the free slots")

		time.Sleep(time.Hour)
		synctest.Wait()
		_, limits = b.store.claims()
		require.Len(t, limits, 3, "no claim while no slot is free")

		b.exec.finish(3)
		synctest.Wait()
		running, total := b.exec.count()
		require.Equal(t, 5, running)
		require.Equal(t, 8, total)
	})
}

// An empty queue is looked at again every PollInterval; while
// notifications are heard, the interval doubles up to MaxPollInterval, and
// a wake-up (Wake) looks at once and brings it back to PollInterval.
func TestPollsAndBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		begin := time.Now()
		require.NoError(t, b.c.Start(t.Context()))
		defer b.c.Stop()
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		at, _ := b.store.claims()
		s := time.Second
		require.Equal(t, []time.Time{begin, begin.Add(s), begin.Add(2 * s), begin.Add(3 * s)}, at, "no notifications: every PollInterval")

		b.heard.Store(true)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		at, _ = b.store.claims()
		var gaps []time.Duration
		for i := 4; i < len(at); i++ {
			gaps = append(gaps, at[i].Sub(at[i-1]))
		}
		require.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 8 * s}, gaps, "notifications heard: doubling up to MaxPollInterval")

		b.store.add(1)
		k := len(at)
		b.c.Wake()
		synctest.Wait()
		at, _ = b.store.claims()
		require.Len(t, at, k+1, "woken: at once")
		_, total := b.exec.count()
		require.Equal(t, 1, total)
		time.Sleep(s)
		synctest.Wait()
		at, _ = b.store.claims()
		require.Len(t, at, k+2, "then PollInterval again")
	})
}

// A failed claim is tried again after 100ms, doubling; every claim, failed
// or not, is reported with its duration.
func TestClaimErrorsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		b.store.err = errors.New("down")
		b.store.took = 5 * time.Millisecond
		begin := time.Now()
		require.NoError(t, b.c.Start(t.Context()))
		time.Sleep(320 * time.Millisecond)
		synctest.Wait()
		b.c.Stop()
		at, _ := b.store.claims()
		ms := time.Millisecond
		require.Equal(t, []time.Time{begin.Add(5 * ms), begin.Add(110 * ms), begin.Add(315 * ms)}, at)
		require.Equal(t, []time.Duration{5 * ms, 5 * ms, 5 * ms}, b.took)
	})
}

// Stop does not interrupt a claim in flight: the tasks it claimed are
// executed before the claimer returns.
func TestStopLetsClaimFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		b.store.add(2)
		b.store.took = time.Second
		require.NoError(t, b.c.Start(t.Context()))
		time.Sleep(time.Millisecond) // the claim is in flight
		b.c.Stop()
		_, total := b.exec.count()
		require.Equal(t, 2, total, "claimed, so executed")
		_, limits := b.store.claims()
		require.Len(t, limits, 1, "no claim after Stop")
	})
}
