package duty

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore answers every duty's calls through the funcs set, and notes
// when each call came (by name) and with what.
type fakeStore struct {
	mu        sync.Mutex
	at        map[string][]time.Time
	deadAfter []time.Duration

	fireTimers    func(n int) (*store.FireTimersResult, error)
	rescue        func(n int) (*store.RescueTasksResult, error)
	applyInbox    func(n int) (*store.ApplyInboxResult, error)
	pruneEvents   func(n int) (*store.PruneEventsResult, error)
	fireSchedules func(n int) (*store.FireSchedulesResult, error)
}

// note notes a call of name and returns how many came before it.
func (s *fakeStore) note(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[string][]time.Time{}
	}
	s.at[name] = append(s.at[name], time.Now())
	return len(s.at[name]) - 1
}

func (s *fakeStore) calls(name string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at[name])
}

// gaps returns the times between the calls of name, and since begin for
// the first.
func (s *fakeStore) gaps(name string, begin time.Time) []time.Duration {
	var out []time.Duration
	for _, at := range s.calls(name) {
		out = append(out, at.Sub(begin))
		begin = at
	}
	return out
}

func (s *fakeStore) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	return s.fireTimers(s.note("timers"))
}

func (s *fakeStore) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	s.mu.Lock()
	s.deadAfter = append(s.deadAfter, p.DeadAfter)
	s.mu.Unlock()
	return s.rescue(s.note("rescue"))
}

func (s *fakeStore) ApplyInbox(ctx context.Context, p *store.ApplyInboxParams) (*store.ApplyInboxResult, error) {
	return s.applyInbox(s.note("inbox"))
}

func (s *fakeStore) PruneEvents(ctx context.Context, p *store.PruneEventsParams) (*store.PruneEventsResult, error) {
	return s.pruneEvents(s.note("events"))
}

func (s *fakeStore) FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	return s.fireSchedules(s.note("schedules"))
}

var (
	errDown   = errors.New("down")
	errDeaf   = fmt.Errorf("refused: %w", durabletype.ErrNotLeader)
	settled   = []store.SettledRun{{RunID: uuid.New(), Status: durabletype.RunCompleted}}
	sec       = time.Second
	notifying = func() bool { return true }
)

// counter counts the runs the Settled hook is given.
type counter struct{ n atomic.Int32 }

func (c *counter) settled(_ context.Context, runs []store.SettledRun) { c.n.Add(int32(len(runs))) }

// Timers fires at once, then at the next due time it knows of; without
// notifications, it looks again every PollInterval; with them, after
// MaxTimerWait at most; a full batch is followed at once by another; Wake
// looks again now; an error backs off from 100ms, doubling.
func TestTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		var c counter
		var heard atomic.Bool
		st.fireTimers = func(n int) (*store.FireTimersResult, error) {
			switch n {
			case 0:
				return &store.FireTimersResult{Fired: timerBatch, Settled: settled}, nil // full: again at once
			case 1:
				return &store.FireTimersResult{Next: 3 * sec, HasNext: true}, nil
			case 3, 4:
				return nil, errDown
			}
			return &store.FireTimersResult{}, nil
		}
		d := NewTimers(TimersConfig{Common: Common{Settled: c.settled}, Store: st, PollInterval: 10 * sec, Notifying: heard.Load})
		begin := time.Now()
		require.NoError(t, d.Start(t.Context()))
		time.Sleep(30 * sec)
		synctest.Wait()
		// 0 at once, 1 at once (full), 2 after Next (3s), 3 after
		// PollInterval (10s) fails, 4 after 100ms fails, 5 after 200ms,
		// 6 after PollInterval.
		ms := time.Millisecond
		require.Equal(t, []time.Duration{0, 0, 3 * sec, 10 * sec, 100 * ms, 200 * ms, 10 * sec}, st.gaps("timers", begin))
		require.EqualValues(t, 1, c.n.Load())

		heard.Store(true)
		time.Sleep(10*sec + MaxTimerWait) // the wait begun without notifications ends, then one with
		synctest.Wait()
		gaps := st.gaps("timers", begin)
		require.Equal(t, MaxTimerWait, gaps[len(gaps)-1], "notifications heard: a minute")
		k := len(gaps)
		d.Wake()
		synctest.Wait()
		require.Len(t, st.calls("timers"), k+1, "woken, at once")
		d.Stop()
	})
}

// A duty whose write is refused because another engine leads stops.
func TestDeposedStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{
			fireTimers:    func(int) (*store.FireTimersResult, error) { return nil, errDeaf },
			rescue:        func(int) (*store.RescueTasksResult, error) { return nil, errDeaf },
			applyInbox:    func(int) (*store.ApplyInboxResult, error) { return nil, errDeaf },
			pruneEvents:   func(int) (*store.PruneEventsResult, error) { return nil, errDeaf },
			fireSchedules: func(int) (*store.FireSchedulesResult, error) { return nil, errDeaf },
		}
		inbox := NewInbox(InboxConfig{Store: st})
		duties := []interface {
			Start(context.Context) error
			Stopped() <-chan struct{}
		}{
			NewTimers(TimersConfig{Store: st, PollInterval: sec}),
			NewRescuer(RescuerConfig{Store: st, DeadAfter: time.Minute, HeartbeatInterval: sec}),
			inbox,
			NewRetention(RetentionConfig{Events: time.Hour, Store: st, Batch: 10}),
			NewRetention(RetentionConfig{Runs: time.Hour, PruneRuns: func(context.Context, time.Duration) (int, error) { return 0, errDeaf }}),
			NewSchedules(SchedulesConfig{Store: st}),
		}
		for _, d := range duties {
			require.NoError(t, d.Start(t.Context()))
		}
		inbox.Wake()
		for i, d := range duties {
			select {
			case <-d.Stopped():
			case <-time.After(time.Hour):
				t.Fatalf("duty %d did not stop when deposed", i)
			}
		}
	})
}

// A new leader rescues nothing until it has been in contact with the store
// for 2×HeartbeatInterval (its passes do the chores only), then rescues
// every DeadAfter/4; a failed pass ends the contact, and the first pass
// that succeeds after it begins it again.
func TestRescuerWaitsForHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		var c counter
		var rescued atomic.Int32
		st.rescue = func(n int) (*store.RescueTasksResult, error) {
			if n == 3 {
				return nil, errDown
			}
			return &store.RescueTasksResult{Rescued: make([]store.TaskRef, 2), Settled: settled}, nil
		}
		d := NewRescuer(RescuerConfig{
			Common: Common{Settled: c.settled}, Store: st, DeadAfter: 40 * sec, HeartbeatInterval: 3 * sec,
			Rescued: func(_ context.Context, res *store.RescueTasksResult) { rescued.Add(int32(len(res.Rescued))) },
		})
		begin := time.Now()
		require.NoError(t, d.Start(t.Context()))
		time.Sleep(50 * sec)
		synctest.Wait()
		d.Stop()
		// 0 at once (untrusted), 1 once the grace (6s) ends, 2 after
		// DeadAfter/4 (10s), 3 fails, 4 after 10s (untrusted: contact
		// begins), 5 after the grace, 6 after 10s.
		require.Equal(t, []time.Duration{0, 6 * sec, 10 * sec, 10 * sec, 10 * sec, 6 * sec}, st.gaps("rescue", begin)[:6])
		none := noneDead
		require.Equal(t, []time.Duration{none, 40 * sec, 40 * sec, 40 * sec, none, 40 * sec}, st.deadAfter[:6])
		require.EqualValues(t, 2*len(st.calls("rescue"))-2, rescued.Load(), "every pass that succeeded")
		require.EqualValues(t, len(st.calls("rescue"))-1, c.n.Load())
	})
}

// The inbox applies messages when woken, again at once while a call
// applied a full batch.
func TestInbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		var c counter
		st.applyInbox = func(n int) (*store.ApplyInboxResult, error) {
			if n == 0 {
				return &store.ApplyInboxResult{Applied: inboxBatch, Settled: settled}, nil
			}
			return &store.ApplyInboxResult{Applied: 1}, nil
		}
		d := NewInbox(InboxConfig{Common: Common{Settled: c.settled}, Store: st})
		require.NoError(t, d.Start(t.Context()))
		defer d.Stop()
		time.Sleep(time.Hour)
		synctest.Wait()
		require.Empty(t, st.calls("inbox"), "not woken: nothing")
		d.Wake()
		synctest.Wait()
		require.Len(t, st.calls("inbox"), 2, "a full batch, then the rest")
		require.EqualValues(t, 1, c.n.Load())
	})
}

// Retention prunes runs and events at once and every Interval (a quarter of
// the shorter retention, between a second and a minute), events a batch at
// a time until one is not full.
func TestRetention(t *testing.T) {
	for _, tc := range []struct{ runs, events, want time.Duration }{
		{time.Hour, 0, time.Minute},
		{0, 2 * sec, sec},
		{time.Hour, 2 * time.Minute, 30 * sec},
		{2 * sec, 2 * time.Minute, sec},
	} {
		require.Equal(t, tc.want, NewRetention(RetentionConfig{Runs: tc.runs, Events: tc.events}).Interval(), "%+v", tc)
	}
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		st.pruneEvents = func(n int) (*store.PruneEventsResult, error) {
			if n == 0 {
				return &store.PruneEventsResult{Deleted: 10}, nil
			}
			return &store.PruneEventsResult{Deleted: 3}, nil
		}
		var runs []time.Duration
		d := NewRetention(RetentionConfig{
			Runs: time.Hour, Events: 2 * time.Minute, Store: st, Batch: 10,
			PruneRuns: func(_ context.Context, olderThan time.Duration) (int, error) {
				runs = append(runs, olderThan)
				return 0, nil
			},
		})
		begin := time.Now()
		require.NoError(t, d.Start(t.Context()))
		time.Sleep(45 * sec)
		synctest.Wait()
		d.Stop()
		// The bubble's clock starts on a minute: passes at once, then a
		// tenth of the interval past each multiple of it (3s, 33s).
		require.Equal(t, []time.Duration{time.Hour, time.Hour, time.Hour}, runs)
		require.Equal(t, []time.Duration{0, 0, 3 * sec, 30 * sec}, st.gaps("events", begin), "a full batch, then the rest; again at 3s and 33s")
	})
}

// TestNextPass: the retention's passes fall a tenth of the interval past
// each multiple of it on the clock, whenever the last pass ended, so that
// they do not drift by their own time.
func TestNextPass(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, "2026-11-29T"+s+"Z")
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		now      string
		interval time.Duration
		want     time.Duration
	}{
		{"10:00:00", 15 * sec, 1500 * time.Millisecond},
		{"10:00:01.4", 15 * sec, 100 * time.Millisecond},
		{"10:00:01.5", 15 * sec, 15 * sec},
		{"10:00:07.3", 15 * sec, 9200 * time.Millisecond},
		{"10:00:14.9", 15 * sec, 1600 * time.Millisecond},
		{"10:00:59", time.Minute, 7 * sec},
		{"10:00:06.5", time.Minute, 59500 * time.Millisecond},
		{"10:00:00.05", sec, 50 * time.Millisecond},
	} {
		require.Equal(t, tc.want, nextPass(at(tc.now), tc.interval), "%+v", tc)
	}
}

// Schedules fires at once, then waits for the next slot it knows of (a
// minute at most without notifications, five with them); with no active
// schedule while notifications are heard, it waits for Wake only. A call
// that fired slots wakes the claims (Fired).
func TestSchedules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		var heard atomic.Bool
		var fired atomic.Int32
		st.fireSchedules = func(n int) (*store.FireSchedulesResult, error) {
			switch n {
			case 0:
				return &store.FireSchedulesResult{Fired: make([]store.FiredSlot, 1), More: true}, nil
			case 1:
				return &store.FireSchedulesResult{Next: 10 * time.Minute, HasNext: true}, nil
			case 2:
				heard.Store(true) // read at the next pass
				return &store.FireSchedulesResult{}, nil
			case 3:
				return &store.FireSchedulesResult{Next: 10 * time.Minute, HasNext: true}, nil
			}
			return &store.FireSchedulesResult{}, nil
		}
		d := NewSchedules(SchedulesConfig{Store: st, Notifying: heard.Load, Fired: func() { fired.Add(1) }})
		begin := time.Now()
		require.NoError(t, d.Start(t.Context()))
		defer d.Stop()
		time.Sleep(time.Hour)
		synctest.Wait()
		// 0 at once (more), 1 at once, 2 after a minute (no
		// notifications), 3 after a minute, 4 after five (notifications
		// heard); then nothing: no active schedule, notifications heard.
		m := time.Minute
		require.Equal(t, []time.Duration{0, 0, m, m, 5 * m}, st.gaps("schedules", begin))
		require.EqualValues(t, 1, fired.Load())
		d.Wake()
		synctest.Wait()
		require.Len(t, st.calls("schedules"), 6, "woken, at once")
	})
}
