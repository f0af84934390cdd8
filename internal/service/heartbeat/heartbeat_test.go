package heartbeat

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore notes when it is stamped and with what, and answers res (or
// fails with err).
type fakeStore struct {
	mu    sync.Mutex
	at    []time.Time
	tasks [][]store.TaskRef
	res   store.HeartbeatResult
	err   error
}

func (s *fakeStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.WorkerID != "w" {
		return nil, errors.New("wrong worker")
	}
	s.at = append(s.at, time.Now())
	s.tasks = append(s.tasks, slices.Clone(p.Tasks))
	if s.err != nil {
		return nil, s.err
	}
	res := s.res
	return &res, nil
}

func (s *fakeStore) stamps() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at)
}

// fakeClaims holds refs and notes the results it is given.
type fakeClaims struct {
	mu   sync.Mutex
	refs []store.TaskRef
	got  []*store.HeartbeatResult
}

func (c *fakeClaims) Refs() []store.TaskRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.refs)
}

func (c *fakeClaims) Heartbeat(res *store.HeartbeatResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, res)
}

func (c *fakeClaims) results() []*store.HeartbeatResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

type bundle struct {
	store  *fakeStore
	claims *fakeClaims
	hb     *Heartbeat
	ref    store.TaskRef
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{store: &fakeStore{}, claims: &fakeClaims{}, ref: store.TaskRef{RunID: uuid.New(), Step: "s", Token: 1}}
	b.claims.refs = []store.TaskRef{b.ref}
	b.hb = New(Config{Store: b.store, Claims: b.claims, WorkerID: "w", Interval: 10 * time.Second})
	return b
}

// The heartbeat vouches for the claims every Interval from its start,
// and at once when asked (Beat); once stopped, never.
func TestBeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		begin := time.Now()
		require.NoError(t, b.hb.Start(t.Context()))
		time.Sleep(35 * time.Second)
		synctest.Wait()
		require.Equal(t, []time.Time{begin.Add(10 * time.Second), begin.Add(20 * time.Second), begin.Add(30 * time.Second)}, b.store.stamps())
		require.Equal(t, []store.TaskRef{b.ref}, b.store.tasks[0])

		b.hb.Beat()
		synctest.Wait()
		require.Len(t, b.store.stamps(), 4, "asked, at once")
		require.Equal(t, begin.Add(35*time.Second), b.store.stamps()[3])

		b.hb.Stop()
		time.Sleep(time.Minute)
		require.Len(t, b.store.stamps(), 4, "none once stopped")
	})
}

// The store's answer goes to the claims, which stop the steps it names;
// without claims, the store is not called.
func TestResultsAndNoClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		b.store.res = store.HeartbeatResult{Lost: []store.TaskRef{b.ref}}
		require.NoError(t, b.hb.Start(t.Context()))
		defer b.hb.Stop()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		got := b.claims.results()
		require.Len(t, got, 1)
		require.Equal(t, []store.TaskRef{b.ref}, got[0].Lost)

		b.claims.mu.Lock()
		b.claims.refs = nil
		b.claims.mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Len(t, b.store.stamps(), 1, "nothing to vouch for: no call")
	})
}

// A failed heartbeat tells the claims nothing; the next beat tries again.
func TestFailureTriesAtNextBeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		b.store.err = errors.New("unreachable")
		require.NoError(t, b.hb.Start(t.Context()))
		defer b.hb.Stop()
		time.Sleep(25 * time.Second)
		synctest.Wait()
		require.Len(t, b.store.stamps(), 2)
		require.Empty(t, b.claims.results())
	})
}

// slowStore takes five seconds to answer.
type slowStore struct{ fakeStore }

func (s *slowStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	time.Sleep(5 * time.Second)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return s.fakeStore.Heartbeat(ctx, p)
}

// Stop does not cancel a heartbeat in flight: it waits for it, so that the
// claims are vouched for until the engine stops them.
func TestStopWaitsForHeartbeatInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		st := &slowStore{}
		hb := New(Config{Store: st, Claims: b.claims, WorkerID: "w", Interval: 10 * time.Second})
		require.NoError(t, hb.Start(t.Context()))
		time.Sleep(11 * time.Second) // in flight
		begin := time.Now()
		hb.Stop()
		require.Equal(t, 4*time.Second, time.Since(begin))
		require.Len(t, st.stamps(), 1, "completed, not cancelled")
		require.Len(t, b.claims.results(), 1)
	})
}

// countingClaims counts how often the heartbeat looks at the claims.
type countingClaims struct {
	fakeClaims
	looks int
}

func (c *countingClaims) Refs() []store.TaskRef {
	c.mu.Lock()
	c.looks++
	c.mu.Unlock()
	return c.fakeClaims.Refs()
}

func (c *countingClaims) lookCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.looks
}

// A heartbeat with no claim to vouch for goes idle: it no longer wakes
// every Interval (an idle engine costs nothing, and virtual time passes
// without wake-ups), until a claim begins (Claimed); it then beats an
// Interval after the claim, and every Interval on.
func TestIdleUntilClaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		claims := &countingClaims{}
		hb := New(Config{Store: st, Claims: claims, WorkerID: "w", Interval: 10 * time.Second})
		require.NoError(t, hb.Start(t.Context()))
		defer hb.Stop()
		time.Sleep(time.Hour)
		synctest.Wait()
		require.Equal(t, 1, claims.lookCount(), "idle after the first beat found nothing")
		require.Empty(t, st.stamps())

		hb.Beat() // asked: it looks, and stays idle
		synctest.Wait()
		require.Equal(t, 2, claims.lookCount())

		time.Sleep(3 * time.Second)
		ref := store.TaskRef{RunID: uuid.New(), Step: "s", Token: 1}
		claims.mu.Lock()
		claims.refs = []store.TaskRef{ref}
		claims.mu.Unlock()
		claimedAt := time.Now()
		hb.Claimed()
		time.Sleep(25 * time.Second)
		synctest.Wait()
		require.Equal(t, []time.Time{claimedAt.Add(10 * time.Second), claimedAt.Add(20 * time.Second)}, st.stamps())

		claims.mu.Lock()
		claims.refs = nil
		claims.mu.Unlock()
		looks := claims.lookCount()
		time.Sleep(time.Hour)
		synctest.Wait()
		require.Equal(t, looks+1, claims.lookCount(), "idle again")
	})
}
